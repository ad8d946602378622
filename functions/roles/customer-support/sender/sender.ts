import type { AggregateRef, Envelope } from "../../../../schemas";
import type {
  Delivered,
  DeliveryFailed,
  SendRequested,
} from "../../../../schemas/events/conversation";
import {
  SUPPORT_CANCEL_REQUESTED,
  SUPPORT_CANCELLED,
} from "../../../../schemas/events/support-cancel";
import { SUPPORT_SUPERSEDED } from "../../../../schemas/events/support-superseded";
import type { DecideContext, DiscardReason, EmitSpec, Role } from "../../../kit";
import {
  AgentBusError,
  type DescriptorOf,
  defineRole,
  type EmitOf,
  ERASED,
  type EventOf,
  PermanentError,
  payloadOf,
  type SideEffectStore,
  sideEffectKey,
  TransientError,
  type TypedDecision,
} from "../../../kit";
import { type ConversationReader, ConversationReads } from "../conversation/conversation";
import type { OrdersPort } from "../integrations/orders/port";
import type { ChannelPort } from "../integrations/reply-channel/port";
import { type SupersededEmit, supersededDecision } from "../superseded";
import { decideCancel } from "./cancel";
import { ChannelCalls, type Outcome } from "./channel";
import { type SendChecks, staleReason } from "./facts";
import { decideResolve, RESOLVE_REQUESTED } from "./resolve";
import { type DeliveryFact, type DeliveryState, deliveryOf, type EscalatedSend } from "./state";

/**
 * The sender (seed 000 §11.4): consumer group `sender`, takes `notification.send.requested` and
 * sends the reply through a `ChannelPort`, once per idempotency key
 * `key = <task_id>:reply:<logical_attempt>`. Every retry of the same send (a redelivery, a resend
 * after a timeout) uses that key; a new key is never minted.
 *
 * State: aggregate `delivery/<task_id>` holds, per key, the fact already emitted for it
 * (`delivered`, `failed` or `escalated`), the turn's cancel once one was asked for
 * (`support.cancel.requested`, ./cancel), and the tenant of the event that made it: a resolve
 * or a cancel naming another is refused as `delivery.tenant_mismatch` (Role.tenantOfState). The
 * side-effect record (SideEffectStore) holds what is known at the channel. The record is written
 * before the pipeline commits, so after a crash the record may know an outcome whose fact was
 * never committed: the fact is then emitted from it.
 *
 * Before `decide`:
 * - past `expires_at` -> discarded `expired` by the pipeline (no channel call);
 * - the turn was cancelled -> discarded `cancelled`; `input_version` < the conversation's current
 *   version -> discarded `superseded` (a newer customer message arrived; the reply answers an old
 *   question), recorded with `support.superseded`, which names the turn that answers
 *   (../superseded); the order the reply rests on changed since it was looked up (read again
 *   through the `orders` port) -> discarded `invalidated_by_state_change` (./facts); no channel
 *   call;
 * - but a send already claimed for the command whose fact is not recorded (`unfinished`: a send
 *   that timed out, a crash between send and commit) is resolved, never dropped: `decide` runs
 *   with `resolving` set, finds the outcome from the record or by query, and starts no new send
 *   (no resend either); what the channel never received is closed as `failed` with code
 *   `sender.not_sent` and the command recorded as discarded with its reason (with
 *   `support.superseded` when that is the reason).
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
 *      person to check) and stop: the state records `escalated` with what was to be sent, the
 *      record stays `unknown` until a person resolves it (`notification.resolve.requested`,
 *      ./resolve);
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
/** The code of a claimed send closed unsent because its command was discarded meanwhile. */
export const NOT_SENT = "sender.not_sent";
/** The side-effect kind (the `reply` in `<task_id>:reply:<n>`). */
export const REPLY_KIND = "reply";
export const DEFAULT_MAX_UNKNOWN_ATTEMPTS = 5;

export interface SenderOptions {
  readonly channel: ChannelPort;
  readonly sideEffects: SideEffectStore;
  /**
   * The conversation's state (conversationReader in ../conversation): its current version, for
   * the superseded check, and its newest turn, which answers a superseded one.
   */
  readonly conversation: ConversationReader;
  /** Where the order a reply rests on is read again before sending; without it, not re-checked. */
  readonly orders?: OrdersPort;
  /** Attempts with an unknown outcome before escalating. @default 5 */
  readonly maxUnknownAttempts?: number;
}

/** The idempotency key of a send command: `<task_id>:reply:<logical_attempt>`. */
export function replyKey(event: Envelope): string {
  const payload = payloadOf(event, SEND_REQUESTED);
  return sideEffectKey(event.task_id, REPLY_KIND, payload.logical_attempt);
}

type SenderCommand =
  | typeof SEND_REQUESTED
  | typeof RESOLVE_REQUESTED
  | typeof SUPPORT_CANCEL_REQUESTED;
/** A send's outcome: what the sender reports for its key. */
type SendFact = typeof DELIVERED | typeof DELIVERY_FAILED;
type Sent = TypedDecision<DeliveryState, SendFact | SupersededEmit>;

/** What the sender emits: a send's outcome, a turn's cancel, a turn another superseded. */
type SenderEmit = SendFact | typeof SUPPORT_CANCELLED | SupersededEmit;

export const SENDER: DescriptorOf<SenderCommand, SenderEmit> = {
  group: SENDER_GROUP,
  subscriptions: [SEND_REQUESTED, RESOLVE_REQUESTED, SUPPORT_CANCEL_REQUESTED],
  emits: [DELIVERED, DELIVERY_FAILED, SUPPORT_CANCELLED, SUPPORT_SUPERSEDED],
  stateOf: (event: Envelope): AggregateRef => ({ type: DELIVERY_AGGREGATE, id: event.task_id }),
  personalState: {
    stateOf: ({ taskId }) => (taskId ? { type: DELIVERY_AGGREGATE, id: taskId } : undefined),
    erase: (state: DeliveryState): DeliveryState => ({
      ...state,
      keys: Object.fromEntries(
        Object.entries(state.keys).map(([key, fact]) => [
          key,
          fact.send ? { ...fact, send: { ...fact.send, text: ERASED } } : fact,
        ]),
      ),
    }),
  },
};

export function senderRole(options: SenderOptions): Role<DeliveryState> {
  const maxUnknown = options.maxUnknownAttempts ?? DEFAULT_MAX_UNKNOWN_ATTEMPTS;
  if (!Number.isInteger(maxUnknown) || maxUnknown < 1)
    throw new PermanentError(
      "sender.invalid_option",
      `maxUnknownAttempts must be a positive integer, got ${maxUnknown}`,
    );
  const reads = new ConversationReads(options.conversation, conversationIdOf);
  const sender = new Sender(options, maxUnknown, reads);
  const checks: SendChecks = {
    conversation: (event) => reads.forDiscard(event),
    ...(options.orders === undefined ? {} : { orders: options.orders }),
  };
  return defineRole<DeliveryState, SenderCommand, SenderEmit>({
    ...SENDER,
    // A person's resolve and a turn's cancel are obeyed in the delivery's tenant only.
    tenantOfState: (state) => state.tenant_id,
    async discard(state, event): Promise<DiscardReason | undefined> {
      if (event.event_type !== SEND_REQUESTED) return undefined;
      return staleReason(state?.cancelled !== undefined, event, checks);
    },
    async discarded(_state, event, reason) {
      if (reason !== "superseded" || event.event_type !== SEND_REQUESTED) return undefined;
      return supersededSend(event, reads);
    },
    /** A send was claimed for this command and its fact is not recorded yet. */
    async unfinished(state, event): Promise<boolean> {
      if (event.event_type !== SEND_REQUESTED) return false;
      const key = replyKey(event);
      if (state?.keys[key]) return false;
      return (await options.sideEffects.get(key)) !== undefined;
    },
    decide(state, event, context) {
      if (event.event_type === RESOLVE_REQUESTED)
        return decideResolve(state, event, context.now, sender.resolveDeps);
      if (event.event_type === SUPPORT_CANCEL_REQUESTED)
        return decideCancel(state, event, context.now);
      return sender.decide(state, event, context);
    },
  });
}

function conversationIdOf(event: Envelope): string {
  return payloadOf(event, SEND_REQUESTED).conversation_id;
}

/** The fact that the send's turn will get no reply: the conversation's newest turn answers. */
async function supersededSend(event: EventOf<typeof SEND_REQUESTED>, reads: ConversationReads) {
  const conversationId = event.payload.conversation_id;
  return supersededDecision<DeliveryState>(event, conversationId, await reads.afterDiscard(event));
}

class Sender {
  private readonly calls: ChannelCalls;
  private readonly sideEffects: SideEffectStore;
  constructor(
    private readonly options: SenderOptions,
    private readonly maxUnknown: number,
    private readonly reads: ConversationReads,
  ) {
    this.calls = new ChannelCalls(options.channel);
    this.sideEffects = options.sideEffects;
  }

  get resolveDeps() {
    return { calls: this.calls, sideEffects: this.sideEffects };
  }

  async decide(
    state: DeliveryState | undefined,
    event: EventOf<typeof SEND_REQUESTED>,
    { now, receiveCount, resolving }: DecideContext<DeliveryState>,
  ): Promise<Sent> {
    const key = replyKey(event);
    if (state?.keys[key]) return resolving ? { discarded: resolving } : {};
    const facts = new Facts(state, event, key, now);
    const record = await this.sideEffects.claim(
      key,
      { task_id: event.task_id, kind: REPLY_KIND },
      now,
    );
    if (record.state === "succeeded")
      return facts.delivered(record.result?.delivery_id ?? "unrecorded", "record");
    if (record.state === "failed")
      return facts.failed(
        "failed",
        record.error?.code ?? "channel.rejected",
        record.error?.message ?? "",
      );
    const request = facts.request();
    const earlier = record.state === "unknown" || record.attempts > 1 || resolving;
    const outcome = earlier
      ? await this.calls.resolveEarlier(request, record, now, resolving)
      : await this.calls.firstSend(request, record, now);
    if (outcome === "not_sent") {
      // Discarded before the channel ever saw it: close the record, send nothing.
      const message = `not sent: the command was ${resolving} before the channel received it`;
      await this.sideEffects.markFailed(key, { code: NOT_SENT, message }, now);
      const closed = facts.record({ outcome: "discarded", code: NOT_SENT });
      const told = resolving === "superseded" ? await supersededSend(event, this.reads) : {};
      return {
        ...closed,
        emit: [...(closed.emit ?? []), ...(told.emit ?? [])],
        discarded: resolving,
      };
    }
    return this.settle(outcome, key, Math.max(record.attempts, receiveCount), facts, now);
  }

  /** Record what the channel answered and emit its fact (or retry while it is unknown). */
  private async settle(
    outcome: Outcome,
    key: string,
    attempts: number,
    facts: Facts,
    now: Date,
  ): Promise<Sent> {
    switch (outcome.kind) {
      case "delivered":
        await this.sideEffects.markSucceeded(key, { delivery_id: outcome.deliveryId }, now);
        return facts.delivered(outcome.deliveryId, outcome.by);
      case "rejected": {
        const message = `${outcome.error.reason}: ${outcome.error.message}`;
        await this.sideEffects.markFailed(key, { code: outcome.error.code, message }, now);
        return facts.failed("failed", outcome.error.code, message);
      }
      case "unresolved": {
        const max = this.maxUnknown;
        const message = `${this.options.channel.name}: ${outcome.cause} (key ${key}, attempt ${attempts} of ${max})`;
        await this.sideEffects.markUnknown(key, { code: OUTCOME_UNKNOWN, message }, now);
        if (attempts >= max) return facts.failed("unknown", OUTCOME_UNKNOWN, message);
        throw new TransientError(OUTCOME_UNKNOWN, message, {
          details: { key, attempts, maxUnknownAttempts: max },
        });
      }
    }
  }
}

/** The facts the sender emits for one command, and the state that records them per key. */
class Facts {
  private readonly payload: SendRequested;
  constructor(
    private readonly state: DeliveryState | undefined,
    private readonly event: EventOf<typeof SEND_REQUESTED>,
    private readonly key: string,
    private readonly now: Date,
  ) {
    this.payload = event.payload;
  }

  request(): Parameters<ChannelPort["send"]>[0] {
    return {
      key: this.key,
      recipient: this.payload.customer_id,
      conversationId: this.payload.conversation_id,
      text: this.payload.text,
    };
  }

  record(fact: Omit<DeliveryFact, "at">, emit: EmitOf<SendFact>[] = []): Sent {
    const state = deliveryOf(this.state, this.event);
    const keys = { ...state.keys, [this.key]: { ...fact, at: this.now.toISOString() } };
    return { state: { ...state, keys }, emit };
  }

  delivered(deliveryId: string, by: Delivered["confirmed_by"]): Sent {
    const payload = { ...this.base(), delivery_id: deliveryId, confirmed_by: by };
    return this.record({ outcome: "delivered", delivery_id: deliveryId }, [
      { type: DELIVERED, payload, ...this.envelope() },
    ]);
  }

  failed(outcome: DeliveryFailed["outcome"], code: string, message: string) {
    const payload = { ...this.base(), code, message: message.slice(0, 4096), outcome };
    const send = outcome === "unknown" ? { send: this.escalatedSend() } : {};
    return this.record({ outcome: outcome === "failed" ? "failed" : "escalated", code, ...send }, [
      { type: DELIVERY_FAILED, payload, ...this.envelope() },
    ]);
  }

  private escalatedSend(): EscalatedSend {
    const { conversation_id, customer_id, channel, text } = this.payload;
    return { conversation_id, customer_id, channel, text };
  }

  private base() {
    return {
      conversation_id: this.payload.conversation_id,
      channel: this.payload.channel,
      idempotency_key: this.key,
    };
  }

  private envelope() {
    return {
      inputVersion: this.event.input_version,
      orderKey: this.payload.conversation_id,
      conversationId: this.event.conversation_id ?? this.payload.conversation_id,
    } satisfies Partial<EmitSpec>;
  }
}

/** True for the error a send throws while its outcome is still unknown (the queue retries). */
export function isOutcomeUnknown(error: unknown): boolean {
  return error instanceof AgentBusError && error.code === OUTCOME_UNKNOWN;
}
