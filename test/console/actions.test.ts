import { describe, expect, it } from "vitest";
import type { ActionOutcome, OpsActions } from "../../lib/operator/actions";
import { answerPost, parseAction } from "../../lib/operator/console/actions";
import { FlashMessages } from "../../lib/operator/console/flash";
import { formOf, MAX_REASON, reasonOf, textOf } from "../../lib/operator/console/form-data";
import {
  newFormToken,
  postAddressProblem,
  tokenMatches,
} from "../../lib/operator/console/post-guard";
import { RUN_ID } from "./fixtures";

/** The console's POSTs without a browser or a stack: the guard, the form reading, the answer. */

const OWN = "127.0.0.1:8630";
const TOKEN = "t0ken-of-this-console_0123456789abcdefghijklmn";

const form = (fields: Record<string, string>) => new URLSearchParams(fields);

/** OpsActions that record what they were asked and answer `sent`. */
function recordingActions(answer?: () => Promise<ActionOutcome>) {
  const calls: unknown[][] = [];
  const record =
    (name: string) =>
    async (...args: unknown[]): Promise<ActionOutcome> => {
      calls.push([name, ...args]);
      return answer ? answer() : { kind: "sent", message: `${name} sent (event id E1)` };
    };
  const actions: OpsActions = {
    run: record("run"),
    review: record("review"),
    resolveSend: record("resolveSend"),
    redrive: record("redrive"),
    decideStep: record("decideStep"),
    start: record("start"),
    stopOrResume: record("stopOrResume"),
  };
  return { actions, calls };
}

describe("the form token", () => {
  it("is 32 random bytes, new each time", () => {
    const a = newFormToken();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newFormToken()).not.toBe(a);
  });

  it("matches only itself", () => {
    expect(tokenMatches(TOKEN, TOKEN)).toBe(true);
    expect(tokenMatches(TOKEN, `${TOKEN}x`)).toBe(false);
    expect(tokenMatches(TOKEN, TOKEN.slice(0, -1))).toBe(false);
    expect(tokenMatches(TOKEN, TOKEN.replace("t", "T"))).toBe(false);
    for (const nothing of ["", null, undefined]) expect(tokenMatches(TOKEN, nothing)).toBe(false);
  });
});

describe("postAddressProblem", () => {
  it("takes a POST to the console's own address, with its Origin or none", () => {
    expect(postAddressProblem(OWN, { host: OWN })).toBeUndefined();
    expect(postAddressProblem(OWN, { host: OWN, origin: `http://${OWN}` })).toBeUndefined();
  });

  it("refuses another Host (even a loopback name) and another or an opaque Origin", () => {
    expect(postAddressProblem(OWN, {})).toContain("Host was missing");
    expect(postAddressProblem(OWN, { host: "localhost:8630" })).toContain("Host was localhost");
    expect(postAddressProblem(OWN, { host: "127.0.0.1:9999" })).toBeDefined();
    expect(postAddressProblem(OWN, { host: OWN, origin: "null" })).toContain("Origin was null");
    expect(postAddressProblem(OWN, { host: OWN, origin: "http://evil.example" })).toBeDefined();
    expect(postAddressProblem(OWN, { host: OWN, origin: `https://${OWN}` })).toBeDefined();
  });
});

describe("reading a form", () => {
  it("reads URL-encoded bodies only", () => {
    expect(formOf("application/x-www-form-urlencoded; charset=UTF-8", "a=1&b=x+y")?.get("b")).toBe(
      "x y",
    );
    expect(formOf("multipart/form-data; boundary=x", "a=1")).toBeUndefined();
    expect(formOf(undefined, "a=1")).toBeUndefined();
  });

  it("requires a reason of at most 1000 characters, trimmed", () => {
    expect(reasonOf(form({}))).toEqual({ problem: "a reason is required (say why); nothing sent" });
    expect(reasonOf(form({ reason: "  \r\n " }))).toHaveProperty("problem");
    expect(reasonOf(form({ reason: "x".repeat(MAX_REASON + 1) }))).toEqual({
      problem: "the reason is 1001 characters, at most 1000; nothing sent",
    });
    expect(reasonOf(form({ reason: "  vendor lost it " }))).toEqual({ reason: "vendor lost it" });
  });

  it("gives text areas LF line breaks", () => {
    expect(textOf(form({ text: "a\r\nb\rc\nd" }), "text")).toBe("a\nb\nc\nd");
    expect(textOf(form({}), "text")).toBeUndefined();
  });
});

describe("parseAction", () => {
  const reason = "because";
  const runBack = `/runs/${RUN_ID}`;

  it("reads each run action and goes back to the run's page", () => {
    const at = (verb: string, fields: Record<string, string>) =>
      parseAction(`/runs/${RUN_ID}/${verb}`, form({ reason, ...fields }));
    expect(at("cancel", {})).toEqual({
      back: runBack,
      reason,
      action: { kind: "run", runId: RUN_ID, request: { kind: "cancel", reason } },
    });
    expect(at("reset", { node: "writing" })).toMatchObject({
      action: { request: { kind: "reset", nodeId: "writing", reason } },
    });
    expect(at("rerun", { node: "fact-check" })).toMatchObject({
      action: { request: { kind: "rerun", nodeId: "fact-check" } },
    });
    expect(
      at("resolve", { node: "writing", output: '{"title":"t",\r\n"body":"b"}' }),
    ).toMatchObject({
      action: {
        request: { kind: "resolve", nodeId: "writing", output: { title: "t", body: "b" } },
      },
    });
  });

  it("refuses bad input with the reason, on the page it came from", () => {
    const at = (verb: string, fields: Record<string, string>) =>
      parseAction(`/runs/${RUN_ID}/${verb}`, form(fields));
    expect(at("reset", { node: "writing" })).toEqual({
      back: runBack,
      problem: "a reason is required (say why); nothing sent",
    });
    expect(at("reset", { reason })).toMatchObject({ problem: "no node was given; nothing sent" });
    expect(at("resolve", { reason, node: "writing", output: "{nope" })).toMatchObject({
      problem: expect.stringMatching(/^the output is not JSON \(.+\); nothing sent$/),
    });
    expect(at("resolve", { reason, node: "writing", output: "[1]" })).toMatchObject({
      problem: "the output must be a JSON object (the node's output); nothing sent",
    });
    expect(parseAction("/runs/%E0%A4%A/cancel", form({ reason }))).toMatchObject({
      problem: "the run id could not be read; nothing sent",
    });
  });

  it("sends an approved reply's text only when it was edited", () => {
    const review = (fields: Record<string, string>) =>
      parseAction("/replies/task_01J9Z3QW8Y1A2B3C4D5E6F7G8H/review", form({ reason, ...fields }));
    const draft = "Line one\nline two";
    expect(review({ decision: "approve", draft, text: "Line one\r\nline two" })).toEqual({
      back: "/",
      reason,
      action: { kind: "review", taskId: "task_01J9Z3QW8Y1A2B3C4D5E6F7G8H", decision: "approved" },
    });
    expect(review({ decision: "approve", draft, text: "Edited" })).toMatchObject({
      action: { decision: "approved", text: "Edited" },
    });
    expect(review({ decision: "reject", draft, text: "Edited" })).toMatchObject({
      action: { decision: "rejected" },
    });
    expect(review({ decision: "approve", draft, text: "  " })).toHaveProperty("problem");
    expect(review({ decision: "maybe" })).toMatchObject({
      problem: '"maybe" is not a decision (approve or reject); nothing sent',
    });
  });

  it("reads a send resolution and a redrive", () => {
    const key = "task_01J9Z3QW8Y1A2B3C4D5E6F7G8H:reply:1";
    expect(parseAction("/sends/resolve", form({ reason, key, as: "resend" }))).toEqual({
      back: "/",
      reason,
      action: { kind: "send", key, resolution: "resend" },
    });
    expect(parseAction("/sends/resolve", form({ reason, key, as: "maybe" }))).toMatchObject({
      problem: '"maybe" is not a resolution (delivered, resend or abandon); nothing sent',
    });
    expect(
      parseAction("/dead-letters/order-lookup/redrive", form({ reason, queue: "buffer" })),
    ).toEqual({
      back: "/dead-letters",
      reason,
      action: { kind: "redrive", group: "order-lookup", from: "buffer" },
    });
  });

  it("knows no other address", () => {
    for (const path of ["/", "/runs/x", "/runs/x/delete", "/replies/x", "/dead-letters/redrive"])
      expect(parseAction(path, form({ reason }))).toBeUndefined();
  });
});

describe("answerPost", () => {
  const body = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const post = (fields: Record<string, string>, extra: Record<string, string> = {}) => ({
    path: `/runs/${RUN_ID}/reset`,
    host: OWN,
    origin: `http://${OWN}`,
    contentType: "application/x-www-form-urlencoded",
    body: body(fields),
    ...extra,
  });

  function setup(answer?: () => Promise<ActionOutcome>) {
    const { actions, calls } = recordingActions(answer);
    const flashes = new FlashMessages();
    return { context: { actions, flashes, own: OWN, token: TOKEN }, calls, flashes };
  }

  /** The flash message the redirect points at. */
  const flashOf = (flashes: FlashMessages, location: string) =>
    flashes.of(new URL(location, "http://x").searchParams);

  it("refuses a POST without the token, with another token or from elsewhere: 403, nothing asked", async () => {
    const { context, calls } = setup();
    const fields = { node: "writing", reason: "r" };
    const refused = [
      await answerPost(context, post(fields)),
      await answerPost(context, post({ ...fields, csrf: newFormToken() })),
      await answerPost(
        context,
        post({ ...fields, csrf: TOKEN }, { origin: "http://evil.example" }),
      ),
      await answerPost(context, post({ ...fields, csrf: TOKEN }, { host: "localhost:8630" })),
    ];
    expect(refused.map((r) => r.status)).toEqual([403, 403, 403, 403]);
    const [first] = refused;
    expect(first && "html" in first ? first.html : "").toContain("token is missing");
    expect(calls).toEqual([]);
  });

  it("refuses what is not a form (415) and an address no form posts to (404)", async () => {
    const { context, calls } = setup();
    const json = post({ csrf: TOKEN }, { contentType: "application/json" });
    expect((await answerPost(context, json)).status).toBe(415);
    const nowhere = post({ csrf: TOKEN, reason: "r" }, { path: "/runs/x/delete" });
    expect((await answerPost(context, nowhere)).status).toBe(404);
    expect(calls).toEqual([]);
  });

  it("acts on a form with the token and sends the browser back with what was sent", async () => {
    const { context, calls, flashes } = setup();
    const answer = await answerPost(context, post({ csrf: TOKEN, node: "writing", reason: "r" }));
    expect(answer.status).toBe(303);
    const location = "location" in answer ? answer.location : "";
    expect(location).toMatch(new RegExp(`^/runs/${RUN_ID}\\?flash=[\\w-]+$`));
    expect(flashOf(flashes, location)).toEqual({ kind: "sent", message: "run sent (event id E1)" });
    expect(calls).toEqual([["run", RUN_ID, { kind: "reset", nodeId: "writing", reason: "r" }]]);
  });

  it("shows bad input as refused without asking the stack; a failing stack as failed", async () => {
    const { context, calls, flashes } = setup();
    const bad = await answerPost(
      context,
      post(
        { csrf: TOKEN, node: "writing", reason: "r", output: "{" },
        { path: `/runs/${RUN_ID}/resolve` },
      ),
    );
    expect(flashOf(flashes, "location" in bad ? bad.location : "")).toMatchObject({
      kind: "refused",
      message: expect.stringContaining("the output is not JSON"),
    });
    expect(calls).toEqual([]);
    const failing = setup(async () => {
      throw new Error("EventBridge is down");
    });
    const failed = await answerPost(failing.context, post({ csrf: TOKEN, node: "w", reason: "r" }));
    expect(flashOf(failing.flashes, "location" in failed ? failed.location : "")).toEqual({
      kind: "failed",
      message: "the action failed: Error: EventBridge is down",
    });
  });
});

describe("FlashMessages", () => {
  it("keeps the newest messages under ids nobody can choose", () => {
    const flashes = new FlashMessages();
    const first = flashes.put({ kind: "sent", message: "first" });
    for (let i = 0; i < 200; i++) flashes.put({ kind: "sent", message: String(i) });
    expect(flashes.of(new URLSearchParams({ flash: first }))).toBeUndefined();
    const last = flashes.put({ kind: "refused", message: "last" });
    expect(flashes.of(new URLSearchParams({ flash: last }))?.message).toBe("last");
    expect(flashes.of(new URLSearchParams({ flash: "<script>" }))).toBeUndefined();
  });
});
