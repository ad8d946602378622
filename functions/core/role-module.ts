import { defineEventType, type EventTypeDefinition } from "../../schemas";
import type * as z from "../../schemas/zod";
import type { AttentionRule } from "./attention";
import type { IntegrationUses, RolePorts } from "./integration";
import { parseEnv } from "./parse-env";
import type { Role, RoleDescriptor } from "./role";

export type { RolePorts };

/**
 * A role module: everything about one consumer group in one value — what the role is (its
 * descriptor), how it is deployed (queue and function settings, what it needs, what needs a
 * person), the integrations it calls (./integration.ts), its settings from the function's
 * environment, and how to build its decision from the ports it is given. The module list (functions/roles/modules.ts) is what the topology, the stack's
 * grants and alarms, the Lambda entries, the simulation and the local runtime all build from.
 */

/**
 * What a group needs from the hub besides its queues, its function, the tables and its
 * integrations (`RoleModule.uses`); the stack wires each need it finds declared.
 */
export interface GroupNeeds {
  /**
   * Its consumer extends a message's visibility during a long model call (`HEARTBEAT_SECONDS`,
   * `VISIBILITY_TIMEOUT_SECONDS`); `"events"`: it also publishes its role's heartbeats on the
   * events bus (`EVENTS_BUS_NAME`, PutEvents on that bus).
   */
  readonly heartbeat?: "visibility" | "events";
  /** A DAG agent: the orchestrator reads its queue's depth (backpressure). */
  readonly dagAgent?: boolean;
  /** It orchestrates DAG runs: the lease sweeper serves its runs. */
  readonly orchestrates?: boolean;
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

export interface RoleModule<Settings = unknown, Uses extends IntegrationUses = IntegrationUses> {
  /** The role outside its handler: group, subscriptions, where it keeps its states. */
  readonly descriptor: RoleDescriptor;
  /**
   * The Lambda entry file: a file that exports `moduleEntry(module, adapters)`
   * (functions/handlers/module-entry.ts): `handlerBeside(import.meta.url)`, the `handler.ts` (or
   * `.js`) in the module's folder, as every module here names it. A path relative to the package
   * root or an absolute path works too. The stack checks the file exists when it is synthesized.
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
  /**
   * The integrations its decision calls, by the name its build reads each port under:
   * `{ orders: use(orders, { cancel: true }), model }`. The Lambda entry builds each from the
   * function's environment, the stack wires what each needs, tests give in-memory twins.
   * @default none
   */
  readonly uses?: Uses;
  /** The role's decision, on these ports and settings. */
  build(ports: RolePorts<Uses>, settings: Settings): Role<unknown>;
  /**
   * The event types the role owns (`defineEventType`'s definitions): `defineModule` registers
   * them, so whatever imports the module (its consumer, the topology, the test kit) knows them.
   * @default none
   */
  readonly events?: readonly EventTypeDefinition[];
}

/**
 * The handler file beside the calling module, as its `entry`: `handlerBeside(import.meta.url)` in
 * `<folder>/module.ts` is the URL of `<folder>/handler.ts` (`handler.js` beside a `.js` module, so
 * a compiled application finds its compiled handler). Only a URL: the stack checks that the file
 * exists when it is synthesized (in a Lambda bundle, where this module runs too, it need not).
 */
export function handlerBeside(moduleUrl: string): string {
  const url = new URL(moduleUrl);
  url.search = "";
  url.hash = "";
  const extension = /\.m?[jt]s$/.exec(url.pathname)?.[0] ?? ".js";
  return new URL(`handler${extension}`, url).href;
}

/**
 * A module with its types checked (settings schema, integrations and build agree), and the event
 * types it owns registered (`events`).
 */
export function defineModule<
  Settings = undefined,
  Uses extends IntegrationUses = Record<never, never>,
>(module: RoleModule<Settings, Uses>): RoleModule<Settings, Uses> {
  for (const definition of module.events ?? []) defineEventType(definition);
  return module;
}

/**
 * A module's settings from an environment (the function's, or one a test or the simulation
 * gives); the error names the group and every bad variable. A module without settings has none.
 */
export function moduleSettings<Settings, Uses extends IntegrationUses>(
  module: RoleModule<Settings, Uses>,
  env: Readonly<Record<string, string | undefined>>,
): Settings {
  if (!module.settings) return undefined as Settings;
  return parseEnv(module.settings, env, module.descriptor.group);
}

/** A module's role on these ports, its settings read from `env`. */
export function buildRole<Settings, Uses extends IntegrationUses>(
  module: RoleModule<Settings, Uses>,
  ports: RolePorts<Uses>,
  env: Readonly<Record<string, string | undefined>> = {},
): Role<unknown> {
  return module.build(ports, moduleSettings(module, env));
}
