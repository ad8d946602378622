import type { OrderRecord } from "../../schemas/events/conversation";
import type * as z from "../../schemas/zod";
import type { ContentStore } from "./agent/content";
import type { AttentionRule } from "./attention";
import type { ModelPort } from "./model";
import { parseEnv } from "./parse-env";
import type { PaymentsPort } from "./payments";
import type { EventStore } from "./ports";
import type { Role, RoleDescriptor } from "./role";
import type { ChannelPort, SideEffectStore } from "./side-effects";

/**
 * A role module: everything about one consumer group in one value — what the role is (its
 * descriptor), how it is deployed (queue and function settings, what it needs, what needs a
 * person), its settings from the function's environment, and how to build its decision from the
 * ports it is given. The module list (functions/roles/modules.ts) is what the topology, the stack's
 * grants and alarms, the Lambda entries, the simulation and the local runtime all build from.
 */

/**
 * What a group needs besides its queues, its function and the tables; the stack wires and grants
 * each need it finds declared, and the Lambda entry builds the matching port.
 */
export interface GroupNeeds {
  /**
   * Its consumer extends a message's visibility during a long model call (`HEARTBEAT_SECONDS`,
   * `VISIBILITY_TIMEOUT_SECONDS`); `"events"`: it also publishes its role's heartbeats on the
   * events bus (`EVENTS_BUS_NAME`, PutEvents on that bus).
   */
  readonly heartbeat?: "visibility" | "events";
  /**
   * Its decision calls a language model (port `model`): the stack gives its consumer the model
   * setting and the grant, and, its state not being a fold of its streams, the operator's rebuild
   * and check refuse it.
   */
  readonly model?: true;
  /** A DAG agent: the orchestrator reads its queue's depth (backpressure). */
  readonly dagAgent?: boolean;
  /**
   * It orchestrates DAG runs: it reads the DAG agents' queue depths (port `queueDepth`:
   * `AGENT_QUEUE_URLS`, `QUEUE_DEPTH_THRESHOLD`), and the lease sweeper serves its runs.
   */
  readonly orchestrates?: boolean;
  /**
   * It reads the orders table (port `orders`: `ORDERS_TABLE`, GetItem); `"cancel"`: it also
   * cancels orders (a conditional UpdateItem).
   */
  readonly orders?: boolean | "cancel";
  /**
   * It runs an agent loop over tools (functions/core/agent): ports `content` (its conversation,
   * kept by content hash in the state table) and `sideEffects` (its write tools' idempotency
   * records, `SIDE_EFFECTS_TABLE`).
   */
  readonly tools?: boolean;
  /** It pays refunds (port `payments`: the payment stand-in's table, `PAYMENTS_TABLE`). */
  readonly payments?: boolean;
  /**
   * It sends replies through the reply channel (ports `channel` and `sideEffects`: an SNS FIFO
   * topic, `CHANNEL_*`, Publish; the side-effects table for its idempotency records).
   */
  readonly replyChannel?: boolean;
}

/** How a group is deployed; every setting has the topology's default when left out. */
export interface Deployment {
  /**
   * `fifo`: in order per order key (FIFO queue, buffer and delivery hop). `none`: no order needed
   * (standard queue; the rule targets it directly). @default "fifo"
   */
  readonly ordering?: "fifo" | "none";
  /** Messages per consumer invocation: 1..10 for FIFO, 1..10000 for standard queues. @default 10 */
  readonly batchSize?: number;
  /** Most concurrent consumer invocations (2..1000). @default 2 */
  readonly maxConcurrency?: number;
  /**
   * Most consumer invocations one tenant's events may hold at once (1..maxConcurrency - 1):
   * fairness between tenants (lib/infra/README.md). @default none
   */
  readonly tenantConcurrency?: number;
  /** Receives before a message moves to its dead-letter queue. @default 5 */
  readonly maxReceiveCount?: number;
  /** Consumer function timeout, in seconds. @default 30 */
  readonly functionTimeoutSeconds?: number;
  /** What the stack wires for it besides its queues. */
  readonly needs?: GroupNeeds;
  /**
   * Which of the events it emits a person must act on: rules (./attention.ts `raiseOn`), each
   * naming the signal it raises; the consumer counts them and each signal named becomes an alarm
   * of the group. @default none
   */
  readonly attention?: readonly AttentionRule[];
}

/** Where the orders live (the DynamoDB adapter: functions/adapters/dynamodb/orders.ts). */
export interface OrdersPort {
  /** The order with this id, whoever's it is; undefined when there is none. */
  get(orderId: string): Promise<OrderRecord | undefined>;
  /**
   * Cancel the order for a refund made under `refundKey`, with one conditional write: only when
   * its stored status is one of `from` and no other refund key has claimed it (the same key may
   * claim it again: a retry). The order then records the key (`refund_key`), so at most one
   * refund is ever made of an order and only of a cancelled one. Answers the cancelled order, or
   * why not: its status, `claimed` (by another key) or `missing`. Roles that only read leave it out.
   */
  cancelForRefund?(
    orderId: string,
    refundKey: string,
    from: readonly OrderRecord["status"][],
  ): Promise<
    | { readonly cancelled: true; readonly order: OrderRecord }
    | {
        readonly cancelled: false;
        readonly status: OrderRecord["status"] | "missing" | "claimed";
      }
  >;
}

/** Messages waiting in each agent group's queue, by group name (missing groups count as 0). */
export type QueueDepthSource = (
  groups: readonly string[],
) => Readonly<Record<string, number>> | Promise<Readonly<Record<string, number>>>;

/**
 * What a role is built with. `store` is always there (the group's tables, for reads of other
 * states and streams); the others are there when the module's deployment declares the need.
 */
export interface RolePorts {
  readonly store: EventStore;
  readonly model?: ModelPort;
  readonly orders?: OrdersPort;
  readonly channel?: ChannelPort;
  readonly sideEffects?: SideEffectStore;
  readonly queueDepth?: QueueDepthSource;
  readonly content?: ContentStore;
  readonly payments?: PaymentsPort;
}

export interface RoleModule<Settings = unknown> {
  /** The role outside its handler: group, subscriptions, where it keeps its states. */
  readonly descriptor: RoleDescriptor;
  /**
   * The Lambda entry file, relative to the repository root: a file that exports
   * `moduleEntry(module)` (functions/handlers/module-entry.ts), usually `handler.ts` in the
   * module's folder.
   */
  readonly entry: string;
  readonly deployment: Deployment;
  /**
   * The role's own settings, parsed from the function's environment (the stack sets them; the
   * error names each bad variable). Left out: the role has none.
   */
  readonly settings?: z.ZodMiniType<Settings>;
  /**
   * What the role shows its model, by name (each tool's input as `tool:<name>`, the answers it
   * asks for): `npm run schemas` writes them as JSON Schema to `model-schemas.json` in the entry's
   * folder, which the role reads (./model-schemas.ts). Left out: the role calls no model.
   */
  readonly modelSchemas?: Readonly<Record<string, z.core.$ZodType>>;
  /** The role's decision, on these ports and settings. */
  build(ports: RolePorts, settings: Settings): Role<unknown>;
}

/** A module with its types checked: settings schema and build agree. */
export function defineModule<Settings = undefined>(
  module: RoleModule<Settings>,
): RoleModule<Settings> {
  return module;
}

/** The port a module's build needs, or an error that names the missing need. */
export function requirePort<K extends keyof RolePorts>(
  ports: RolePorts,
  port: K,
  group: string,
): NonNullable<RolePorts[K]> {
  const value = ports[port];
  if (value === undefined || value === null) {
    throw new Error(
      `role ${group} is built without its ${port} port: declare the need in its module's deployment.needs (or pass the port)`,
    );
  }
  return value as NonNullable<RolePorts[K]>;
}

/**
 * A module's settings from an environment (the function's, or one a test or the simulation
 * gives); the error names the group and every bad variable. A module without settings has none.
 */
export function moduleSettings<Settings>(
  module: RoleModule<Settings>,
  env: Readonly<Record<string, string | undefined>>,
): Settings {
  if (!module.settings) return undefined as Settings;
  return parseEnv(module.settings, env, module.descriptor.group);
}

/** A module's role on these ports, its settings read from `env`. */
export function buildRole<Settings>(
  module: RoleModule<Settings>,
  ports: RolePorts,
  env: Readonly<Record<string, string | undefined>> = {},
): Role<unknown> {
  return module.build(ports, moduleSettings(module, env));
}
