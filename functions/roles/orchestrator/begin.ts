import { startRun } from "../../core/dag/engine";
import { applyTransition } from "./apply";
import type { StartDefinition } from "./catalog";
import type { OrchestratorDecision, RunContext } from "./context";
import type { OrchestratorState } from "./state";

/**
 * A new run of a found definition, by an operator's start or a parent's child node: its first
 * transition, its origin (the starting event's correlation, task and tenant) and the scope its
 * definition was found in; `extra` is what a child run keeps besides (its parent, its plan).
 */
export async function beginRun(
  context: RunContext,
  found: StartDefinition,
  start: { readonly runId: string; readonly workflow: string; readonly input: unknown },
  extra: Partial<OrchestratorState> = {},
): Promise<OrchestratorDecision> {
  const { event, capacityFor } = context;
  const def = found.definition;
  const transition = startRun(def, start.runId, start.input, await capacityFor(def));
  const begun: OrchestratorState = {
    workflow: start.workflow,
    run: transition.run,
    held: [],
    timeline: [],
    leases: {},
    origin: { correlation_id: event.correlation_id, task_id: event.task_id },
    ...(event.tenant_id === undefined ? {} : { tenant_id: event.tenant_id }),
    ...(found.scope === undefined ? {} : { definition_scope: found.scope }),
    ...extra,
  };
  return applyTransition(context, begun, transition);
}
