import type { EmitSpec, EventOf, TypedDecision } from "../../../kit";
import {
  type ApprovalDecision,
  type ApprovalRequest,
  type AttentionSignal,
  operatorCommand,
  PermanentError,
  raiseOn,
  ruleOnApproval,
} from "../../../kit";
import type { ReplyApproved, ReplyRejected, SendRequested } from "../events/conversation";
import type { ReplyState } from "./state";

/**
 * A person's decision on a held reply (seed 000 §11.3, §14), taken by the reply generation group,
 * which holds the draft in `reply/<task_id>`. A held reply is a use of the approval primitive
 * (functions/core/approval.ts): the proposed action is `send_reply` with the draft, no deadline.
 *
 * - `reply.approve.requested` on a held reply -> the state becomes `approved` (with the edited text
 *   when one was given), `reply.approved`, then `notification.send.requested` with logical attempt
 *   APPROVED_ATTEMPT: the sender's key `<task_id>:reply:2` is one no send of the held draft could
 *   have used (the draft was attempt 1, never sent). The send keeps the reply's `input_version`
 *   (a newer customer message supersedes it at the sender) and is due within the send TTL from
 *   the approval.
 * - `reply.reject.requested` on a held reply -> `rejected`, `reply.rejected`; nothing is sent.
 * - the same decision again -> nothing (idempotent); the other decision on a decided reply, or
 *   any decision on a reply that is not held (none, or sent without review) -> discarded as
 *   `invalidated_by_state_change`, nothing changes.
 */

export const APPROVE_REQUESTED = "reply.approve.requested";
export const REJECT_REQUESTED = "reply.reject.requested";
export const REVIEW_COMMANDS = [APPROVE_REQUESTED, REJECT_REQUESTED] as const;
export type ReviewCommand = (typeof REVIEW_COMMANDS)[number];
/** What a review emits: the person's decision, and the send an approval asks for. */
export type ReviewEmit = "reply.approved" | "reply.rejected" | "notification.send.requested";
/** The logical attempt of the send an approval asks for (the held draft was attempt 1). */
export const APPROVED_ATTEMPT = 2;

/**
 * Replies held for a person's review: nothing is sent until a person decides. Counted over 15
 * minutes, any held reply alarms (`tolerated` and `windowMinutes` of a copy change that).
 */
export const HELD_REPLIES: AttentionSignal = {
  name: "held-replies",
  metric: "ReplyHeldForReview",
  alarm: {
    id: "HeldReplyAlarm",
    what: "replies held for review",
    why: "nothing is sent until a person decides",
    act: `Run ${operatorCommand("reply list")}, then ${operatorCommand("reply approve <task id>")} or ${operatorCommand("reply reject <task id>")}`,
    windowMinutes: 15,
  },
};

/** Every `reply.held_for_review` raises `held-replies`. */
export const HELD_REPLY_ATTENTION = raiseOn("reply.held_for_review", HELD_REPLIES);

export function decideReview(
  state: ReplyState | undefined,
  event: EventOf<ReviewCommand>,
  now: Date,
  sendTtlSeconds: number,
): TypedDecision<ReplyState, ReviewEmit> {
  const verdict = event.event_type === APPROVE_REQUESTED ? "approve" : "reject";
  const ruling = ruleOnApproval(
    state && heldReplyApproval(state),
    state && reviewDecision(state),
    verdict,
    HELD_REPLY_STEP,
  );
  if (ruling.kind === "repeat") return {};
  if (ruling.kind === "refuse" || !state) return { discarded: "invalidated_by_state_change" };
  return event.event_type === APPROVE_REQUESTED
    ? approve(state, event, now, sendTtlSeconds)
    : reject(state, event, now);
}

/** The step a held reply's approval is for. */
export const HELD_REPLY_STEP = "reply";

/** What a held reply waits for, as the approval primitive has it; undefined when not held. */
export function heldReplyApproval(state: ReplyState): ApprovalRequest | undefined {
  if (state.status !== "held_for_review") return undefined;
  return {
    step: HELD_REPLY_STEP,
    action: "send_reply",
    input: { text: state.reply_text, ...(state.reason ? { held_because: state.reason } : {}) },
    since: state.generated_at,
  };
}

/** A person's decision on the reply, as the approval primitive has it. */
function reviewDecision(state: ReplyState): ApprovalDecision | undefined {
  const { review } = state;
  if (!review) return undefined;
  return {
    verdict: review.decision === "approved" ? "approve" : "reject",
    by: review.requested_by,
    at: review.at,
    ...(review.reason === undefined ? {} : { reason: review.reason }),
  };
}

function approve(
  state: ReplyState,
  event: EventOf<typeof APPROVE_REQUESTED>,
  now: Date,
  sendTtlSeconds: number,
): TypedDecision<ReplyState, ReviewEmit> {
  const request = event.payload;
  if (state.customer_id === undefined || state.channel === undefined)
    throw new PermanentError(
      "reply.no_recipient",
      `reply ${state.task_id} was held before replies kept their recipient; it cannot be sent from here`,
    );
  const text = request.text ?? state.reply_text;
  const edited = text !== state.reply_text;
  const who = operatorFields(request);
  const approved: ReplyApproved = {
    conversation_id: state.conversation_id,
    reply_text: text,
    edited,
    logical_attempt: APPROVED_ATTEMPT,
    ...who,
  };
  const send: SendRequested = {
    conversation_id: state.conversation_id,
    customer_id: state.customer_id,
    channel: state.channel,
    text,
    logical_attempt: APPROVED_ATTEMPT,
  };
  const fields = factFieldsOf(state);
  return {
    state: {
      ...state,
      status: "approved",
      reply_text: text,
      review: {
        decision: "approved",
        at: now.toISOString(),
        edited,
        ...who,
        logical_attempt: APPROVED_ATTEMPT,
      },
    },
    emit: [
      { type: "reply.approved", payload: approved, ...fields },
      {
        type: "notification.send.requested",
        payload: send,
        ...fields,
        expiresAt: new Date(now.getTime() + sendTtlSeconds * 1000).toISOString(),
      },
    ],
  };
}

function reject(
  state: ReplyState,
  event: EventOf<typeof REJECT_REQUESTED>,
  now: Date,
): TypedDecision<ReplyState, ReviewEmit> {
  const who = operatorFields(event.payload);
  const rejected: ReplyRejected = { conversation_id: state.conversation_id, ...who };
  return {
    state: {
      ...state,
      status: "rejected",
      review: { decision: "rejected", at: now.toISOString(), ...who },
    },
    emit: [{ type: "reply.rejected", payload: rejected, ...factFieldsOf(state) }],
  };
}

function operatorFields(request: { requested_by: string; reason?: string }) {
  return {
    requested_by: request.requested_by,
    ...(request.reason === undefined ? {} : { reason: request.reason }),
  };
}

/** The reply's facts keep the version the reply was made from and the conversation's order key. */
function factFieldsOf(state: ReplyState) {
  return {
    inputVersion: state.input_version,
    conversationId: state.conversation_id,
    orderKey: state.conversation_id,
  } satisfies Partial<EmitSpec>;
}
