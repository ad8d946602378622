import type { ModelControls } from "./model-guard";
import type { EventStore } from "./ports";

/**
 * An integration: an outside system a role calls while it decides (a model, an orders service, a
 * payment provider, a reply channel, a queue-depth reader, anything a team adds). One folder owns
 * everything about it:
 *
 * - `index.ts`: this declaration — its port type, whether calling it reads or writes, and its
 *   in-memory twin (same error contract), which tests, the simulation and the role kit use;
 * - `aws.ts`: its AWS adapter, built from the function's environment (an IntegrationAdapter,
 *   functions/handlers/integration-adapter.ts), which the role's Lambda entry passes;
 * - `infra.ts`: what the stack provisions or references for it, and the environment and grants
 *   of each consumer group that uses it (an IntegrationInfra, lib/infra/integration-infra.ts).
 *
 * The three are apart so that a role (which imports the declaration) carries no AWS code, a
 * function's bundle carries only the adapters of its role's integrations, and no bundle carries
 * the CDK. The hub ships the model, the side-effect ledger, the content store and queue depth
 * (functions/integrations); an application ships its own beside its roles.
 */
export interface Integration<Port, Options = undefined> {
  /**
   * Unique among a stack's integrations, camelCase: how its adapter, its infrastructure and a
   * test's stand-in are matched to it.
   */
  readonly name: string;
  /** Whether calling it only reads the outside world or changes it. */
  readonly access: "read" | "write";
  /**
   * What a role does with it while deciding, as the operator's tools say it ("pays refunds",
   * "calls a model").
   */
  readonly does: string;
  /**
   * A role that calls it is still a fold of its streams (rebuild and check may run it): true only
   * for a read whose answers the role keeps in what it records (Role.foldWith). A write, or a read
   * whose answer changes from call to call (a model, a queue's depth), is not. @default false
   */
  readonly folds?: boolean;
  /** The options a role gets when it names the integration without `use`. */
  readonly defaults: Options;
  /**
   * Its in-memory twin: the same port with the same error contract, over data of its own (what
   * the role kit, the simulation and tests build roles with). One twin serves every role of a
   * kit, as one outside system serves every group of a stack.
   */
  memory(): Port;
  /**
   * What a role gets of the shared twin, given the options of its use: the model's twin learns
   * the role's local scripts (functions/integrations/model). A test's stand-in is given as it is.
   * @default the shared twin as it is
   */
  twinFor?(twin: Port, options: Options): Port;
  /** What an operator should know (where its data lives, what to do when it fails). */
  readonly notes?: string;
  /**
   * What each of its ports passes through, whoever gives it (its adapter, its twin, a test's or
   * the local runtime's stand-in), given the hub's controls: the model's is bounded by the
   * budgets and stopped by the operator's stops (./model-guard.ts). @default the port as given
   */
  guard?(port: Port, controls: ModelControls): Port;
}

/** How one role uses an integration: which one, with which options. */
export interface IntegrationUse<Port, Options = unknown> {
  readonly integration: Integration<Port, Options>;
  readonly options: Options;
}

// biome-ignore lint/suspicious/noExplicitAny: a use of any port with any options
export type AnyIntegration = Integration<any, any>;
// biome-ignore lint/suspicious/noExplicitAny: a use of any port with any options
export type AnyIntegrationUse = IntegrationUse<any, any>;

/** What a role module calls, by the name its build reads the port under. */
export type IntegrationUses = Readonly<Record<string, AnyIntegration | AnyIntegrationUse>>;

/** The port one use gives. */
export type PortOf<U> =
  U extends Integration<infer Port, infer _Options>
    ? Port
    : U extends IntegrationUse<infer Port, infer _Options>
      ? Port
      : never;

/**
 * What a role is built with: `store` (the group's tables, for reads of other states and streams)
 * and one port per integration its module uses, under the name it uses it by.
 */
export type RolePorts<Uses extends IntegrationUses = IntegrationUses> = {
  readonly store: EventStore;
} & { readonly [K in keyof Uses]: PortOf<Uses[K]> };

/**
 * A declared integration, its types checked. Each declaration (and each adapter) is annotated
 * with esbuild's pure marker (`@__PURE__` in a block comment before the call) so that a bundle
 * that imports the kit drops the integrations its role does not use, and their code.
 */
export function defineIntegration<Port, Options = undefined>(
  integration: Integration<Port, Options>,
): Integration<Port, Options> {
  if (!/^[a-z][A-Za-z0-9]*$/.test(integration.name))
    throw new Error(
      `integration name ${JSON.stringify(integration.name)} must be camelCase (letters and digits, starting with a lowercase letter)`,
    );
  return integration;
}

/** A role's use of an integration with options other than its defaults. */
export function use<Port, Options>(
  integration: Integration<Port, Options>,
  options: Options,
): IntegrationUse<Port, Options> {
  return { integration, options };
}

/** A use, whether written as the integration itself or with `use`. */
export function useOf(entry: AnyIntegration | AnyIntegrationUse): AnyIntegrationUse {
  return "integration" in entry ? entry : { integration: entry, options: entry.defaults };
}

/** Every use of a module's `uses`, by the port name. */
export function usesOf(uses: IntegrationUses | undefined): [string, AnyIntegrationUse][] {
  return Object.entries(uses ?? {}).map(([port, entry]) => [port, useOf(entry)]);
}

/**
 * Stand-ins a test or the local runtime gives instead of an integration's own port, by
 * integration name (a faulty channel, a scripted model).
 */
export type PortOverrides = Readonly<Record<string, unknown>>;

/** What the hub gives every role: its tables (`store`) and the budgets' and stops' controls. */
export interface HubPorts {
  readonly store: EventStore;
  readonly controls: ModelControls;
}

/**
 * The ports of `uses`, each built by `build` unless `overrides` has one for its integration, and
 * passed through its integration's `guard`. `store` is given.
 */
export function portsOf(
  hub: HubPorts,
  uses: IntegrationUses | undefined,
  build: (use: AnyIntegrationUse) => unknown,
  overrides: PortOverrides = {},
): RolePorts {
  const ports: Record<string, unknown> = { store: hub.store };
  for (const [port, entry] of usesOf(uses)) {
    const given = overrides[entry.integration.name] ?? build(entry);
    const { guard } = entry.integration;
    ports[port] = guard ? guard(given, hub.controls) : given;
  }
  return ports as RolePorts;
}
