import { childStart } from "./assignment";
import type { WorkflowDefinition } from "./definition";
import { settled, whenRunning } from "./delivery";
import { Draft } from "./draft";
import { graphOf } from "./graph";
import type { Capacity, ChildEnd, DagCommand, DagRun, Transition } from "./run";
import { completeNode, failNode } from "./settle";

/**
 * Child nodes. Released, a child node goes RUNNING and the engine asks for its child run with a
 * `child.start` command: the workflow (name, and version when the definition pins one), the
 * child's input (the node's `workflow.input` fields read from earlier outputs, else its taken
 * upstreams' outputs by node id) and `child_run_id`, one per assignment (`<run>~<node>~<attempt>`),
 * so a start sent again names the same child. The child's end comes back with `onChildEnded`:
 * COMPLETED (and PARTIAL under `acceptPartial`) completes the node with `{ status, outputs }`;
 * PARTIAL otherwise, FAILED and CANCELLED fail it with `dag.child_partial`, `dag.child_failed`
 * or `dag.child_cancelled` (DEGRADED under degrade "empty"); a child that was refused before it
 * ran (its workflow unknown, its plan invalid) fails it with the refusal's error. Cancelling the parent, re-running
 * the node or dropping it from a first-wins join sends `child.cancel` for a running child.
 */

/** The child run of node `nodeId`'s assignment in `generation` ended as `end` says. */
export function onChildEnded(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  end: ChildEnd,
  capacity: Capacity = {},
): Transition {
  const outcome = end.status === "COMPLETED" ? "completed" : "failed";
  const report = { nodeId, generation, outcome, kind: "child" } as const;
  return whenRunning(run, def, report, (draft, graph) => {
    const accepted =
      end.status === "COMPLETED" ||
      (end.status === "PARTIAL" && graph.nodes.get(nodeId)?.workflow?.acceptPartial === true);
    const output = { status: end.status, outputs: end.outputs ?? {} };
    if (accepted) completeNode(draft, nodeId, output, generation);
    else
      failNode(
        draft,
        nodeId,
        end.error ?? {
          code: `dag.child_${end.status.toLowerCase()}`,
          message: `the child run of node ${nodeId} ended ${end.status}`,
          error_class: "business",
        },
      );
    return settled(draft, nodeId, capacity);
  });
}

/**
 * The `child.start` command of the current assignment of child node `nodeId` (RUNNING under
 * `generation`), as its release sent it: the same child run, workflow and input, read from the
 * run again (the upstreams a RUNNING node read from have ended, so their outputs stand). Undefined
 * when the node is not a child node RUNNING under that generation.
 */
export function childStartOf(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
): Extract<DagCommand, { type: "child.start" }> | undefined {
  const node = run.nodes[nodeId];
  const workflow = def.nodes.find((n) => n.id === nodeId)?.workflow;
  if (!workflow || node?.state !== "RUNNING" || node.assigned_generation !== generation)
    return undefined;
  return childStart(new Draft(graphOf(def), run), nodeId, workflow, node.attempt, generation);
}
