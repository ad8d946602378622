import {
  canonicalJson,
  type Envelope,
  guardOutput,
  type OutputGuardContext,
  type OutputGuardResult,
  type OutputGuardVerdict,
} from "../../../kit";
import type { ContextMessage } from "../conversation/conversation";
import type { ReplyGenerationRequested } from "../events/commands";

/**
 * The output guard (functions/core/output-guard.ts) on a reply, with what reply generation knows:
 * - internal: the request's event, task, correlation and run ids, the conversation's and the
 *   customer's, the turn's messages' event ids;
 * - the reply may name the order the turn is about (the looked-up one, or the one the customer
 *   named) and the refund the refund agent reported (its `refund_id`);
 * - the customer's own messages of the turn are theirs to have back;
 * - the tool output the model saw: the order facts, as the prompt gives them.
 * Nothing is known here of other customers: their e-mail addresses, phones and order ids are found
 * by shape (any that is not this customer's).
 */

/** The most a reply may hold (ReplyDraft's `reply_text`), placeholders included. */
const REPLY_TEXT_LIMIT = 4000;

export function guardReply(
  text: string,
  event: Envelope,
  request: ReplyGenerationRequested,
  messages: readonly ContextMessage[],
): OutputGuardResult {
  const result = guardOutput(text, replyGuardContext(event, request, messages));
  const { redacted } = result;
  return redacted.length <= REPLY_TEXT_LIMIT
    ? result
    : { ...result, redacted: `${redacted.slice(0, REPLY_TEXT_LIMIT - 1)}…` };
}

export function replyGuardContext(
  event: Envelope,
  request: ReplyGenerationRequested,
  messages: readonly ContextMessage[],
): OutputGuardContext {
  const { customer_id: _customer, ...order } = request.order ?? {};
  return {
    internalIds: [
      event.event_id,
      event.task_id,
      event.correlation_id,
      ...(event.run_id === undefined ? [] : [event.run_id]),
      request.conversation_id,
      request.customer_id,
      request.message_event_id,
      ...messages.map((m) => m.message_event_id),
    ],
    mayName: [
      ...(request.order?.order_id === undefined ? [] : [request.order.order_id]),
      ...(request.order_id === undefined ? [] : [request.order_id]),
      ...(request.refund_review?.refund_id === undefined ? [] : [request.refund_review.refund_id]),
    ],
    customerWrote: messages.map((m) => m.text),
    toolOutputs: request.order === undefined ? [] : [canonicalJson(order)],
  };
}

/**
 * A model answer that was not a valid draft, guarded for the person it is held for: a JSON answer
 * value by value (its shape is the model's, not a tool's; each string is guarded, and a finding's
 * span is within its string), any other answer as one text.
 */
export function guardRawAnswer(
  raw: string,
  event: Envelope,
  request: ReplyGenerationRequested,
  messages: readonly ContextMessage[],
): OutputGuardResult {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return guardReply(raw, event, request, messages);
  }
  const results: OutputGuardResult[] = [];
  const guarded = (v: unknown): unknown => {
    if (typeof v === "string") {
      const result = guardReply(v, event, request, messages);
      results.push(result);
      return result.redacted;
    }
    if (Array.isArray(v)) return v.map(guarded);
    if (v !== null && typeof v === "object")
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, guarded(x)]));
    return v;
  };
  const redacted = JSON.stringify(guarded(value)).slice(0, REPLY_TEXT_LIMIT);
  return { verdict: strictest(results), findings: results.flatMap((r) => r.findings), redacted };
}

function strictest(results: readonly OutputGuardResult[]): OutputGuardVerdict {
  const verdicts = new Set(results.map((r) => r.verdict));
  return verdicts.has("refuse") ? "refuse" : verdicts.has("redact") ? "redact" : "pass";
}
