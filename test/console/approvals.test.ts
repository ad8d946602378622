import { describe, expect, it } from "vitest";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { REFUND_REVIEW_DECISION } from "../../functions/roles/refund-review/events";
import type { ActionOutcome, OpsActions } from "../../lib/operator/actions";
import { agentWaitOf } from "../../lib/operator/agent-actions";
import { answerProblem } from "../../lib/operator/agent-answer";
import { type ActionContext, answerPost, parseAction } from "../../lib/operator/console/actions";
import { FlashMessages } from "../../lib/operator/console/flash";
import { type PageContext, routeRequest } from "../../lib/operator/console/routes";
import {
  ANSWER_RUN,
  APPROVAL_RUN,
  agentOverview,
  agentWaits,
  answerWait,
  fakeSource,
  OUTCOME_RUN,
  REFUND_KEY,
  REFUND_TASK,
  TASK_ID,
} from "./fixtures";
import { type El, find, findAll, parseHtml, textOf, withAttr } from "./html-tree";

/**
 * Agent runs waiting for a person on the overview, without a browser or a stack: the call awaiting
 * approval with its input and approve / reject, an unknown write with its resolve form, a run
 * handed over for good with its answer form, and the POSTs those forms make.
 */

const TOKEN = "t0ken-of-this-console_0123456789abcdefghijklmn";
const OWN = "127.0.0.1:8630";
const HOSTILE = `<script>alert("x")</script>&amp;`;
const acting: PageContext = { forms: { token: TOKEN } };

async function overviewDoc(view = agentOverview(), context: PageContext = acting) {
  const page = await routeRequest(fakeSource({ overview: view }), "GET", "/", context);
  expect(page.status).toBe(200);
  return { html: page.html, doc: parseHtml(page.html) };
}

const cardOf = (doc: El, name: string) => find(doc, withAttr("data-waiting", name));
const buttonValues = (form: El) =>
  findAll(form, (e) => e.tag === "button").map((b) => b.attrs.value);

/**
 * The agent-run form with `data-action` = `action`: its token, call, the wait it shows (the
 * fixture's `since` for `runId`) and optional reason.
 */
function agentForm(within: El, action: string, runId: string): El {
  const form = find(within, (e) => e.tag === "form" && e.attrs["data-action"] === action);
  expect(form.attrs).toMatchObject({
    method: "post",
    action: `/agent-runs/${runId}/decide`,
    "data-run": runId,
    "data-step": "call_2_1",
  });
  expect(find(form, withAttr("name", "csrf")).attrs.value).toBe(TOKEN);
  expect(find(form, withAttr("name", "step")).attrs).toMatchObject({
    type: "hidden",
    value: "call_2_1",
  });
  // The decision is for the wait shown, never for a later call the model gave the same id.
  const shown = agentWaits().find((w) => w.runId === runId);
  expect(find(form, withAttr("name", "since")).attrs).toMatchObject({
    type: "hidden",
    value: shown?.since,
  });
  expect(find(form, withAttr("name", "reason")).attrs).not.toHaveProperty("required");
  return form;
}

describe("the overview's agent runs waiting for a person", () => {
  it("lists a run awaiting approval with the proposed call and its input, approve and reject", async () => {
    const { doc } = await overviewDoc();
    const card = cardOf(doc, "awaiting-approval");
    expect(card.attrs).toMatchObject({ "data-count": "1", class: "card attention wide" });
    expect(textOf(find(card, (e) => e.tag === "h3"))).toBe("Awaiting approval (1)");
    const item = find(card, withAttr("data-item-id", APPROVAL_RUN));
    expect(textOf(item)).toContain(
      `refund-review ${APPROVAL_RUN} waits for approval of issue_refund call_2_1`,
    );
    const wait = find(item, withAttr("data-agent-run", APPROVAL_RUN));
    expect(wait.attrs["data-wait"]).toBe("approval");
    expect(textOf(wait)).toMatch(/^Proposed: issue_refund \(call call_2_1 ?\)/);
    expect(find(wait, (e) => e.tag === "a").attrs.href).toBe(`/trace?id=${REFUND_TASK}`);
    const input = find(wait, (e) => e.tag === "pre" && "data-tool-input" in e.attrs);
    expect(JSON.parse(textOf(input))).toEqual({
      order_id: "R-1001",
      amount_cents: 20_000,
      currency: "USD",
    });
    expect(buttonValues(agentForm(wait, "agent-approval", APPROVAL_RUN))).toEqual([
      "approve",
      "reject",
    ]);
  });

  it("shows a NEEDS_HUMAN run's unknown write with its key and input, and a resolve form", async () => {
    const { doc } = await overviewDoc();
    const card = cardOf(doc, "needs-human");
    const wait = find(card, withAttr("data-agent-run", OUTCOME_RUN));
    expect(wait.attrs["data-wait"]).toBe("outcome");
    expect(textOf(wait)).toContain(`key ${REFUND_KEY}`);
    expect(textOf(wait)).toMatch(/^Outcome unknown: issue_refund \(call call_2_1 ?\)/);
    const form = agentForm(wait, "agent-outcome", OUTCOME_RUN);
    expect(find(form, (e) => e.tag === "textarea").attrs.name).toBe("output");
    expect(buttonValues(form)).toEqual(["applied", "not_applied"]);
    // The refund's record is resolved on its run, not as a send; a reply's send still is.
    const unknown = cardOf(doc, "unknown-side-effects");
    const refund = find(unknown, withAttr("data-side-effect-key", REFUND_KEY));
    expect(findAll(refund, (e) => e.tag === "form")).toEqual([]);
    expect(textOf(refund)).toContain(`resolve it on agent run ${OUTCOME_RUN} (NEEDS_HUMAN)`);
    const reply = find(unknown, withAttr("data-side-effect-key", `${TASK_ID}:reply:2`));
    expect(find(reply, withAttr("data-action", "send-resolve")).tag).toBe("form");
  });

  it("shows what the runs wait for without forms where the console only reads", async () => {
    const { doc } = await overviewDoc(agentOverview(), {});
    expect(findAll(doc, (e) => e.tag === "form" && e.attrs.method === "post")).toEqual([]);
    const wait = find(doc, withAttr("data-agent-run", APPROVAL_RUN));
    expect(textOf(wait)).toContain("Proposed: issue_refund");
    expect(findAll(doc, (e) => e.tag === "pre")).toHaveLength(2);
  });

  it("lists a run whose journal was not read by its summary alone, and escapes the input", async () => {
    const [approval] = agentWaits();
    if (!approval) throw new Error("the fixture has an approval");
    const hostile = { ...approval, tool: HOSTILE, input: { note: HOSTILE }, reason: HOSTILE };
    const { html, doc } = await overviewDoc(agentOverview([hostile]));
    expect(html).not.toContain("<script>");
    expect(JSON.parse(textOf(find(doc, (e) => e.tag === "pre")))).toEqual({ note: HOSTILE });
    const unread = { ...agentOverview(), agentWaits: [] };
    const plain = await overviewDoc(unread);
    const card = cardOf(plain.doc, "awaiting-approval");
    expect(find(card, withAttr("data-item-id", APPROVAL_RUN)).tag).toBe("li");
    expect(findAll(card, (e) => e.tag === "form")).toEqual([]);
    const none = await overviewDoc({
      ...unread,
      waiting: { ...unread.waiting, awaitingApproval: [] },
    });
    // The stack's count stands where the list is cut short (here: empty).
    expect(cardOf(none.doc, "awaiting-approval").attrs["data-count"]).toBe("1");
  });
});

/** A stack's actions that record the decisions asked of it and answer `answer`. */
function recordingActions(answer: () => ActionOutcome) {
  const calls: unknown[][] = [];
  const none = async (): Promise<ActionOutcome> => ({ kind: "refused", message: "no" });
  const actions: OpsActions = {
    run: none,
    review: none,
    resolveSend: none,
    redrive: none,
    start: none,
    stopOrResume: none,
    decideStep: async (...args) => {
      calls.push(args);
      return answer();
    },
  };
  return { calls, actions };
}

/** Posts a form to `path` from the console's own origin, and reads the message it redirects with. */
function poster(context: ActionContext, path: string) {
  const post = (fields: Record<string, string>) =>
    answerPost(context, {
      path,
      host: OWN,
      origin: `http://${OWN}`,
      contentType: "application/x-www-form-urlencoded",
      body: new URLSearchParams(fields).toString(),
    });
  const flashOf = (answer: Awaited<ReturnType<typeof post>>) =>
    context.flashes.of(
      new URL("location" in answer ? answer.location : "/", "http://x").searchParams,
    );
  return { post, flashOf };
}

describe("the agent-run forms' POSTs", () => {
  const form = (fields: Record<string, string>) => new URLSearchParams(fields);
  const path = `/agent-runs/${APPROVAL_RUN}/decide`;

  it("reads approve and reject with or without a reason, and goes back to the overview", () => {
    expect(parseAction(path, form({ step: "call_2_1", decision: "approve" }))).toEqual({
      back: "/",
      reason: "",
      action: { kind: "step", runId: APPROVAL_RUN, callId: "call_2_1", decision: "approve" },
    });
    expect(
      parseAction(path, form({ step: "call_2_1", decision: "reject", reason: " too much " })),
    ).toMatchObject({ reason: "too much", action: { decision: "reject" } });
    expect(
      parseAction(path, form({ step: "call_2_1", decision: "reject", reason: "x".repeat(1001) })),
    ).toMatchObject({ problem: "the reason is 1001 characters, at most 1000; nothing sent" });
    const since = "2026-11-30T12:01:00.000Z";
    expect(parseAction(path, form({ step: "call_2_1", since, decision: "approve" }))).toMatchObject(
      { action: { kind: "step", callId: "call_2_1", waitingSince: since } },
    );
  });

  it("reads an applied write's output as JSON and ignores it for not_applied", () => {
    const outcome = (fields: Record<string, string>) =>
      parseAction(`/agent-runs/${OUTCOME_RUN}/decide`, form({ step: "call_2_1", ...fields }));
    expect(
      outcome({ decision: "applied", output: '{"refund_id":"rf_1",\r\n"amount_cents":4999}' }),
    ).toMatchObject({
      action: { decision: "applied", output: { refund_id: "rf_1", amount_cents: 4999 } },
    });
    expect(outcome({ decision: "not_applied", output: "{nope" })).toMatchObject({
      action: { kind: "step", decision: "not_applied" },
    });
    expect(outcome({ decision: "applied", output: "  " })).toMatchObject({
      problem: "applied needs the output the outside system gave (JSON); nothing sent",
    });
    expect(outcome({ decision: "applied", output: "{nope" })).toMatchObject({
      problem: expect.stringMatching(/^the output is not JSON \(.+\); nothing sent$/),
    });
  });

  it("refuses a form without a call or with another decision", () => {
    expect(parseAction(path, form({ decision: "approve" }))).toEqual({
      back: "/",
      problem: "no tool call was given; nothing sent",
    });
    expect(parseAction(path, form({ step: "call_2_1", decision: "maybe" }))).toMatchObject({
      problem:
        '"maybe" is not a decision (approve, reject, applied, not_applied or answer); nothing sent',
    });
    expect(parseAction("/agent-runs/%E0%A4%A/decide", form({ step: "c" }))).toMatchObject({
      problem: "the run id could not be read; nothing sent",
    });
    expect(parseAction("/agent-runs/x/approve", form({ step: "c" }))).toBeUndefined();
  });

  it("asks the stack with the form's token only, and shows its answer", async () => {
    let answer: ActionOutcome = { kind: "sent", message: "decision sent (event id E1)" };
    const { calls, actions } = recordingActions(() => answer);
    const flashes = new FlashMessages();
    const context = { actions, flashes, own: OWN, token: TOKEN };
    const { post, flashOf } = poster(context, path);

    expect((await post({ step: "call_2_1", decision: "approve" })).status).toBe(403);
    expect(calls).toEqual([]);
    const sent = await post({ csrf: TOKEN, step: "call_2_1", decision: "approve" });
    expect("location" in sent && sent.location).toMatch(/^\/\?flash=[\w-]+$/);
    expect(flashOf(sent)).toEqual(answer);
    answer = { kind: "unchanged", message: "call_2_1 was already decided; nothing sent" };
    const again = await post({ csrf: TOKEN, step: "call_2_1", decision: "reject", reason: "no" });
    expect(flashOf(again)).toEqual(answer);
    const since = "2026-11-30T12:01:00.000Z";
    await post({ csrf: TOKEN, step: "call_2_1", since, decision: "approve" });
    expect(calls).toEqual([
      [APPROVAL_RUN, "call_2_1", "approve", {}],
      [APPROVAL_RUN, "call_2_1", "reject", { reason: "no" }],
      [APPROVAL_RUN, "call_2_1", "approve", { waitingSince: since }],
    ]);
  });
});

describe("a run handed over for good: its answer from the overview", () => {
  const path = `/agent-runs/${ANSWER_RUN}/decide`;
  const answer = { decision: "rejected", reason: "Outside the return window." };
  const read = (fields: Record<string, string>) => parseAction(path, new URLSearchParams(fields));

  it("shows why it was handed over, the answer's shape and a form that posts the answer", async () => {
    const { doc } = await overviewDoc(agentOverview([...agentWaits(), answerWait()]));
    const wait = find(cardOf(doc, "needs-human"), withAttr("data-agent-run", ANSWER_RUN));
    expect(wait.attrs["data-wait"]).toBe("answer");
    expect(textOf(wait)).toContain("3 model turns in a row went wrong (the answer did not fit)");
    const form = find(wait, (e) => e.tag === "form" && e.attrs["data-action"] === "agent-answer");
    expect(form.attrs).toMatchObject({
      method: "post",
      action: path,
      "data-run": ANSWER_RUN,
    });
    expect(form.attrs).not.toHaveProperty("data-step");
    expect(find(form, withAttr("name", "csrf")).attrs.value).toBe(TOKEN);
    expect(findAll(form, withAttr("name", "step"))).toEqual([]);
    // The shape is shown, not filled in: an answer sent as it stands would end the run.
    const example = find(form, (e) => e.tag === "pre" && "data-answer-example" in e.attrs);
    expect(JSON.parse(textOf(example))).toEqual(answerWait().answerExample);
    const area = find(form, (e) => e.tag === "textarea");
    expect(area.attrs.name).toBe("output");
    expect(textOf(area)).toBe("");
    expect(buttonValues(form)).toEqual(["answer"]);
    expect(find(form, withAttr("name", "reason")).attrs).not.toHaveProperty("required");
    const readOnly = await overviewDoc(agentOverview([answerWait()]), {});
    const shown = find(readOnly.doc, withAttr("data-agent-run", ANSWER_RUN));
    expect(textOf(shown)).toContain("the answer did not fit");
    expect(findAll(shown, (e) => e.tag === "form")).toEqual([]);
  });

  it("reads the answer as JSON, with no tool call, the reason optional", () => {
    expect(
      read({
        decision: "answer",
        output: '{"decision": "rejected",\r\n"reason": "Outside the return window."}',
      }),
    ).toEqual({
      back: "/",
      reason: "",
      action: { kind: "step", runId: ANSWER_RUN, decision: "answer", output: answer },
    });
    expect(
      read({ decision: "answer", output: JSON.stringify(answer), reason: " checked " }),
    ).toMatchObject({ reason: "checked", action: { decision: "answer" } });
  });

  it("refuses an empty answer or one that is not JSON, and sends nothing", () => {
    expect(read({ decision: "answer", output: " \r\n " })).toEqual({
      back: "/",
      problem: "an answer needs the run's answer (JSON); nothing sent",
    });
    expect(read({ decision: "answer" })).toMatchObject({
      problem: "an answer needs the run's answer (JSON); nothing sent",
    });
    expect(read({ decision: "answer", output: "{decision: rejected}" })).toMatchObject({
      problem: expect.stringMatching(/^the answer is not JSON \(.+\); nothing sent$/),
    });
  });

  it("asks the stack for the run's answer, as the CLI's resolve --as answer does, and shows its answer", async () => {
    let outcome: ActionOutcome = { kind: "sent", message: "decision sent (event id E2)" };
    const { calls, actions } = recordingActions(() => outcome);
    const flashes = new FlashMessages();
    const context = { actions, flashes, own: OWN, token: TOKEN };
    const { post, flashOf } = poster(context, path);
    const fields = { decision: "answer", output: JSON.stringify(answer) };

    expect((await post(fields)).status).toBe(403);
    const bad = await post({ ...fields, csrf: TOKEN, output: "{nope" });
    expect(flashOf(bad)).toMatchObject({ kind: "refused", message: /^the answer is not JSON/ });
    expect(calls).toEqual([]);
    const sent = await post({ ...fields, csrf: TOKEN, reason: "checked the order" });
    expect(flashOf(sent)).toEqual(outcome);
    outcome = { kind: "refused", message: "the shared check's words; nothing sent" };
    expect(flashOf(await post({ ...fields, csrf: TOKEN }))).toEqual(outcome);
    expect(calls).toEqual([
      [ANSWER_RUN, undefined, "answer", { reason: "checked the order", output: answer }],
      [ANSWER_RUN, undefined, "answer", { output: answer }],
    ]);
  });
});

describe("agentWaitOf", () => {
  const journal = (fields: Partial<AgentJournal>): AgentJournal =>
    ({
      run_id: APPROVAL_RUN,
      task_id: REFUND_TASK,
      agent: "refund-review",
      status: "BLOCKED",
      window: [],
      ...fields,
    }) as AgentJournal;

  it("reads what a BLOCKED or NEEDS_HUMAN run waits for, and nothing of a run that does not wait", () => {
    const waiting = {
      kind: "approval" as const,
      tool_call_id: "call_2_1",
      tool: "issue_refund",
      input: { order_id: "R-1", amount_cents: 20_000 },
      since: "2026-05-04T09:16:00.000Z",
      deadline: "2026-05-05T09:16:00.000Z",
      reason: "above 100.00",
    };
    expect(agentWaitOf(journal({ waiting }))).toEqual({
      runId: APPROVAL_RUN,
      agent: "refund-review",
      taskId: REFUND_TASK,
      status: "BLOCKED",
      kind: "approval",
      toolCallId: "call_2_1",
      tool: "issue_refund",
      input: waiting.input,
      since: waiting.since,
      deadline: waiting.deadline,
      reason: "above 100.00",
    });
    const spent = { kind: "answer" as const, since: waiting.since, reason: "turns spent" };
    expect(agentWaitOf(journal({ status: "NEEDS_HUMAN", waiting: spent }))).toEqual({
      runId: APPROVAL_RUN,
      agent: "refund-review",
      taskId: REFUND_TASK,
      status: "NEEDS_HUMAN",
      kind: "answer",
      since: waiting.since,
      reason: "turns spent",
    });
    expect(agentWaitOf(journal({ status: "RUNNING", waiting }))).toBeUndefined();
    expect(agentWaitOf(journal({ status: "BLOCKED" }))).toBeUndefined();
  });

  it("gives a run waiting for an answer an example of its agent's answer, which fits it", () => {
    const spent = { kind: "answer" as const, since: "2026-05-04T09:16:00.000Z", reason: "spent" };
    const wait = agentWaitOf(
      journal({ status: "NEEDS_HUMAN", waiting: spent, decision_type: REFUND_REVIEW_DECISION }),
    );
    expect(wait?.answerExample).toEqual({
      decision: "approved",
      reason: "<reason>",
      amount_cents: 0,
      refund_id: "<refund_id>",
    });
    expect(answerProblem(REFUND_REVIEW_DECISION, wait?.answerExample)).toBeUndefined();
    const unknown = journal({ status: "NEEDS_HUMAN", waiting: spent, decision_type: "x.decided" });
    expect(agentWaitOf(unknown)).not.toHaveProperty("answerExample");
  });
});
