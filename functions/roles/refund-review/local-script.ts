import { type ModelMessage, type ModelRequest, ToolUse } from "../../kit";

/**
 * The refund agent's script on the local model (a scripted stand-in, NOT a model), which its
 * module registers (`localScripts` of its model's use, ./index.ts): a deterministic reviewer that
 * asks for the order and its refund (two calls in one turn), then answers about a refund that
 * exists, refuses an order in transit, or issues the refund and answers from what its tools said.
 * Markers in the customer's messages drive the cases:
 * `[unknown-tool]` first asks for a tool that does not exist, `[bad-tool-input]` first calls
 * get_order with input that does not fit, `[refund-cents:N]` asks for N cents instead of the total,
 * `[ramble-after-refund]` answers, once the refund is made, with text that is not JSON (every turn,
 * so the run is handed to a person), and `[pay-instead:ORDER]` is an instruction smuggled into the customer's message that the model
 * obeys: once it has looked the order up, it asks issue_refund for ORDER instead (which a review
 * of another order must refuse), then goes on as if it had not.
 */

export const UNKNOWN_TOOL_MARKER = "[unknown-tool]";
export const BAD_TOOL_INPUT_MARKER = "[bad-tool-input]";
export const RAMBLE_AFTER_REFUND_MARKER = "[ramble-after-refund]";
const PAY_INSTEAD = /\[pay-instead:([A-Za-z0-9_-]+)\]/;

/** A customer's message with an instruction to refund `orderId` instead, which the model obeys. */
export function payInsteadMarker(orderId: string): string {
  return `[pay-instead:${orderId}]`;
}

interface Question {
  readonly order_id: string;
  /** The customer's messages, joined. */
  readonly question: string;
}

/** The refund question of the agent's first message (refundPrompt in the refund agent). */
function questionOf(request: ModelRequest): Question {
  const first = JSON.parse(request.messages[0]?.text ?? "{}") as {
    refund_question?: { order_id?: string; customer_messages?: string[] };
  };
  return {
    order_id: first.refund_question?.order_id ?? "",
    question: (first.refund_question?.customer_messages ?? []).join(" "),
  };
}

/** Each tool's latest answer in the conversation, by tool name. */
function toolAnswers(messages: readonly ModelMessage[]) {
  const names = new Map<string, string>();
  const answers = new Map<string, { content: unknown; isError: boolean }>();
  for (const m of messages) {
    for (const call of m.toolCalls ?? []) names.set(call.id, call.name);
    for (const result of m.toolResults ?? []) {
      const name = names.get(result.toolCallId);
      if (name) answers.set(name, { content: result.content, isError: result.isError === true });
    }
  }
  return answers;
}

export function refundReview(request: ModelRequest): string | object | ToolUse {
  const q = questionOf(request);
  const turn = request.messages.filter((m) => m.role === "assistant").length + 1;
  const id = (n: number) => `call_${turn}_${n}`;
  const answers = toolAnswers(request.messages);
  if (turn === 1 && q.question.includes(UNKNOWN_TOOL_MARKER))
    return new ToolUse([{ id: id(1), name: "delete_order", input: { order_id: q.order_id } }]);
  if (turn === 1 && q.question.includes(BAD_TOOL_INPUT_MARKER))
    return new ToolUse([{ id: id(1), name: "get_order", input: { order: 7 } }]);
  const order = answers.get("get_order");
  const status = answers.get("get_refund_status");
  if (!order || order.isError || !status)
    return new ToolUse([
      { id: id(1), name: "get_order", input: { order_id: q.order_id } },
      { id: id(2), name: "get_refund_status", input: { order_id: q.order_id } },
    ]);
  return decideRefund(q, order.content, status.content, answers.get("issue_refund"), id);
}

interface ShopOrder {
  readonly status: string;
  readonly total_cents: number;
  readonly currency?: string;
  readonly refund?: { status: string; amount_cents?: number; updated_at?: string };
}

/** What the customer is told about a refund the shop already has on the order. */
function aboutExistingRefund(
  refund: NonNullable<ShopOrder["refund"]>,
  currency: string | undefined,
): string {
  const amount =
    refund.amount_cents === undefined
      ? ""
      : ` of ${(refund.amount_cents / 100).toFixed(2)} ${currency ?? ""}`.trimEnd();
  const when = refund.updated_at === undefined ? "" : ` on ${refund.updated_at.slice(0, 10)}`;
  return `Your refund${amount} was ${refund.status}${when}.`;
}

/** The refund of another order a customer's message smuggles in, obeyed as a model might. */
function payingInstead(q: Question, order: ShopOrder, id: (n: number) => string) {
  const instead = PAY_INSTEAD.exec(q.question)?.[1];
  if (instead === undefined) return undefined;
  return new ToolUse([
    {
      id: id(1),
      name: "issue_refund",
      input: { order_id: instead, amount_cents: order.total_cents, reason: "as asked" },
    },
  ]);
}

function decideRefund(
  q: Question,
  order: unknown,
  status: unknown,
  issued: { content: unknown; isError: boolean } | undefined,
  id: (n: number) => string,
): string | object | ToolUse {
  const found = order as { found: boolean; order?: ShopOrder };
  if (!found.found || !found.order)
    return { decision: "rejected", reason: `We could not find order ${q.order_id}.` };
  const instead = issued ? undefined : payingInstead(q, found.order, id);
  if (instead) return instead;
  const refund = (
    status as { refunded: boolean; refund?: { refund_id: string; amount_cents: number } }
  ).refund;
  if (refund)
    return {
      decision: "answered",
      reason: `Your refund ${refund.refund_id} of ${refund.amount_cents} cents has been issued.`,
      amount_cents: refund.amount_cents,
      refund_id: refund.refund_id,
    };
  const existing = found.order.refund;
  if (existing && existing.status !== "none")
    return { decision: "answered", reason: aboutExistingRefund(existing, found.order.currency) };
  if (found.order.status === "shipped")
    return {
      decision: "rejected",
      reason: "Your order is on its way; it can be refunded once it is delivered or returned.",
    };
  if (!issued) {
    const asked = /\[refund-cents:(\d+)\]/.exec(q.question)?.[1];
    const amount = asked === undefined ? found.order.total_cents : Number(asked);
    return new ToolUse([
      {
        id: id(1),
        name: "issue_refund",
        input: { order_id: q.order_id, amount_cents: amount, reason: q.question.slice(0, 200) },
      },
    ]);
  }
  if (issued.isError) {
    const message = (issued.content as { message?: string }).message ?? "the refund was refused";
    return { decision: "rejected", reason: `We could not refund your order: ${message}` };
  }
  if (q.question.includes(RAMBLE_AFTER_REFUND_MARKER)) return "I think the refund went through.";
  const receipt = issued.content as { refund_id: string; amount_cents: number };
  return {
    decision: "approved",
    reason: "Your refund has been issued.",
    amount_cents: receipt.amount_cents,
    refund_id: receipt.refund_id,
  };
}
