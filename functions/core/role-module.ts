import { defineEventType, type EventTypeDefinition } from "../../schemas";
import { stepCommandDefinitions } from "../../schemas/events/step";
import type * as z from "../../schemas/zod";
import type { AttentionRule } from "./attention";
import type { IntegrationUses, RolePorts } from "./integration";
import { parseEnv } from "./parse-env";
import type { Role, RoleDescriptor } from "./role";
import {
  type StepHandler,
  stateOfWithSteps,
  stepRole,
  stepRoleEmits,
  stepRunOf,
  withSteps,
} from "./step-role";
import { type StepDeclaration, type StepRoleEntry, stepEntryOf, stepTypesOf } from "./steps";

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
  /**
   * It carries out workflow steps: what the orchestrator sends it (set by `defineModule` from the
   * module's `steps`); the orchestrator gets every step role's entry and reads its queue's depth
   * (backpressure).
   */
  readonly steps?: StepRoleEntry;
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
  /**
   * How its events reach it (lib/infra/README.md, "Delivery"): through the bus and a queue per
   * group; `relay`: its stored events sent by the relay straight to its FIFO queue (a FIFO group
   * without `tenantConcurrency`); or `stream`: read from the event store's stream in batches, for a
   * group that emits nothing and receives only stored (sequenced) events, such as a projection.
   * @default "dispatch-function"
   */
  readonly delivery?: "dispatch-function" | "pipe" | "subscriber" | "relay" | "stream";
  /**
   * Messages per consumer invocation: 1..10 for FIFO, 1..10000 for standard queues and for
   * stream records. @default 10
   */
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
  /**
   * How long the consumer's event source gathers a batch before it invokes the consumer (whole
   * seconds, 0..300; standard queues and `delivery: "stream"`, not FIFO queues): fewer, fuller
   * invocations, and for a read model on the stream one write per aggregate for what a batch holds
   * of it (functions/core/batch-fold.ts), for up to this much latency per event.
   * @default - none (1 s for a standard queue's batches over 10)
   */
  readonly batchingWindowSeconds?: number;
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
  /**
   * The role carries out workflow steps (functions/core/dag/README.md): any workflow of the stack
   * may name its group as a node's role. With `run`, the kit carries them out (./step-role.ts)
   * beside whatever else the role does; without, the role takes its step commands itself.
   * @default none
   */
  readonly steps?: ModuleSteps<Settings, Uses>;
}

/** A module's steps: their declaration, and the handler that carries them out. */
export interface ModuleSteps<Settings = unknown, Uses extends IntegrationUses = IntegrationUses>
  extends StepDeclaration {
  /** The step's handler on the module's ports and settings: input in, output out. */
  run?(ports: RolePorts<Uses>, settings: Settings): StepHandler;
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
  return module.steps ? withModuleSteps(module, module.steps) : module;
}

/**
 * A module that declares steps: its step commands registered (unless it spells its own), its
 * deployment told so (`needs.steps`, and heartbeats on the events bus), and with `run` its role
 * made to take them too; without `run` its role must take them itself.
 */
function withModuleSteps<Settings, Uses extends IntegrationUses>(
  module: RoleModule<Settings, Uses>,
  steps: ModuleSteps<Settings, Uses>,
  stepsOnly = false,
): RoleModule<Settings, Uses> {
  const { descriptor } = module;
  const group = descriptor.group;
  if (!steps.types)
    for (const definition of stepCommandDefinitions(group, steps.waits))
      defineEventType(definition);
  const types = stepTypesOf(group, steps);
  const needs = {
    ...module.deployment.needs,
    steps: stepEntryOf(group, steps, steps.run !== undefined, module.uses),
    heartbeat: "events" as const,
  };
  const deployment = { ...module.deployment, needs };
  const { run } = steps;
  if (!run) {
    const missing = [types.requested, types.cancel].filter(
      (t) => !descriptor.subscriptions.includes(t),
    );
    if (missing.length > 0)
      throw new Error(
        `role module ${group} declares steps without run, so its role must take ${missing.join(" and ")}; its descriptor does not subscribe to them`,
      );
    return { ...module, deployment };
  }
  const stepTypes = [types.requested, types.cancel, ...(types.confirm ? [types.confirm] : [])];
  const stateOf = stepsOnly ? stepRunOf : stateOfWithSteps(stepTypes, descriptor.stateOf);
  return {
    ...module,
    descriptor: {
      ...descriptor,
      stateOf,
      subscriptions: [...descriptor.subscriptions, ...stepTypes],
      emits: [...(descriptor.emits ?? []), ...stepRoleEmits(types)],
    },
    deployment,
    build: (ports, settings) =>
      withSteps(
        stepsOnly ? undefined : module.build(ports, settings),
        stepRole({ group, steps, handler: run(ports, settings), commandStream: ports.store }),
        stateOf,
      ),
  };
}

/** A role that does nothing but carry out steps, as its author writes it. */
export interface StepModuleDefinition<Settings, Uses extends IntegrationUses>
  extends Pick<RoleModule<Settings, Uses>, "entry" | "settings" | "uses" | "events"> {
  readonly group: string;
  /** @default {} */
  readonly deployment?: Deployment;
  readonly steps: ModuleSteps<Settings, Uses> & Required<Pick<ModuleSteps<Settings, Uses>, "run">>;
}

/**
 * A role module whose role only carries out workflow steps: `steps.run` gets each step's input
 * (parsed by `steps.input`) and returns its output (checked against `steps.output`), and the kit
 * answers for it (./step-role.ts).
 */
export function defineStepModule<
  Settings = undefined,
  Uses extends IntegrationUses = Record<never, never>,
>(definition: StepModuleDefinition<Settings, Uses>): RoleModule<Settings, Uses> {
  const { group, deployment = {}, steps, ...rest } = definition;
  for (const event of definition.events ?? []) defineEventType(event);
  const module: RoleModule<Settings, Uses> = {
    ...rest,
    descriptor: { group, subscriptions: [] },
    deployment,
    steps,
    build: () => {
      throw new Error(`role module ${group} has no role besides its steps`);
    },
  };
  return withModuleSteps(module, steps, true);
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
