import type {
  WorkflowChildCancelRequested,
  WorkflowChildEnded,
  WorkflowChildStartRequested,
} from "../../../schemas/events/workflow-child";
import { childRunId } from "../../core/dag/assignment";
import { MAX_PLAN_BYTES } from "../../core/dag/plan";
import type { DagCommand, DagEvent } from "../../core/dag/run";
import { isRecord } from "../../core/dag/values";
import type { EmitOf } from "../../core/define-role";
import type { OrchestratorState } from "./state";

/**
 * What the DAG's child commands and a child run's end become on the bus (./children has the
 * handlers of those messages): `workflow.child.start.requested` and
 * `workflow.child.cancel.requested` on the parent's stream, ordered by the child's run id, and
 * `workflow.child.ended` on the child's, ordered by the parent's.
 */

/** What the orchestrator emits about child runs. */
export type ChildEmit =
  | "workflow.child.start.requested"
  | "workflow.child.cancel.requested"
  | "workflow.child.ended"
  | "workflow.child.approval.requested"
  | "workflow.rejected";

export const CHILD_EMITS: readonly ChildEmit[] = [
  "workflow.child.start.requested",
  "workflow.child.cancel.requested",
  "workflow.child.ended",
  "workflow.child.approval.requested",
  "workflow.rejected",
];

type ChildCommand = Extract<DagCommand, { type: "child.start" | "child.cancel" }>;

export const isChildCommand = (command: DagCommand): command is ChildCommand =>
  command.type === "child.start" || command.type === "child.cancel";

/**
 * The message a DAG command about a child run becomes (the parent is `state`'s run); a start with
 * the person's approval of its plan when one was given (./plan-approval).
 */
export function childCommand(
  state: OrchestratorState,
  command: ChildCommand,
  approval?: WorkflowChildStartRequested["approval"],
): EmitOf<ChildEmit> {
  const child = command.child_run_id;
  if (command.type === "child.cancel") {
    const payload: WorkflowChildCancelRequested = {
      run_id: child,
      parent_run_id: command.run_id,
      reason: command.reason,
    };
    return { type: "workflow.child.cancel.requested", payload, orderKey: child };
  }
  const ref = command.workflow;
  const payload: WorkflowChildStartRequested = {
    run_id: child,
    parent_run_id: command.run_id,
    parent_node_id: command.node_id,
    parent_generation: command.generation,
    ...("plan" in ref
      ? planFields(ref.plan)
      : {
          workflow_name: ref.name,
          ...(ref.version === undefined ? {} : { workflow_version: ref.version }),
        }),
    request: { ...recordOf(state.run.input), ...recordOf(command.input) },
    ...(approval === undefined ? {} : { approval }),
  };
  return { type: "workflow.child.start.requested", payload, orderKey: child };
}

/** A plan as sent to its child run: itself, or only its size when too large to send. */
function planFields(plan: unknown): Pick<WorkflowChildStartRequested, "plan" | "plan_bytes"> {
  if (plan === undefined) return {};
  const bytes = Buffer.byteLength(JSON.stringify(plan));
  return bytes > MAX_PLAN_BYTES ? { plan_bytes: bytes } : { plan };
}

const recordOf = (value: unknown): Record<string, unknown> =>
  isRecord(value) && !Array.isArray(value) ? value : {};

/**
 * `workflow.child.ended` for the parent of a run that ended with `step` (none for a run without a
 * parent, or a step that does not end the run).
 */
export function endToParent(state: OrchestratorState, step: DagEvent): EmitOf<ChildEmit>[] {
  const { parent } = state;
  if (!parent || !("result" in step) || step.result.status === "RUNNING") return [];
  const payload: WorkflowChildEnded = {
    run_id: parent.run_id,
    node_id: parent.node_id,
    generation: parent.generation,
    child_run_id: state.run.run_id,
    status: step.result.status,
    outputs: { ...step.result.outputs },
  };
  return [{ type: "workflow.child.ended", payload, orderKey: parent.run_id }];
}

/** What a child run's end and its refusal carry about its parent. */
export function parentFields(state: OrchestratorState): Record<string, string> {
  const { parent } = state;
  return parent ? { parent_run_id: parent.run_id, parent_node_id: parent.node_id } : {};
}

/**
 * The child runs a run's child nodes started, as its timeline tells (its last TIMELINE_LIMIT
 * steps): for each such node, the run of its current assignment (a child run's id is a function
 * of the run, the node and the node's attempt).
 */
export function childRunsOf({ run, timeline }: OrchestratorState): ChildRunRef[] {
  const nodes = new Set(
    timeline.filter((t) => t.event === "child.started").flatMap((t) => t.node_id ?? []),
  );
  return [...nodes].map((nodeId) => ({
    nodeId,
    runId: childRunId(run.run_id, nodeId, run.nodes[nodeId]?.attempt ?? 1),
  }));
}

/** A child node and the child run of its current assignment. */
export interface ChildRunRef {
  readonly nodeId: string;
  readonly runId: string;
}
