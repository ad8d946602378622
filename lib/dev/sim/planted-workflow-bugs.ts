import type { EmitSpec } from "../../../functions/core/emit";
import type { RoleModule } from "../../../functions/core/role-module";
import { orchestratorModule } from "../../../functions/roles/orchestrator/index";
import type { OrchestratorState } from "../../../functions/roles/orchestrator/state";
import type { Envelope } from "../../../schemas";
import type { WorkflowChildStartRequested } from "../../../schemas/events/workflow-child";
import type { WorkflowSignalRequested } from "../../../schemas/events/workflow-wait";

/**
 * Defects planted in the orchestrator's loops and child runs, each of which an invariant of the
 * workflow runs (lib/dev/faults/workflow-invariants.ts) must catch:
 * - `loop-round-not-advanced`: a loop's round counter stays where it was when the next round
 *   starts, so the same round runs again and again and the loop never reaches its maximum: it
 *   runs until its condition holds ("loop within its rounds");
 * - `child-id-not-idempotent`: the parent sends its child's start twice, as a sender that retries
 *   may, but the second under a run id of its own instead of the one of the node's assignment, so
 *   it starts a second child run ("child started once"; the same start sent twice under the
 *   assignment's id finds its child and changes nothing);
 * - `late-signal-accepted`: a signal that comes after a wait's deadline failed the wait releases
 *   it all the same ("signal released what waited", "wait released once").
 */
export type PlantedWorkflowBug =
  | "loop-round-not-advanced"
  | "child-id-not-idempotent"
  | "late-signal-accepted";

export const PLANTED_WORKFLOW_BUGS: readonly PlantedWorkflowBug[] = [
  "loop-round-not-advanced",
  "child-id-not-idempotent",
  "late-signal-accepted",
];

const PLANTED: Record<PlantedWorkflowBug, (module: RoleModule<unknown>) => RoleModule<unknown>> = {
  "loop-round-not-advanced": (module) => changingDecisions(module, roundsNotAdvanced),
  "child-id-not-idempotent": (module) => changingDecisions(module, (_, next) => next, startedAgain),
  "late-signal-accepted": (module) => changingDecisions(module, lateSignalAccepted),
};

/** The role modules, with the orchestrator's defect planted when `bug` is one of its own. */
export function withWorkflowBug(
  bug: string | undefined,
  modules: readonly RoleModule<unknown>[],
): readonly RoleModule<unknown>[] {
  const planted =
    bug !== undefined && Object.hasOwn(PLANTED, bug)
      ? PLANTED[bug as PlantedWorkflowBug]
      : undefined;
  if (!planted) return modules;
  return modules.map((m) => (m === orchestratorModule ? planted(m) : m));
}

/** The module with each decision of its role passed through `change`. */
function changingDecisions(
  module: RoleModule<unknown>,
  change: (
    before: OrchestratorState | undefined,
    next: OrchestratorState,
    event: Envelope,
  ) => OrchestratorState,
  changeEmits: (emit: readonly EmitSpec[]) => readonly EmitSpec[] = (emit) => emit,
): RoleModule<unknown> {
  return {
    ...module,
    build(ports, settings) {
      const role = module.build(ports, settings);
      return {
        ...role,
        decide: async (state, event, context) => {
          const decision = await role.decide(state, event, context);
          const next = decision.state as OrchestratorState | undefined;
          return {
            ...decision,
            ...(next ? { state: change(state as OrchestratorState | undefined, next, event) } : {}),
            ...(decision.emit ? { emit: changeEmits(decision.emit) } : {}),
          };
        },
      };
    },
  };
}

/** Every loop that started another round keeps the round it had. */
function roundsNotAdvanced(
  before: OrchestratorState | undefined,
  next: OrchestratorState,
): OrchestratorState {
  const loops = next.run.loops;
  if (!loops) return next;
  const kept = Object.fromEntries(
    Object.entries(loops).map(([exit, record]) => {
      const round = before?.run.loops?.[exit]?.round ?? 1;
      return [exit, record.ended || record.round <= round ? record : { ...record, round }];
    }),
  );
  return { ...next, run: { ...next.run, loops: kept } };
}

/** Every child start sent twice, the second time under a run id of its own. */
function startedAgain(emit: readonly EmitSpec[]): readonly EmitSpec[] {
  return emit.flatMap((spec) => {
    if (spec.type !== "workflow.child.start.requested") return [spec];
    const start = spec.payload as WorkflowChildStartRequested;
    const again = `${start.run_id}-again`;
    return [spec, { ...spec, payload: { ...start, run_id: again }, orderKey: again }];
  });
}

/** A signal completes every wait of the run its deadline failed, as if it had come in time. */
function lateSignalAccepted(
  _before: OrchestratorState | undefined,
  next: OrchestratorState,
  event: Envelope,
): OrchestratorState {
  if (event.event_type !== "workflow.signal.requested") return next;
  const { signal, payload } = event.payload as WorkflowSignalRequested;
  const nodes = { ...next.run.nodes };
  for (const [id, node] of Object.entries(nodes))
    if (node.error?.code === "dag.wait_deadline") {
      const { error: _forgotten, ...rest } = node;
      nodes[id] = {
        ...rest,
        state: "COMPLETED",
        output: { released_by: "signal", signal, payload: payload ?? {} },
      };
    }
  return { ...next, run: { ...next.run, nodes } };
}
