import type { AggregateRef, Envelope } from "../../schemas";
import type { Delivered, DeliveryFailed, SendRequested } from "../../schemas/events/conversation";
import { AgentBusError, PermanentError, TransientError } from "../core/errors";
import type { Decision, EmitSpec, Role } from "../core/pipeline";
import type { DiscardReason } from "../core/ports";
import {
  type ChannelPort,
  ChannelRejectedError,
  ChannelTimeoutError,
  type SideEffectRecord,
  type SideEffectStore,
  sideEffectKey,
} from "../core/side-effects";

/**
 * The sender (seed 000 §11.4): consumer group `sender`, takes `notification.send.requested` and
 * sends the reply through a `ChannelPort`, once per idempotency key
 * `key = <task_id>:reply:<logical_attempt>`. Every retry of the same send (a redelivery, a resend
 * after a timeout) uses that key; a new key is never minted.
 *
 * State: aggregate `delivery/<task_id>` holds, per key, the fact already emitted for it
 * (`delivered`, `failed` or `escalated`). The side-effect record (SideEffectStore) holds what is
 * known at the channel. The record is written before the pipeline commits, so after a crash the
 * record may know an outcome whose fact was never committed: the fact is then emitted from it.
 *
 * Before `decide`:
 * - past `expires_at` -> discarded `expired` by the pipeline (no channel call);
 * - `input_version` < the conversation's current version -> discarded `superseded` (a newer
 *   customer message arrived; the reply answers an old question; no channel call).
 *
 * `decide`, in order:
 * 1. the state already records a fact for the key -> emit nothing (a re-issued command);
 * 2. claim the key (attempts + 1);
 * 3. the record is `succeeded` -> emit `notification.delivered` confirmed_by "record" (no call);
 *    the record is `failed` -> emit `notification.failed` outcome "failed" with the recorded error
 *    (no call): the refusal was recorded but its fact was not committed;
 * 4. the record is `unknown`, or `pending` from an earlier attempt (attempts > 1: an earlier
 *    worker may have sent and then died) -> query the channel by the key first:
 *    delivered -> mark succeeded, emit delivered confirmed_by "query";
 *    not_found -> send (5) with the same key;
 *    unknown -> unresolved (6);
 *    a fresh record (pending, attempts 1) goes straight to the send;
 * 5. send with the key:
 *    ok -> mark succeeded, emit delivered confirmed_by "send";
 *    ChannelRejectedError -> mark failed, emit `notification.failed` outcome "failed";
 *    TransientError (the channel did not apply it) -> rethrown, the record stays as it is and
 *      the queue redelivers (the next attempt queries first);
 *    ChannelTimeoutError -> query by the same key:
 *      delivered -> mark succeeded, emit delivered confirmed_by "query";
 *      not_found -> send once more with the same key (a second timeout is unresolved (6));
 *      unknown -> unresolved (6);
 * 6. unresolved: when the channel drops resends of a key by itself (`resendSafeWithinSeconds`)
 *    and the record was created less than that many seconds ago, send once more with the same key
 *    (its answer is handled as in 5, a further timeout stays unresolved). Otherwise mark the
 *    record `unknown`, and
 *    - when the record's attempts or the delivery's receive count reached `maxUnknownAttempts`
 *      -> emit `notification.failed` outcome "unknown" (code `channel.outcome_unknown`, for a
 *      person to check) and stop: the state records `escalated`, the record stays `unknown`;
 *    - else throw TransientError `channel.outcome_unknown`: nothing is committed and the queue
 *      redelivers later; the next attempt queries by the same key (4).
 * Errors from `query` itself (throttling, outage) are rethrown as they are. A refused record
 * transition (another worker recorded the other final outcome of the key meanwhile) surfaces as
 * SideEffectTransitionError (class permanent).
 * `decide` may run again for the same delivery after a commit conflict: the second round claims
 * again and finds the record the first round wrote (succeeded / failed: no channel call).
 *
 * Emitted facts go to `delivery/<task_id>`, keep the command's `input_version`, and have
 * `order_key` = the conversation id.
 */

export const SENDER_GROUP = "sender";
export const DELIVERY_AGGREGATE = "delivery";
export const SEND_REQUESTED = "notification.send.requested";
export const DELIVERED = "notification.delivered";
export const DELIVERY_FAILED = "notification.failed";
export const OUTCOME_UNKNOWN = "channel.outcome_unknown";
/** The side-effect kind (the `reply` in `<task_id>:reply:<n>`). */
export const REPLY_KIND = "reply";
export const DEFAULT_MAX_UNKNOWN_ATTEMPTS = 5;

export interface DeliveryFact {
  readonly outcome: "delivered" | "failed" | "escalated";
  readonly at: string;
  readonly delivery_id?: string;
  readonly code?: string;
}

/** The state of `delivery/<task_id>`: the fact emitted per idempotency key. */
export interface DeliveryState {
  readonly keys: Readonly<Record<string, DeliveryFact>>;
}

export interface SenderOptions {
  readonly channel: ChannelPort;
  readonly sideEffects: SideEffectStore;
  /** The conversation's current version (0 when it has none). */
  readonly conversationVersion: (conversationId: string) => Promise<number>;
  /** Attempts with an unknown outcome before escalating. @default 5 */
  readonly maxUnknownAttempts?: number;
}

/** The idempotency key of a send command: `<task_id>:reply:<logical_attempt>`. */
export function replyKey(event: Envelope): string {
  const payload = event.payload as SendRequested;
  return sideEffectKey(event.task_id, REPLY_KIND, payload.logical_attempt);
}

type Outcome =
  | {
      readonly kind: "delivered";
      readonly deliveryId: string;
      readonly by: Delivered["confirmed_by"];
    }
  | { readonly kind: "rejected"; readonly error: ChannelRejectedError }
  | { readonly kind: "unresolved"; readonly cause: string };

export function createSender(options: SenderOptions): Role<DeliveryState> {
  const { channel, sideEffects } = options;
  const maxUnknown = options.maxUnknownAttempts ?? DEFAULT_MAX_UNKNOWN_ATTEMPTS;
  if (!Number.isInteger(maxUnknown) || maxUnknown < 1)
    throw new PermanentError(
      "sender.invalid_option",
      `maxUnknownAttempts must be a positive integer, got ${maxUnknown}`,
    );

  const stateOf = (event: Envelope): AggregateRef => ({
    type: DELIVERY_AGGREGATE,
    id: event.task_id,
  });

  /** One send call with the key: its answer, or undefined after a timeout. */
  const trySend = async (
    request: Parameters<ChannelPort["send"]>[0],
  ): Promise<Outcome | undefined> => {
    try {
      const { deliveryId } = await channel.send(request);
      return { kind: "delivered", deliveryId, by: "send" };
    } catch (error) {
      if (error instanceof ChannelRejectedError) return { kind: "rejected", error };
      if (error instanceof ChannelTimeoutError) return undefined;
      throw error;
    }
  };

  const query = async (key: string): Promise<Outcome | "not_found"> => {
    let answer: Awaited<ReturnType<ChannelPort["query"]>>;
    try {
      answer = await channel.query(key);
    } catch (error) {
      if (error instanceof ChannelTimeoutError)
        return { kind: "unresolved", cause: "the channel's status query timed out" };
      throw error;
    }
    if (answer.status === "delivered")
      return { kind: "delivered", deliveryId: answer.deliveryId, by: "query" };
    if (answer.status === "not_found") return "not_found";
    return { kind: "unresolved", cause: "the channel could not tell whether it was sent" };
  };

  /** Send, and after a timeout query; not found -> one more send. */
  const sendResolving = async (request: Parameters<ChannelPort["send"]>[0]): Promise<Outcome> => {
    const sent = await trySend(request);
    if (sent) return sent;
    const found = await query(request.key);
    if (found !== "not_found") return found;
    return (
      (await trySend(request)) ?? {
        kind: "unresolved",
        cause: "the send timed out twice, the channel had not seen the first",
      }
    );
  };

  const resendSafe = (record: SideEffectRecord, now: Date): boolean => {
    const window = channel.resendSafeWithinSeconds;
    if (window === undefined || window <= 0) return false;
    return now.getTime() - Date.parse(record.created_at) < window * 1000;
  };

  return {
    group: SENDER_GROUP,
    subscriptions: [SEND_REQUESTED],
    stateOf,
    async discard(_state, event): Promise<DiscardReason | undefined> {
      if (event.input_version === undefined) return undefined;
      const { conversation_id } = event.payload as SendRequested;
      const current = await options.conversationVersion(conversation_id);
      return event.input_version < current ? "superseded" : undefined;
    },
    async decide(state, event, { now, receiveCount }): Promise<Decision<DeliveryState>> {
      const payload = event.payload as SendRequested;
      const key = replyKey(event);
      if (state?.keys[key]) return {};

      const request = {
        key,
        recipient: payload.customer_id,
        conversationId: payload.conversation_id,
        text: payload.text,
      };
      const base = {
        conversation_id: payload.conversation_id,
        channel: payload.channel,
        idempotency_key: key,
      };
      const envelope = {
        inputVersion: event.input_version,
        orderKey: payload.conversation_id,
        conversationId: event.conversation_id ?? payload.conversation_id,
      } satisfies Partial<EmitSpec>;

      const delivered = (deliveryId: string, by: Delivered["confirmed_by"]) =>
        decision(state, key, now, { outcome: "delivered", delivery_id: deliveryId }, [
          {
            type: DELIVERED,
            payload: { ...base, delivery_id: deliveryId, confirmed_by: by } satisfies Delivered,
            ...envelope,
          },
        ]);
      const failed = (outcome: DeliveryFailed["outcome"], code: string, message: string) =>
        decision(
          state,
          key,
          now,
          { outcome: outcome === "failed" ? "failed" : "escalated", code },
          [
            {
              type: DELIVERY_FAILED,
              payload: {
                ...base,
                code,
                message: message.slice(0, 4096),
                outcome,
              } satisfies DeliveryFailed,
              ...envelope,
            },
          ],
        );

      const record = await sideEffects.claim(
        key,
        { task_id: event.task_id, kind: REPLY_KIND },
        now,
      );
      if (record.state === "succeeded")
        return delivered(record.result?.delivery_id ?? "unrecorded", "record");
      if (record.state === "failed")
        return failed(
          "failed",
          record.error?.code ?? "channel.rejected",
          record.error?.message ?? "",
        );

      let outcome: Outcome;
      const earlier = record.state === "unknown" || record.attempts > 1;
      if (earlier) {
        const found = await query(key);
        outcome = found === "not_found" ? await sendResolving(request) : found;
      } else {
        outcome = await sendResolving(request);
      }
      if (outcome.kind === "unresolved" && resendSafe(record, now)) {
        outcome = (await trySend(request)) ?? outcome;
      }

      switch (outcome.kind) {
        case "delivered":
          await sideEffects.markSucceeded(key, { delivery_id: outcome.deliveryId }, now);
          return delivered(outcome.deliveryId, outcome.by);
        case "rejected": {
          const message = `${outcome.error.reason}: ${outcome.error.message}`;
          await sideEffects.markFailed(key, { code: outcome.error.code, message }, now);
          return failed("failed", outcome.error.code, message);
        }
        case "unresolved": {
          const attempts = Math.max(record.attempts, receiveCount);
          const message = `${channel.name}: ${outcome.cause} (key ${key}, attempt ${attempts} of ${maxUnknown})`;
          await sideEffects.markUnknown(key, { code: OUTCOME_UNKNOWN, message }, now);
          if (attempts >= maxUnknown) return failed("unknown", OUTCOME_UNKNOWN, message);
          throw new TransientError(OUTCOME_UNKNOWN, message, {
            details: { key, attempts, maxUnknownAttempts: maxUnknown },
          });
        }
      }
    },
  };
}

function decision(
  state: DeliveryState | undefined,
  key: string,
  now: Date,
  fact: Omit<DeliveryFact, "at">,
  emit: EmitSpec[],
): Decision<DeliveryState> {
  return {
    state: { keys: { ...(state?.keys ?? {}), [key]: { ...fact, at: now.toISOString() } } },
    emit,
  };
}

/** True for the error a send throws while its outcome is still unknown (the queue retries). */
export function isOutcomeUnknown(error: unknown): boolean {
  return error instanceof AgentBusError && error.code === OUTCOME_UNKNOWN;
}
