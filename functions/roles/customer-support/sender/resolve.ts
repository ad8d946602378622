import type { EmitOf, EventOf, SideEffectStore, TypedDecision } from "../../../kit";
import { closeByPerson, resendByPerson } from "../../../kit";
import type { Delivered, DeliveryFailed, SendResolveRequested } from "../events/conversation";
import type { ChannelPort } from "../integrations/reply-channel/port";
import { channelSend, confirmedBy, DELIVERY_ID, OUTCOME_UNKNOWN, REPLY_KIND } from "./channel";
import { type DeliveryFact, type DeliveryState, deliveryOf, type EscalatedSend } from "./state";

/**
 * A person's resolution of a send whose outcome stayed unknown (seed 000 §11.4, §14), taken by the
 * sender on `delivery/<task_id>` with `notification.resolve.requested`. Only a key whose
 * side-effect record is `unknown` is resolved:
 *
 * - `delivered` (checked outside AgentBus): the record becomes `succeeded` (delivery id
 *   `operator:<who>`), `notification.delivered` confirmed_by "operator";
 * - `resend`: the same key is claimed again and sent again, a person having checked it was not
 *   (`resendByPerson`, functions/core/write-once.ts; a timeout is resolved by the query): its
 *   answer is recorded and emitted as the sender does (delivered / failed), and an outcome still
 *   unknown is reported again as `notification.failed` outcome "unknown", the record left
 *   `unknown` for another resolution;
 * - `abandon`: the record becomes `failed` (code OPERATOR_ABANDONED), `notification.failed`
 *   outcome "failed"; nothing is sent.
 * The same resolution again once the record is final -> nothing (idempotent); a key that is not
 * unknown otherwise, or not of this task -> discarded as `invalidated_by_state_change`.
 */

export const RESOLVE_REQUESTED = "notification.resolve.requested";
export const OPERATOR_ABANDONED = "operator.abandoned";

/** What a resolution emits: the key's outcome, as the sender reports it. */
type ResolvedFact = "notification.delivered" | "notification.failed";
type Resolved = TypedDecision<DeliveryState, ResolvedFact>;

export interface ResolveDeps {
  readonly channel: ChannelPort;
  readonly sideEffects: SideEffectStore;
}

export async function decideResolve(
  state: DeliveryState | undefined,
  event: EventOf<typeof RESOLVE_REQUESTED>,
  now: Date,
  deps: ResolveDeps,
): Promise<Resolved> {
  const request = event.payload;
  const key = request.idempotency_key;
  const fact = state?.keys[key];
  const record = key.startsWith(`${event.task_id}:`) ? await deps.sideEffects.get(key) : undefined;
  if (record?.state !== "unknown") {
    const repeated = fact?.resolution === request.resolution && record !== undefined;
    return repeated ? {} : { discarded: "invalidated_by_state_change" };
  }
  const result = new Resolution(deliveryOf(state, event), event.task_id, request, fact?.send, now);
  const write = { ledger: deps.sideEffects, key, now, recorded: DELIVERY_ID };
  switch (request.resolution) {
    case "delivered": {
      const deliveryId = `operator:${request.requested_by}`;
      await closeByPerson(write, { applied: true, output: deliveryId });
      return result.delivered(deliveryId, "operator");
    }
    case "abandon": {
      const message = `abandoned by ${request.requested_by}${request.reason ? `: ${request.reason}` : ""}`;
      await closeByPerson(write, { applied: false, error: { code: OPERATOR_ABANDONED, message } });
      return result.failed("failed", OPERATOR_ABANDONED, message);
    }
    case "resend":
      return resend(result, fact?.send, deps, now);
  }
}

/** Send again under the same key, as a person asked: what it gives is recorded and emitted. */
async function resend(
  result: Resolution,
  send: EscalatedSend | undefined,
  deps: ResolveDeps,
  now: Date,
): Promise<Resolved> {
  const key = result.key;
  if (send === undefined) return { discarded: "invalidated_by_state_change" };
  const request = {
    key,
    recipient: send.customer_id,
    conversationId: send.conversation_id,
    text: send.text,
  };
  const outcome = await resendByPerson({
    ...channelSend(deps.channel, request),
    ledger: deps.sideEffects,
    key,
    taskId: result.taskId,
    kind: REPLY_KIND,
    now,
    unknownCode: OUTCOME_UNKNOWN,
  });
  if (outcome.kind === "succeeded")
    return result.delivered(outcome.output, confirmedBy(outcome.by));
  const { code, message } = outcome.error;
  return result.failed(outcome.kind === "unknown" ? "unknown" : "failed", code, message);
}

/** The fact a resolution emits and the state that records it for the key. */
class Resolution {
  readonly key: string;
  constructor(
    private readonly state: DeliveryState,
    readonly taskId: string,
    private readonly request: SendResolveRequested,
    private readonly send: EscalatedSend | undefined,
    private readonly now: Date,
  ) {
    this.key = request.idempotency_key;
  }

  delivered(deliveryId: string, by: Delivered["confirmed_by"]): Resolved {
    const payload: Delivered = { ...this.base(), delivery_id: deliveryId, confirmed_by: by };
    return this.record(
      { outcome: "delivered", delivery_id: deliveryId },
      { type: "notification.delivered", payload },
    );
  }

  failed(outcome: DeliveryFailed["outcome"], code: string, message: string) {
    const payload: DeliveryFailed = { ...this.base(), code, message, outcome };
    const kind = outcome === "failed" ? "failed" : "escalated";
    const send = outcome === "unknown" && this.send ? { send: this.send } : {};
    return this.record({ outcome: kind, code, ...send }, { type: "notification.failed", payload });
  }

  private record(
    fact: Omit<DeliveryFact, "at" | "resolution" | "resolved_by">,
    reported: EmitOf<ResolvedFact>,
  ): Resolved {
    const resolved: DeliveryFact = {
      ...fact,
      at: this.now.toISOString(),
      resolution: this.request.resolution,
      resolved_by: this.request.requested_by,
    };
    const keys = { ...this.state.keys, [this.key]: resolved };
    const conversationId = this.request.conversation_id;
    const emit = { ...reported, orderKey: conversationId, conversationId };
    return { state: { ...this.state, keys }, emit: [emit] };
  }

  private base() {
    return {
      conversation_id: this.request.conversation_id,
      channel: this.send?.channel ?? "chat",
      idempotency_key: this.key,
    };
  }
}
