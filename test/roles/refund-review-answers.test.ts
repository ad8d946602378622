import { describe, expect, it } from "vitest";
import { type LocalScript, ToolUse } from "../../functions/adapters/local-model";
import type { ModelMessage, ModelRequest } from "../../functions/core/model";
import { refundDesk } from "./refund-desk";

/**
 * The refund agent's last check of a final answer (`accept`): the model's word that a refund was
 * made is not the payment's confirmation. An answer `approved` is sent back to the model unless
 * the payment system has the refund, with that refund's id and amount.
 */

/** Every tool result the model was sent, by tool name (the latest wins). */
function results(messages: readonly ModelMessage[]): Map<string, unknown> {
  const names = new Map<string, string>();
  const found = new Map<string, unknown>();
  for (const m of messages) {
    for (const call of m.toolCalls ?? []) names.set(call.id, call.name);
    for (const r of m.toolResults ?? []) found.set(names.get(r.toolCallId) ?? "", r.content);
  }
  return found;
}

/** The texts the agent sent the model as user messages (its error turns among them). */
function userTexts(request: ModelRequest): string[] {
  return request.messages.filter((m) => m.role === "user").map((m) => m.text);
}

/**
 * The refund agent with a model that answers turn n (1, 2, ...) as `script` says, and the texts
 * the agent sent it as user messages (its error turns among them), as they came.
 */
function deskAnswering(script: (turn: number, request: ModelRequest) => ReturnType<LocalScript>) {
  const answers: string[] = [];
  const desk = refundDesk({}, (request) => {
    const turn = request.messages.filter((m) => m.role === "assistant").length + 1;
    answers.push(...userTexts(request).slice(answers.length));
    return script(turn, request);
  });
  return { desk, answers };
}

const lookUp = (turn: number) =>
  new ToolUse([
    { id: `call_${turn}_1`, name: "get_order", input: { order_id: "456" } },
    { id: `call_${turn}_2`, name: "get_refund_status", input: { order_id: "456" } },
  ]);

const issue = (turn: number) =>
  new ToolUse([
    {
      id: `call_${turn}_1`,
      name: "issue_refund",
      input: { order_id: "456", amount_cents: 3450, reason: "delivered broken" },
    },
  ]);

describe("the refund agent's answer is checked against the payment system", () => {
  it("an answer approved with no refund made is sent back; the agent then refunds and says so", async () => {
    const { desk, answers } = deskAnswering((turn, request) => {
      if (turn === 1) return lookUp(turn);
      // Claims a refund the payment system never made.
      if (turn === 2)
        return {
          decision: "approved",
          reason: "Your refund has been issued.",
          amount_cents: 3450,
          refund_id: "rf_made_up",
        };
      if (turn === 3) return issue(turn);
      const receipt = results(request.messages).get("issue_refund") as {
        refund_id: string;
        amount_cents: number;
      };
      return { decision: "approved", reason: "Your refund has been issued.", ...receipt };
    });
    await desk.ask("456", "Refund please");
    await desk.drain();
    expect(answers).toContainEqual(
      expect.stringContaining(
        "you answered approved, but the payment system has no refund for this order",
      ),
    );
    const [approved] = desk.facts("refund.approved");
    const refund = await desk.payments.refundOf("456");
    expect(refund).toBeDefined();
    expect(approved?.payload).toMatchObject({
      refund_id: refund?.refund_id,
      amount_cents: 3450,
    });
    expect(desk.facts("refund.approved")).toHaveLength(1);
    expect(desk.t.emitted.some((e) => JSON.stringify(e.payload).includes("rf_made_up"))).toBe(
      false,
    );
    expect((await desk.journal())?.totals.model_turns).toBe(4);
  });

  it("an answer approved with another refund id or amount than the payment system's is sent back", async () => {
    for (const wrong of [{ refund_id: "rf_other" }, { amount_cents: 3449 }]) {
      const label = JSON.stringify(wrong);
      const { desk, answers } = deskAnswering((turn, request) => {
        if (turn === 1) return lookUp(turn);
        if (turn === 2) return issue(turn);
        const receipt = results(request.messages).get("issue_refund") as object;
        const told = { decision: "approved", reason: "Your refund has been issued.", ...receipt };
        return turn === 3 ? { ...told, ...wrong } : told;
      });
      await desk.ask("456", "Refund please");
      await desk.drain();
      const refund = await desk.payments.refundOf("456");
      expect(answers, label).toContainEqual(
        `Your answer was not accepted: the payment system's refund of this order is ${refund?.refund_id} for 3450 cents: answer with those.`,
      );
      const approved = desk.facts("refund.approved");
      expect(approved, label).toHaveLength(1);
      expect(approved[0]?.payload, label).toMatchObject({
        refund_id: refund?.refund_id,
        amount_cents: 3450,
      });
      expect(desk.payments.calls, label).toBe(1);
    }
  });
  it("an answer rejected for an order the payment system has refunded is sent back: no refund.rejected after refund.approved", async () => {
    const { desk, answers } = deskAnswering((turn, request) => {
      if (turn === 1) return lookUp(turn);
      if (turn === 2) return issue(turn);
      // Pays, then tells the customer the refund is refused.
      if (turn === 3) return { decision: "rejected", reason: "We cannot refund this order." };
      const receipt = results(request.messages).get("issue_refund") as object;
      return { decision: "approved", reason: "Your refund has been issued.", ...receipt };
    });
    await desk.ask("456", "Refund please");
    await desk.drain();
    expect(answers).toContainEqual(
      expect.stringContaining(
        "you answered rejected, but the payment system has refunded this order",
      ),
    );
    expect(desk.facts("refund.rejected")).toEqual([]);
    expect(desk.facts("refund.approved")).toHaveLength(1);
    expect(desk.facts("refund.review.completed")[0]?.payload).toMatchObject({
      decision: "approved",
    });
  });
});
