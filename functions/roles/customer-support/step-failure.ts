import type { ErrorInfo, EventOf, TypedDecision } from "../../kit";
import { type AttentionSignal, operatorCommand, raiseOn } from "../../kit";
import type { SendRequested } from "./events/conversation";
import type { StepFailed, SupportStep } from "./events/step-failure";
import { factFields } from "./fact-fields";

/**
 * Failure facts of the support workflow (seed 000 §11.3): what the router, the order lookup and
 * reply generation commit when they fail for good (`Role.failed`), instead of leaving the command
 * in a dead-letter queue and the conversation without an answer:
 * - `support.step.failed` on the group's own stream (the step, the error's code and message);
 * - `notification.send.requested` with the hand-off message, logical attempt 1 of the task, so
 *   the sender delivers it once under the key `<task_id>:reply:1` (no reply was sent for the task
 *   before: every step that can fail comes before the first send). Its deadline is its own
 *   (`HANDOFF_TTL_SECONDS` from the failure): a hand-off is worth sending after a late failure.
 *   A newer message of the customer still supersedes it, as it would the reply.
 * The failing group writes no state for the command: its checkpoint makes a redelivery a
 * duplicate, and a command it never committed has nothing to repeat.
 */

export const HANDOFF_TEXT =
  "Sorry, we could not answer your message automatically. A member of our team has your message and will get back to you.";
export const HANDOFF_TTL_SECONDS = 300;
const MESSAGE_LIMIT = 1000;

/** What a step that failed for good emits: its failure fact and the hand-off send. */
export const STEP_FAILED_EMITS = ["support.step.failed", "notification.send.requested"] as const;
export type StepFailedEmit = (typeof STEP_FAILED_EMITS)[number];

/**
 * A support turn handed to a person after a step failed for good: the customer was told "a
 * member of our team will get back to you".
 */
export const HANDED_OFF: AttentionSignal = {
  name: "handed-off",
  metric: "SupportTurnHandedOff",
  alarm: {
    id: "HandedOffAlarm",
    what: "support turns handed off to a person",
    why: 'the customer was told "a member of our team will get back to you"',
    act: `Run ${operatorCommand("status")}, then ${operatorCommand("trace <conversation id>")}; a person answers the customer`,
  },
};

/** What a step that failed for good raises: `handed-off`, when it sent the hand-off message. */
export const STEP_FAILED_ATTENTION = raiseOn(
  "support.step.failed",
  HANDED_OFF,
  (failed) => failed.handed_off,
);

/** The failure fact and the hand-off send for a support command that failed for good. */
export function stepFailedDecision<S>(
  step: SupportStep,
  // The commands of the steps that can fail; the hand-off is addressed with their fields.
  event: EventOf<"order.lookup.requested" | "reply.generation.requested">,
  failure: ErrorInfo,
  now: Date,
): TypedDecision<S, StepFailedEmit> {
  const request = event.payload;
  const fact = factFields(event, request.conversation_id);
  const failed: StepFailed = {
    conversation_id: request.conversation_id,
    step,
    code: failure.code,
    message: failure.message.slice(0, MESSAGE_LIMIT),
    handed_off: true,
  };
  const handoff: SendRequested = {
    conversation_id: request.conversation_id,
    customer_id: request.customer_id,
    channel: request.channel,
    text: HANDOFF_TEXT,
    logical_attempt: 1,
  };
  return {
    emit: [
      { type: "support.step.failed", payload: failed, ...fact },
      {
        type: "notification.send.requested",
        payload: handoff,
        ...fact,
        expiresAt: new Date(now.getTime() + HANDOFF_TTL_SECONDS * 1000).toISOString(),
      },
    ],
  };
}
