import { describe, expect, it } from "vitest";
import type { SideEffectRecord } from "../../functions/core/side-effects";
import { agentOutputSchema } from "../../functions/roles/content-agents/workflows";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { outputExample } from "../../lib/operator/output-example";
import {
  replyKeyTask,
  reviewCommand,
  reviewDecision,
  sendResolveCommand,
  sendResolveDecision,
  taskIdProblem,
} from "../../lib/operator/support-actions";
import { parseOutput } from "../../lib/operator/workflow-actions";

/** The decisions on what the support conversation parks (CLI and console), as data. */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const CONV = "conv_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const KEY = `${TASK}:reply:1`;

const reply = (over: Partial<ReplyState> = {}): ReplyState => ({
  task_id: TASK,
  conversation_id: CONV,
  customer_id: "cust_alice",
  channel: "chat",
  input_version: 3,
  status: "held_for_review",
  reply_text: "draft",
  model_attempts: 1,
  generated_at: "2026-05-04T09:15:00.000Z",
  ...over,
});

const record = (state: SideEffectRecord["state"]): SideEffectRecord => ({
  key: KEY,
  state,
  attempts: 1,
  created_at: "2026-05-04T09:15:00.000Z",
  updated_at: "2026-05-04T09:15:00.000Z",
  task_id: TASK,
  kind: "reply",
});

const delivery = (fact: Record<string, unknown>) =>
  ({ keys: { [KEY]: fact } }) as unknown as DeliveryState;

describe("reviewDecision", () => {
  const approve = reviewCommand(TASK, "approved", { text: "edited", reason: "ok" }, "ops_anna");
  const reject = reviewCommand(TASK, "rejected", { text: "ignored" }, "ops_anna");

  it("completes the command with the reply's conversation", () => {
    const decided = reviewDecision(approve, "approved", {
      reply: reply(),
      conversationVersion: 3,
    });
    expect(decided).toEqual({
      command: {
        ...approve,
        conversationId: CONV,
        payload: {
          conversation_id: CONV,
          text: "edited",
          requested_by: "ops_anna",
          reason: "ok",
        },
      },
    });
    expect("command" in decided && operatorEnvelope(decided.command)).toMatchObject({
      event_type: "reply.approve.requested",
      order_key: CONV,
    });
    expect(reject.payload).not.toHaveProperty("text");
  });

  it("reports a decision already taken and refuses one that cannot apply", () => {
    expect(reviewDecision(approve, "approved", {})).toEqual({
      refused: `no reply of task ${TASK}`,
    });
    expect(reviewDecision(approve, "approved", { reply: reply({ status: "approved" }) })).toEqual({
      already: `the reply of ${TASK} was already approved`,
    });
    expect(reviewDecision(reject, "rejected", { reply: reply({ status: "approved" }) })).toEqual({
      refused: `the reply of ${TASK} is not held for review (it is approved)`,
    });
    expect(
      reviewDecision(approve, "approved", { reply: reply({ customer_id: undefined }) }),
    ).toMatchObject({
      refused: expect.stringContaining("held before replies kept their recipient"),
    });
    expect(reviewDecision(approve, "approved", { reply: reply(), conversationVersion: 5 })).toEqual(
      {
        refused: `a newer customer message superseded the reply of ${TASK} (it answers version 3, the conversation is at 5): reject it`,
      },
    );
    // A rejection is not refused because a newer message came.
    expect(
      reviewDecision(reject, "rejected", { reply: reply(), conversationVersion: 5 }),
    ).toHaveProperty("command");
  });
});

describe("sendResolveDecision", () => {
  const command = (resolution: "delivered" | "resend" | "abandon") =>
    sendResolveCommand(KEY, TASK, resolution, undefined, "ops_anna");
  const kept = { send: { conversation_id: CONV } };

  it("completes a resolution of an unknown outcome with the send's conversation", () => {
    const decided = sendResolveDecision(command("resend"), "resend", {
      record: record("unknown"),
      delivery: delivery(kept),
    });
    expect(decided).toMatchObject({
      command: { conversationId: CONV, payload: { conversation_id: CONV, resolution: "resend" } },
    });
    // Without the sender's fact, the reply says which conversation it was.
    expect(
      sendResolveDecision(command("delivered"), "delivered", {
        record: record("unknown"),
        replyConversationId: CONV,
      }),
    ).toMatchObject({ command: { conversationId: CONV } });
  });

  it("reports a repeated resolution and refuses what cannot apply", () => {
    expect(sendResolveDecision(command("resend"), "resend", {})).toEqual({
      refused: `no side-effect record ${KEY}`,
    });
    expect(
      sendResolveDecision(command("resend"), "resend", {
        record: record("succeeded"),
        delivery: delivery({ ...kept, resolution: "resend" }),
      }),
    ).toEqual({ already: `${KEY} was already resolved as resend (it is succeeded)` });
    expect(
      sendResolveDecision(command("abandon"), "abandon", {
        record: record("succeeded"),
        delivery: delivery({ ...kept, resolution: "resend" }),
      }),
    ).toEqual({ refused: `the outcome of ${KEY} is not unknown (it is succeeded)` });
    expect(
      sendResolveDecision(command("resend"), "resend", { record: record("unknown") }),
    ).toMatchObject({ refused: expect.stringContaining("did not keep what") });
    expect(
      sendResolveDecision(command("abandon"), "abandon", { record: record("unknown") }),
    ).toEqual({ refused: `cannot tell the conversation of ${KEY}` });
  });
});

describe("ids and outputs an operator types", () => {
  it("reads task ids and reply keys", () => {
    expect(taskIdProblem(TASK)).toBeUndefined();
    expect(taskIdProblem("conv_01KB0Q3V9X7T2M4N6P8R0S1W3Y")).toContain("must be a task id");
    expect(replyKeyTask(KEY)).toEqual({ taskId: TASK });
    expect(replyKeyTask(`${TASK}:refund:1`)).toEqual({
      problem: `"${TASK}:refund:1" is not a reply key <task_id>:reply:<n>`,
    });
  });

  it("parses a node's output as a JSON object", () => {
    expect(parseOutput('{"a":1}', "--output")).toEqual({ a: 1 });
    expect(parseOutput("[]", "--output")).toBe(
      "--output must be a JSON object (the node's output); nothing sent",
    );
    expect(parseOutput("{", "the output")).toMatch(/^the output is not JSON \(.+\); nothing sent$/);
  });

  it("gives an example output that fits each content role", () => {
    for (const role of ["topic-selection", "fact-check", "writing", "review"]) {
      const example = outputExample(role);
      expect(agentOutputSchema(role)?.safeParse(example).success, role).toBe(true);
    }
    expect(outputExample("writing")).toEqual({ title: "<title>", body: "<body>" });
    expect(outputExample("writer")).toBeUndefined();
  });
});
