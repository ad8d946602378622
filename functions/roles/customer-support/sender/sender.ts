import type {
  AggregateRef,
  DecideContext,
  DiscardReason,
  EmitSpec,
  Envelope,
  Role,
} from "../../../kit";
import {
  AgentBusError,
  DEFAULT_MAX_UNKNOWN_ATTEMPTS,
  type DescriptorOf,
  defineRole,
  type EmitOf,
  ERASED,
  type EventOf,
  PermanentError,
  payloadOf,
  type SideEffectStore,
  sideEffectKey,
  type TypedDecision,
  writeOnce,
} from "../../../kit";
import { type ConversationReader, ConversationReads } from "../conversation/conversation";
import { SUPPORT_CANCEL_REQUESTED, SUPPORT_CANCELLED } from "../events/cancel";
import type { Delivered, DeliveryFailed, SendRequested } from "../events/conversation";
import { SUPPORT_SUPERSEDED } from "../events/superseded";
import type { OrdersPort } from "../integrations/orders/port";
import type { ChannelPort } from "../integrations/reply-channel/port";
import { type SupersededEmit, supersededDecision } from "../superseded";
import { decideCancel } from "./cancel";
import { channelSend, confirmedBy, OUTCOME_UNKNOWN, REPLY_KIND } from "./channel";
import { type SendChecks, staleReason } from "./facts";
import { decideResolve, RESOLVE_REQUESTED, type ResolveDeps } from "./resolve";
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
 *   with `resolving` set and learns the outcome without sending (`learnOnly`, below); what the
 *   channel never received is closed as `failed` with code `sender.not_sent` and the command
 *   recorded as discarded with its reason (with `support.superseded` when that is the reason).
 *
 * `decide`, in order:
 * 1. the state already records a fact for the key -> emit nothing (a re-issued command);
 * 2. send once under the key: `writeOnce` (functions/core/write-once.ts, whose contract this is),
 *    with the channel as the outside write (./channel.ts). The key is claimed (`pending`,
 *    attempts + 1); a final record answers without a call (its fact was never committed); an
 *    earlier attempt's record is queried first; a timeout is resolved by the query; the same key
 *    is sent again only when the channel has not seen it, or within its own deduplication window
 *    (`resendSafeWithinSeconds`). What it learnt is recorded and emitted:
 *    - succeeded -> `notification.delivered`, confirmed_by "send", "query" or "record";
 *    - failed (a ChannelRejectedError, now or recorded) -> `notification.failed` outcome "failed";
 *    - unknown, below `maxUnknownAttempts` (the record's attempts or the delivery's receive
 *      count) -> TransientError `channel.outcome_unknown`: nothing is committed, the queue
 *      redelivers and the next attempt queries by the same key;
 *    - unknown at the bound -> `notification.failed` outcome "unknown" (code
 *      `channel.outcome_unknown`, for a person to check); the state records `escalated` with
 *      what was to be sent, the record stays `unknown` until a person resolves it
 *      (`notification.resolve.requested`, ./resolve).
 *    A TransientError of the channel (it did not apply the send) and errors of `query` itself
 *    are rethrown as they are, the record left for the next attempt.
 * A refused record transition (another worker recorded the other final outcome of the key
 * meanwhile) surfaces as SideEffectTransitionError (class permanent).
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
/** The code of a claimed send closed unsent because its command was discarded meanwhile. */
export const NOT_SENT = "sender.not_sent";
export { DEFAULT_MAX_UNKNOWN_ATTEMPTS, OUTCOME_UNKNOWN, REPLY_KIND };

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
  // The reply's text goes to the channel.
  readsPersonal: [SEND_REQUESTED],
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
  constructor(
    private readonly options: SenderOptions,
    private readonly maxUnknown: number,
    private readonly reads: ConversationReads,
  ) {}

  get resolveDeps(): ResolveDeps {
    return { channel: this.options.channel, sideEffects: this.options.sideEffects };
  }

  async decide(
    state: DeliveryState | undefined,
    event: EventOf<typeof SEND_REQUESTED>,
    { now, receiveCount, resolving }: DecideContext<DeliveryState>,
  ): Promise<Sent> {
    const key = replyKey(event);
    if (state?.keys[key]) return resolving ? { discarded: resolving } : {};
    const facts = new Facts(state, event, key, now);
    const notSent = `not sent: the command was ${resolving} before the channel received it`;
    const outcome = await writeOnce({
      ...channelSend(this.options.channel, facts.request()),
      ledger: this.options.sideEffects,
      key,
      taskId: event.task_id,
      kind: REPLY_KIND,
      now,
      receiveCount,
      maxUnknownAttempts: this.maxUnknown,
      unknownCode: OUTCOME_UNKNOWN,
      ...(resolving && { learnOnly: { code: NOT_SENT, message: notSent } }),
    });
    switch (outcome.kind) {
      case "succeeded":
        return facts.delivered(outcome.output, confirmedBy(outcome.by));
      case "failed":
      case "unknown":
        return facts.failed(outcome.kind, outcome.error.code, outcome.error.message);
      case "not_called":
        return this.notSent(event, facts, resolving);
    }
  }

  /** Discarded before the channel ever saw it: the record is closed, nothing is sent. */
  private async notSent(
    event: EventOf<typeof SEND_REQUESTED>,
    facts: Facts,
    resolving: DiscardReason | undefined,
  ): Promise<Sent> {
    const closed = facts.record({ outcome: "discarded", code: NOT_SENT });
    const told = resolving === "superseded" ? await supersededSend(event, this.reads) : {};
    return {
      ...closed,
      emit: [...(closed.emit ?? []), ...(told.emit ?? [])],
      discarded: resolving,
    };
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
