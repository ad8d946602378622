import {
  type AnyIntegration,
  type AnyIntegrationUse,
  type IntegrationUses,
  type PortOverrides,
  portsOf,
  useOf,
} from "../../../functions/core/integration";
import { InMemoryModelControls } from "../../../functions/core/model-guard";
import type { EventStore } from "../../../functions/core/ports";
import type { RolePorts } from "../../../functions/core/role-module";

/**
 * The in-memory twins of integrations (each integration's `memory()`: the scripted local model,
 * NOT a model, with the scripts of the roles that use it; the sample orders; a channel that only records what it is sent; ...), one per
 * integration name, shared by every role built with the same twins, as one outside system serves
 * every group of a stack. `overrides` (by integration name) win: a faulty channel, a stalling
 * model.
 */
export class IntegrationTwins {
  private readonly twins = new Map<string, unknown>();
  /** The stops and the model spend every role built with these twins shares (one stack's). */
  readonly controls = new InMemoryModelControls();

  constructor(private readonly overrides: PortOverrides = {}) {}

  /**
   * The twin of an integration, or of a role's use of it: the override of its name, else its own,
   * made on first use, as the use sees it (`twinFor`: the model's learns the role's scripts).
   */
  of(entry: AnyIntegration | AnyIntegrationUse): unknown {
    const { integration, options } = useOf(entry);
    const { name } = integration;
    if (name in this.overrides) return this.overrides[name];
    if (!this.twins.has(name)) this.twins.set(name, integration.memory());
    const twin = this.twins.get(name);
    return integration.twinFor ? integration.twinFor(twin, options) : twin;
  }
}

/**
 * The ports of a module that uses `uses`, in memory: the given store and each integration's twin
 * (from `twins`). What the simulation and `testRole` build roles with.
 */
export function memoryRolePorts(
  store: EventStore,
  uses: IntegrationUses | undefined,
  twins: IntegrationTwins = new IntegrationTwins(),
): RolePorts {
  return portsOf({ store, controls: twins.controls }, uses, (use) => twins.of(use));
}
