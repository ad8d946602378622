import { ulid } from "ulid";
import { expect } from "vitest";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import type { Vault } from "../../functions/core/personal-data/vault";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import type { ManualClock } from "../../functions/core/runtime";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  conversationContextReader,
  conversationReader,
  conversationRole,
} from "../../functions/roles/customer-support/conversation/conversation";
import {
  type ConversationView,
  conversationProjection,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { ordersFrom } from "../../functions/roles/customer-support/integrations/orders/memory";
import type { OrdersPort } from "../../functions/roles/customer-support/integrations/orders/port";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import { LocalChannel } from "../../functions/roles/customer-support/integrations/reply-channel/memory";
import { orderLookupRole } from "../../functions/roles/customer-support/order-lookup/order-lookup";
import { replyGenerationRole } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import { routerRole } from "../../functions/roles/customer-support/router/router";
import { senderRole } from "../../functions/roles/customer-support/sender/sender";
import { refundReviewRole } from "../../functions/roles/refund-review/refund-agent";
import { type Envelope, registry } from "../../schemas";
import { referenceLocalModel } from "../support/reference";
import { makeDeps } from "./fixtures";

/**
 * The customer-support roles (the refund agent among them) on in-memory adapters, each with its ports, and a drain that hands
 * events to them as the buses would: what the core support tests run their turns through.
 */

export interface SupportOptions {
  /** Reply generation's model (the harness counts its calls). @default DeterministicLocalModel */
  readonly model?: ModelPort;
  /** What order lookup reads (default: SAMPLE_ORDERS), and the sender re-checks (default: none). */
  readonly orders?: OrdersPort;
  /** How long the conversation's replies stay worth sending. */
  readonly replyTtlSeconds?: number;
  /** The sender's attempts with an unknown outcome before it escalates. */
  readonly maxUnknownAttempts?: number;
  /** Groups the drain never delivers to (their roles are built all the same). */
  readonly without?: readonly string[];
  /** Record a delivery that throws in `log` and go on, instead of failing the drain. */
  readonly logErrors?: boolean;
  /** Seals the store's personal fields (functions/core/personal-data). @default none */
  readonly vault?: (clock: ManualClock) => Vault;
}

/** One delivery the drain made: its outcome, or `error <message>` when it threw. */
export interface DeliveryLog {
  readonly group: string;
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
}

export type SupportHarness = ReturnType<typeof supportHarness>;

export function supportHarness(options: SupportOptions = {}) {
  const { deps, store, clock } = makeDeps(undefined, options.vault);
  const channel = new LocalChannel({ clock });
  const sideEffects = new InMemorySideEffects();
  const model = new CountingModel(options.model ?? referenceLocalModel());
  const content = new InMemoryContentStore();
  const roles = supportRoles(store, { channel, sideEffects, model, content }, options);
  const ordered = Object.values(roles) as Role<unknown>[];
  const emitted: Envelope[] = [];
  const log: DeliveryLog[] = [];
  const without = options.without ?? [];

  /** One delivery; a failure is logged (`logErrors`) or thrown. */
  async function deliver(role: Role<unknown>, event: Envelope) {
    try {
      const result = await consume(event, role, deps);
      const { status, reason } = result;
      log.push({
        group: role.group,
        type: event.event_type,
        status,
        ...(reason ? { reason } : {}),
      });
      return result;
    } catch (error) {
      if (!options.logErrors) throw error;
      const status = `error ${(error as Error).message}`;
      log.push({ group: role.group, type: event.event_type, status });
      return undefined;
    }
  }

  /** Delivers the events to every subscribed role but `skip`'s, then what they emit, breadth first. */
  async function drain(events: readonly Envelope[], skip: readonly string[] = []) {
    const queue = [...events];
    for (let event = queue.shift(); event; event = queue.shift()) {
      for (const role of ordered) {
        if (!role.subscriptions.includes(event.event_type)) continue;
        if (without.includes(role.group) || skip.includes(role.group)) continue;
        for (const step of (await deliver(role, event))?.steps ?? []) {
          emitted.push(...step.emitted);
          queue.push(...step.emitted);
        }
      }
    }
  }

  const state = async <S>(type: string, id: string) =>
    (await store.load({ state: { type, id } })).state?.data as S | undefined;
  const view = (conversationId: string) =>
    state<ConversationView>("conversation_view", conversationId);
  return {
    ...{ deps, store, clock, channel, sideEffects, model, content, ...roles },
    ...{ emitted, log, drain, state, view },
  };
}

/** The support roles in the order the drain hands an event to them. */
function supportRoles(
  store: ReturnType<typeof makeDeps>["store"],
  ports: {
    channel: LocalChannel;
    sideEffects: InMemorySideEffects;
    model: ModelPort;
    content: InMemoryContentStore;
  },
  options: SupportOptions,
) {
  const { channel, sideEffects, model, content } = ports;
  const context = conversationContextReader(store);
  const orders = options.orders ?? ordersFrom(SAMPLE_ORDERS);
  return {
    conversation: conversationRole({ replyTtlSeconds: options.replyTtlSeconds }),
    router: routerRole({ context }),
    orderLookup: orderLookupRole({ orders }),
    refundReview: refundReviewRole({
      conversation: context,
      conversationNow: conversationReader(store),
      model,
      content,
      sideEffects,
      orders,
      payments: new LocalPayments(),
    }),
    replyGeneration: replyGenerationRole({
      model,
      conversation: conversationReader(store),
    }),
    sender: senderRole({
      channel,
      sideEffects,
      conversation: conversationReader(store),
      ...(options.orders === undefined ? {} : { orders: options.orders }),
      ...(options.maxUnknownAttempts === undefined
        ? {}
        : { maxUnknownAttempts: options.maxUnknownAttempts }),
    }),
    projection: conversationProjection,
  };
}

/** Counts the calls a ModelPort receives, and keeps their prompts' text. */
export class CountingModel implements ModelPort {
  readonly name: string;
  calls = 0;
  readonly prompts: string[] = [];
  constructor(private readonly inner: ModelPort) {
    this.name = inner.name;
  }
  converse(request: ModelRequest): Promise<ModelResponse> {
    this.calls++;
    this.prompts.push(request.messages.map((m) => m.text).join("\n"));
    return this.inner.converse(request);
  }
}

export const newConversationId = () => `conv_${ulid()}`;

export const ofType = (events: readonly Envelope[], type: string) =>
  events.filter((e) => e.event_type === type);

/** The one event of `type` in `events` (the test fails when there is not exactly one). */
export function only(events: readonly Envelope[], type: string): Envelope {
  const found = ofType(events, type);
  expect(found, `exactly one ${type}`).toHaveLength(1);
  return found[0] as Envelope;
}

/** An operator's command as the CLI sends it (unsequenced, on `aggregate` at version 0). */
export function operatorCommand(
  type: string,
  aggregate: { type: string; id: string },
  conversationId: string,
  payload: Record<string, unknown> = {},
): Envelope {
  const id = ulid();
  const parsed = registry.parse({
    event_id: id,
    event_type: type,
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: aggregate.id,
    conversation_id: conversationId,
    aggregate: { ...aggregate, version: 0 },
    order_key: conversationId,
    producer: "agentbus-cli",
    payload: { conversation_id: conversationId, requested_by: "ops_anna", ...payload },
  });
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.envelope;
}
