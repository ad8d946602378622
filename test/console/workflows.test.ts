import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import type { ActionOutcome, OpsActions } from "../../lib/operator/actions";
import { answerPost, parseAction } from "../../lib/operator/console/actions";
import { FlashMessages } from "../../lib/operator/console/flash";
import { REDACTED } from "../../lib/operator/console/redact";
import { type PageContext, routeRequest } from "../../lib/operator/console/routes";
import type { RunView } from "../../lib/operator/views";
import { contentRun, fakeSource, RUN_ID } from "./fixtures";
import { type El, find, findAll, parseHtml, textOf, withAttr } from "./html-tree";

/**
 * The console's workflow pages: the list, one workflow's graph before any run (map, wait, child
 * and loop drawn distinctly), its versions and declared input, the start form made from that
 * input and what it posts; and the run page's node inputs and outputs, personal fields redacted.
 */

const TOKEN = "tok";
const acting: PageContext = { forms: { token: TOKEN } };
const ROLES = ["tally", "summarize"];

/** A workflow with every kind of node, and a declared input. */
const CONSTRUCTS = {
  name: "constructs",
  nodes: [
    { id: "plan", role: "tally" },
    { id: "each", role: "summarize", map: { items: { node: "plan", path: "parts" } } },
    { id: "pause", wait: { seconds: 60 } },
    { id: "child", workflow: { name: "digest" } },
    { id: "check", role: "tally" },
  ],
  edges: [
    { from: "plan", to: "each" },
    { from: "each", to: "pause" },
    { from: "pause", to: "child" },
    { from: "child", to: "check" },
    { from: "check", to: "child", loop: { until: { path: "done" }, maxRounds: 3 } },
  ],
  input: {
    type: "object",
    properties: {
      subject: { type: "string", title: "Subject", minLength: 1, description: "what about" },
      depth: { type: "integer", minimum: 1, maximum: 5, default: 2 },
      tone: { type: "string", enum: ["plain", "formal"] },
      draft: { type: "boolean" },
    },
    required: ["subject"],
  },
};

/** A workflow the stack was given. */
const STACK_TALLY = defineWorkflow({
  name: "stack-tally",
  version: 1,
  nodes: [{ id: "count", role: "tally" }],
  edges: [],
});

async function sourceWithWorkflows() {
  const registry = new InMemoryWorkflowRegistry();
  await putWorkflow(registry, EVERY_TENANT, CONSTRUCTS, { roles: ROLES });
  await putWorkflow(registry, EVERY_TENANT, { ...CONSTRUCTS, input: undefined }, { roles: ROLES });
  await putWorkflow(registry, "acme", { ...CONSTRUCTS, name: "own" }, { roles: ROLES });
  await putWorkflow(registry, "globex", { ...CONSTRUCTS, name: "theirs" }, { roles: ROLES });
  return fakeSource({ registry, stackWorkflows: [STACK_TALLY] });
}

async function get(target: string, source: ReturnType<typeof fakeSource>, context = acting) {
  const page = await routeRequest(source, "GET", target, context);
  return { status: page.status, doc: parseHtml(page.html), html: page.html };
}

describe("the workflows page", () => {
  it("lists the stack's, the shared and every tenant's own, each with its scope and tenant", async () => {
    const source = await sourceWithWorkflows();
    const { status, doc } = await get("/workflows", source);
    expect(status).toBe(200);
    const rows = findAll(doc, (e) => e.tag === "tr" && "data-workflow" in e.attrs);
    const cells = (row: El) => findAll(row, (e) => e.tag === "td").map(textOf);
    expect(rows.map(cells)).toEqual([
      ["quick-news", "given to the stack", "—", "3", "1, 2, 3"],
      ["long-form", "given to the stack", "—", "4", "1, 2, 3, 4"],
      ["content.fact-check", "given to the stack", "—", "1", "1"],
      ["stack-tally", "given to the stack", "—", "1", "1"],
      ["own", "a tenant's own", "acme", "1", "1"],
      ["theirs", "a tenant's own", "globex", "1", "1"],
      ["constructs", "every tenant", "—", "2", "1, 2"],
    ]);
    expect(rows.map((r) => [r.attrs["data-scope"], r.attrs["data-tenant"]])).toEqual([
      ["stack", undefined],
      ["stack", undefined],
      ["stack", undefined],
      ["stack", undefined],
      ["tenant", "acme"],
      ["tenant", "globex"],
      ["shared", undefined],
    ]);
    // A tenant's own links to its page as that tenant's starts find it.
    const theirs = rows[5] as El;
    expect(find(theirs, (e) => e.tag === "a").attrs.href).toBe("/workflows/theirs?tenant=globex");
    const page = await get("/workflows/theirs?tenant=globex", source);
    expect(textOf(find(page.doc, withAttr("data-workflow-scope", "")))).toBe("for tenant globex");
    const acme = await get("/workflows?tenant=acme", source);
    const listed = findAll(acme.doc, (e) => e.tag === "tr" && "data-workflow" in e.attrs);
    expect(listed.map((r) => r.attrs["data-workflow"])).toEqual([
      "quick-news",
      "long-form",
      "content.fact-check",
      "stack-tally",
      "own",
      "constructs",
    ]);
    expect((await get("/workflows?tenant=Not%20One", source)).status).toBe(400);
  });

  it("shows a workflow the stack was given, with a start form", async () => {
    const source = await sourceWithWorkflows();
    const { status, doc } = await get("/workflows/stack-tally", source);
    expect(status).toBe(200);
    expect(textOf(find(doc, withAttr("data-workflow-scope", "")))).toBe("given to the stack");
    expect(find(doc, withAttr("data-graph", "stack-tally"))).toBeDefined();
    expect(find(doc, (e) => e.tag === "form" && e.attrs["data-action"] === "start")).toBeDefined();
  });
});

describe("a workflow's page", () => {
  it("draws the graph before any run, each kind of node and the loop distinctly", async () => {
    const source = await sourceWithWorkflows();
    const { status, doc } = await get("/workflows/constructs?version=1", source);
    expect(status).toBe(200);
    const graph = find(doc, withAttr("data-graph", "constructs"));
    const kinds = Object.fromEntries(
      findAll(graph, (e) => e.tag === "g" && "data-node-id" in e.attrs).map((g) => [
        g.attrs["data-node-id"],
        g.attrs["data-kind"],
      ]),
    );
    expect(kinds).toEqual({
      plan: "task",
      each: "map",
      pause: "wait",
      child: "child",
      check: "task",
    });
    const each = find(graph, withAttr("data-node-id", "each"));
    // A map is a stack of cards: two drawn behind its own.
    expect(findAll(each, (e) => e.tag === "rect")).toHaveLength(3);
    expect(textOf(each)).toContain("over plan.parts, 4 at once");
    const child = find(graph, withAttr("data-node-id", "child"));
    expect(findAll(child, (e) => e.tag === "rect")).toHaveLength(2);
    const wait = find(graph, withAttr("data-node-id", "pause"));
    expect(find(wait, (e) => e.tag === "rect").attrs["stroke-dasharray"]).toBe("2 3");
    const loop = find(graph, withAttr("data-loop", "true"));
    expect(loop.attrs).toMatchObject({ "data-from": "check", "data-to": "child" });
    expect(loop.attrs["data-condition"]).toBe("loop until done is truthy, ≤ 3 rounds");
    expect(find(loop, (e) => e.tag === "path").attrs["stroke-dasharray"]).toBe("6 4");
  });

  it("shows its versions, scope and declared input; another version by ?version=", async () => {
    const source = await sourceWithWorkflows();
    const newest = await get("/workflows/constructs", source);
    expect(textOf(find(newest.doc, (e) => e.tag === "h1"))).toBe("Workflow constructs v2");
    expect(textOf(find(newest.doc, withAttr("data-workflow-scope", "")))).toBe("for every tenant");
    const versions = find(newest.doc, withAttr("data-versions", ""));
    expect(find(versions, (e) => e.tag === "a").attrs.href).toBe("/workflows/constructs?version=1");
    expect(find(newest.doc, withAttr("data-input-spec", "any"))).toBeDefined();
    const first = await get("/workflows/constructs?version=1", source);
    const spec = find(first.doc, withAttr("data-input-spec", "declared"));
    const rows = findAll(spec, (e) => e.tag === "tr")
      .slice(1)
      .map(textOf);
    expect(rows[0]).toBe("subject string required at least 1 character what about");
    expect(rows[1]).toContain("integer optional ≥ 1, ≤ 5");
    expect(rows[2]).toContain('one of "plain", "formal"');
    expect((await get("/workflows/constructs?version=7", source)).status).toBe(404);
    expect((await get("/workflows/constructs?version=x", source)).status).toBe(400);
    expect((await get("/workflows/nothing", source)).status).toBe(404);
  });

  it("has a start form made from the declared input (only when the console acts)", async () => {
    const source = await sourceWithWorkflows();
    const { doc } = await get("/workflows/constructs?version=1", source);
    const form = find(doc, (e) => e.tag === "form" && e.attrs["data-action"] === "start");
    expect(form.attrs).toMatchObject({ method: "post", action: "/workflows/constructs/start" });
    // A start names no version: the page of an older one says what a start runs.
    expect(textOf(find(form, withAttr("data-start-version", "")))).toBe(
      "A start runs the newest version, v2.",
    );
    expect(find(form, withAttr("name", "csrf")).attrs.value).toBe(TOKEN);
    const subject = find(form, withAttr("name", "input.subject"));
    expect(subject.attrs).toMatchObject({ type: "text", minlength: "1" });
    expect(subject.attrs).toHaveProperty("required");
    expect(find(form, withAttr("name", "input.depth")).attrs).toMatchObject({
      type: "number",
      step: "1",
      min: "1",
      max: "5",
      value: "2",
    });
    const tone = find(form, withAttr("name", "input.tone"));
    expect(tone.tag).toBe("select");
    expect(findAll(tone, (e) => e.tag === "option").map(textOf)).toEqual([
      "(none)",
      "plain",
      "formal",
    ]);
    expect(find(form, withAttr("name", "type.depth")).attrs.value).toBe("integer");
    expect(find(form, withAttr("name", "input_json"))).toBeDefined();
    const reading = await get("/workflows/constructs?version=1", source, {});
    expect(findAll(reading.doc, (e) => e.tag === "form" && e.attrs.method === "post")).toEqual([]);
  });
});

describe("the start form's POST", () => {
  const form = (fields: Record<string, string>) => new URLSearchParams({ csrf: TOKEN, ...fields });

  it("reads each property as its type says, over the JSON object, and the tenant", () => {
    const parsed = parseAction(
      "/workflows/constructs/start",
      form({
        "input.subject": "tides",
        "type.subject": "string",
        "input.depth": "3",
        "type.depth": "integer",
        "input.draft": "false",
        "type.draft": "boolean",
        "input.tone": "",
        "type.tone": "string",
        input_json: '{"extra": [1], "subject": "overridden"}',
        tenant: "acme",
      }),
    );
    expect(parsed).toEqual({
      back: "/workflows/constructs?tenant=acme",
      reason: "",
      action: {
        kind: "start",
        request: {
          name: "constructs",
          input: { extra: [1], subject: "tides", depth: 3, draft: false },
          tenant: "acme",
        },
      },
    });
  });

  it("refuses JSON that is not an object, and a bad tenant, sending nothing", () => {
    expect(parseAction("/workflows/x/start", form({ input_json: "[1]" }))).toEqual({
      back: "/workflows/x",
      problem: "the input is not a JSON object; nothing sent",
    });
    expect(parseAction("/workflows/x/start", form({ input_json: "{" }))).toMatchObject({
      problem: expect.stringMatching(/^the input is not JSON/),
    });
    expect(parseAction("/workflows/x/start", form({ tenant: "A B" }))).toMatchObject({
      problem: expect.stringContaining("is not a tenant id"),
    });
  });

  it("goes to the run's page when a run started, and back to the workflow when refused", async () => {
    const flashes = new FlashMessages();
    const answers: ActionOutcome[] = [
      { kind: "sent", message: "sent: run run_1", next: "/runs/run_1" },
      { kind: "refused", message: "the input does not fit: subject: required; nothing sent" },
    ];
    const asked: unknown[] = [];
    const none = async (): Promise<ActionOutcome> => ({ kind: "refused", message: "no" });
    const actions: OpsActions = {
      run: none,
      review: none,
      resolveSend: none,
      redrive: none,
      decideStep: none,
      stopOrResume: none,
      start: async (request) => {
        asked.push(request);
        return answers.shift() as ActionOutcome;
      },
    };
    const context = { actions, flashes, own: "127.0.0.1:1", token: TOKEN };
    const post = () =>
      answerPost(context, {
        path: "/workflows/constructs/start",
        host: "127.0.0.1:1",
        contentType: "application/x-www-form-urlencoded",
        body: form({ "input.subject": "tides" }).toString(),
      });
    expect(await post()).toMatchObject({
      status: 303,
      location: expect.stringMatching(/^\/runs\/run_1\?flash=/),
    });
    expect(await post()).toMatchObject({
      status: 303,
      location: expect.stringMatching(/^\/workflows\/constructs\?flash=/),
    });
    expect(asked).toEqual([
      { name: "constructs", input: { subject: "tides" } },
      { name: "constructs", input: { subject: "tides" } },
    ]);
  });

  it("comes back after a refusal with the form as it was sent and the refusal beside it", async () => {
    const source = await sourceWithWorkflows();
    const flashes = new FlashMessages();
    const refusal =
      "the input does not fit own v1: 1 problem(s): depth: must be at most 5 (got 9); nothing sent";
    const none = async (): Promise<ActionOutcome> => ({ kind: "refused", message: "no" });
    const actions: OpsActions = {
      run: none,
      review: none,
      resolveSend: none,
      redrive: none,
      decideStep: none,
      stopOrResume: none,
      start: async () => ({ kind: "refused", message: refusal }),
    };
    const sent = {
      "input.subject": "tides <b>",
      "type.subject": "string",
      "input.depth": "9",
      "type.depth": "integer",
      "input.tone": "formal",
      "type.tone": "string",
      "input.draft": "true",
      "type.draft": "boolean",
      input_json: '{"extra": 1}',
      tenant: "acme",
    };
    const answer = await answerPost(
      { actions, flashes, own: "127.0.0.1:1", token: TOKEN },
      {
        path: "/workflows/own/start",
        host: "127.0.0.1:1",
        contentType: "application/x-www-form-urlencoded",
        body: form(sent).toString(),
      },
    );
    expect(answer).toMatchObject({
      status: 303,
      location: expect.stringMatching(/^\/workflows\/own\?tenant=acme&flash=/),
    });
    const location = (answer as { location: string }).location;
    const page = await get(location, source, { ...acting, flashes });
    const start = find(page.doc, (e) => e.tag === "form" && e.attrs["data-action"] === "start");
    expect(textOf(find(start, withAttr("data-start-refused", "")))).toBe(refusal);
    expect(find(start, withAttr("name", "input.subject")).attrs.value).toBe("tides <b>");
    expect(find(start, withAttr("name", "input.depth")).attrs.value).toBe("9");
    const chosen = (name: string) =>
      findAll(find(start, withAttr("name", name)), (e) => e.tag === "option")
        .filter((o) => "selected" in o.attrs)
        .map(textOf);
    expect(chosen("input.tone")).toEqual(["formal"]);
    expect(chosen("input.draft")).toEqual(["true"]);
    expect(textOf(find(start, withAttr("name", "input_json")))).toBe('{"extra": 1}');
    expect(find(start, withAttr("name", "tenant")).attrs.value).toBe("acme");
    // The same page without the refusal: the form as it is drawn first.
    const fresh = await get("/workflows/own?tenant=acme", source);
    const again = find(fresh.doc, (e) => e.tag === "form" && e.attrs["data-action"] === "start");
    expect(findAll(again, withAttr("data-start-refused", ""))).toEqual([]);
    expect(find(again, withAttr("name", "input.depth")).attrs.value).toBe("2");
  });
});

describe("the run page's inputs and outputs", () => {
  it("shows the run's input and each released node's input and output, personal fields redacted", async () => {
    const base = contentRun();
    const run: RunView = {
      ...base,
      input: { topic_hint: "tides", text: "my order 123 is late" },
      nodes: base.nodes.map((n) =>
        n.id === "fact_check"
          ? {
              ...n,
              input: { topic_hint: "tides", topic_selection: { topic: "Tides" } },
              output: { verdict: "pass", notes: "fine", nested: [{ text: "a customer's words" }] },
            }
          : n,
      ),
    };
    const { doc } = await get(`/runs/${RUN_ID}`, fakeSource({ runs: [run] }), {});
    const runInput = JSON.parse(textOf(find(doc, withAttr("data-run-input", ""))));
    expect(runInput).toEqual({ topic_hint: "tides", text: REDACTED });
    const io = find(doc, withAttr("data-node-io", "fact_check"));
    const output = JSON.parse(textOf(find(io, withAttr("data-io", "output"))));
    expect(output).toEqual({ verdict: "pass", notes: "fine", nested: [{ text: REDACTED }] });
    const input = JSON.parse(textOf(find(io, withAttr("data-io", "input"))));
    expect(input).toEqual({ topic_hint: "tides", topic_selection: { topic: "Tides" } });
    expect(findAll(doc, (e) => "data-node-io" in e.attrs)).toHaveLength(1);
  });
});
