import type { EmitOf } from "../../../functions/core/define-role";
import type { PortOverrides } from "../../../functions/core/integration";
import { InMemoryEventStore } from "../../../functions/core/memory";
import type { InMemoryModelControls } from "../../../functions/core/model-guard";
import { consume } from "../../../functions/core/pipeline";
import type { ConsumerDeps } from "../../../functions/core/ports";
import { appendToStream } from "../../../functions/core/producer";
import type { ConsumeResult, Role } from "../../../functions/core/role";
import { buildRole, type RoleModule } from "../../../functions/core/role-module";
import { ManualClock, ulidSource } from "../../../functions/core/runtime";
import {
  type AggregateRef,
  type Envelope,
  type EventPayloads,
  type EventType,
  registry,
} from "../../../schemas";
import { IntegrationTwins, memoryRolePorts } from "./memory-ports";

/**
 * A role module under test, in memory and in milliseconds: its role built on in-memory ports
 * (./memory-ports) over an in-memory event store, and the same pipeline a deployed consumer runs
 * (gate, gap repair, inbox, one commit). Put events on streams as a producer would (`append`),
 * or make messages from outside any stream (`message`); deliver them in any order, twice, or
 * again as a redelivery; then read the role's state and what it emitted.
 */

export interface TestRoleOptions {
  /**
   * Stand-ins to use instead of the integrations' in-memory twins, by integration name (a faulty
   * `replyChannel`, a scripted `model`).
   */
  readonly integrations?: PortOverrides;
  /** The function's environment, for the module's settings. */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the clock starts. @default "2026-01-01T00:00:00.000Z" */
  readonly now?: string;
}

export interface DeliverOptions {
  /** How many times the queue has handed the message out (a redelivery: 2 and up). @default 1 */
  readonly receiveCount?: number;
  /** The queue's last attempt: a role's `failed` then turns an error into failure facts. */
  readonly lastAttempt?: boolean;
}

/** Where an event goes, who it is for, and what it carries besides its payload. */
export interface MessageFields {
  readonly aggregate: Omit<AggregateRef, "version">;
  readonly taskId: string;
  readonly correlationId?: string;
  readonly orderKey?: string;
  readonly conversationId?: string;
  /** The tenant a message names (`message` only); none: the default tenant. */
  readonly tenantId?: string;
}

export interface RoleUnderTest {
  readonly role: Role<unknown>;
  readonly clock: ManualClock;
  readonly store: InMemoryEventStore;
  /**
   * The operator's stops and the model spend its model port is guarded by
   * (functions/core/model-guard.ts): stop a tenant or a run, lower the budgets, read the spend.
   */
  readonly controls: InMemoryModelControls;
  /** Every event the role emitted, over all deliveries, in order. */
  readonly emitted: Envelope[];
  /** Commit events to a stream as its producer would (the outbox); returns them, to deliver. */
  append<T extends EventType>(
    fields: MessageFields,
    ...emits: readonly EmitOf<T>[]
  ): Promise<Envelope[]>;
  /** A message from outside any stream (a client's), version 0, checked by the registry. */
  message<T extends EventType>(type: T, payload: EventPayloads[T], fields: MessageFields): Envelope;
  /** Deliver one event through the pipeline, as the group's queue would. */
  deliver(event: Envelope, options?: DeliverOptions): Promise<ConsumeResult>;
  /** The role's state of an aggregate (its `stateOf`), or undefined. */
  state<S = unknown>(ref: Omit<AggregateRef, "version">): Promise<S | undefined>;
}

/** A role module under test (see the file's comment). */
export function testRole(module: RoleModule, options: TestRoleOptions = {}): RoleUnderTest {
  const clock = new ManualClock(options.now ?? "2026-01-01T00:00:00.000Z");
  const store = new InMemoryEventStore(clock);
  const deps: ConsumerDeps = { store, registry, clock, ids: ulidSource(clock) };
  const twins = new IntegrationTwins(options.integrations);
  const role = buildRole(module, memoryRolePorts(store, module.uses, twins), options.env);
  const emitted: Envelope[] = [];
  return {
    role,
    clock,
    store,
    controls: twins.controls,
    emitted,
    append: (fields, ...emits) =>
      appendToStream(deps, {
        aggregate: fields.aggregate,
        producer: "test-producer",
        correlationId: fields.correlationId ?? `corr_${deps.ids.next()}`,
        taskId: fields.taskId,
        conversationId: fields.conversationId,
        decide: () => ({ emit: emits.map((e) => ({ orderKey: fields.orderKey, ...e })) }),
      }),
    message: (type, payload, fields) => messageOf(deps, type, payload, fields),
    async deliver(event, deliver = {}) {
      const result = await consume(event, role, deps, {
        receiveCount: deliver.receiveCount ?? 1,
        lastAttempt: deliver.lastAttempt,
      });
      for (const step of result.steps) emitted.push(...step.emitted);
      return result;
    },
    async state<S>(ref: Omit<AggregateRef, "version">) {
      const { state } = await store.load({ state: ref });
      return state?.data as S | undefined;
    },
  };
}

function messageOf(
  deps: ConsumerDeps,
  type: string,
  payload: unknown,
  fields: MessageFields,
): Envelope {
  const definition = registry.find(type);
  if (!definition) throw new Error(`${type} is not a registered event type`);
  const result = registry.parse({
    event_id: deps.ids.next(),
    event_type: type,
    schema_version: definition.schemaVersion,
    occurred_at: deps.clock.now().toISOString(),
    correlation_id: fields.correlationId ?? `corr_${deps.ids.next()}`,
    causation_id: null,
    task_id: fields.taskId,
    ...(fields.conversationId && { conversation_id: fields.conversationId }),
    ...(fields.tenantId && { tenant_id: fields.tenantId }),
    aggregate: { ...fields.aggregate, version: 0 },
    ...(fields.orderKey && { order_key: fields.orderKey }),
    producer: "test-client",
    payload,
  });
  if (!result.ok) throw new Error(`not a valid ${type}: ${result.message}`);
  return result.envelope;
}
