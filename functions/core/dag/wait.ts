import type { WorkflowDefinition } from "./definition";
import { settled, whenRunning } from "./delivery";
import { checkRun, Draft } from "./draft";
import { graphOf, kindOf } from "./graph";
import { releasePass } from "./release-pass";
import type { Capacity, DagRun, Transition } from "./run";
import { completeNode, failNode, finish, propagate } from "./settle";

/**
 * Wait nodes. Released, a wait node goes RUNNING and the engine says what it waits for with a
 * `wait.start` command: a timer (`until`, or `after_seconds` from when the command is applied),
 * or a signal `signal` with that time as its deadline. The orchestrator keeps the time as the
 * node's due time and reports it with `onWaitTimer`; a signal sent to the run comes in with
 * `onSignal`. A timer wait ends COMPLETED with `{ released_by: "timer" }`; a signal wait ends
 * COMPLETED with `{ released_by: "signal", signal, payload }` when its signal comes first, and
 * fails with `dag.wait_deadline` (DEGRADED under degrade "empty") when its deadline comes first.
 * A signal counts for the wait nodes RUNNING when it arrives (none: `signal.unmatched`, and
 * nothing changes); a report for an assignment that no longer waits changes nothing.
 */

/** The time of wait node `nodeId`'s assignment in `generation` came: timer done, or deadline. */
export function onWaitTimer(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  capacity: Capacity = {},
): Transition {
  const report = { nodeId, generation, outcome: "completed", kind: "wait" } as const;
  return whenRunning(run, def, report, (draft, graph) => {
    const signal = graph.nodes.get(nodeId)?.wait?.signal;
    if (signal === undefined) completeNode(draft, nodeId, { released_by: "timer" }, generation);
    else
      failNode(draft, nodeId, {
        code: "dag.wait_deadline",
        message: `node ${nodeId} waited for signal ${signal} until its deadline`,
        error_class: "business",
      });
    return settled(draft, nodeId, capacity);
  });
}

/** Signal `key` (with `payload`) releases every wait node RUNNING for it. */
export function onSignal(
  run: DagRun,
  def: WorkflowDefinition,
  key: string,
  payload: unknown,
  capacity: Capacity = {},
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const draft = new Draft(graph, run);
  const waiting = graph.ids.filter((id) => {
    const node = graph.nodes.get(id);
    return (
      node !== undefined &&
      kindOf(node) === "wait" &&
      node.wait?.signal === key &&
      run.nodes[id]?.state === "RUNNING"
    );
  });
  if (run.status !== "RUNNING" || waiting.length === 0)
    return { run, commands: [], events: [{ type: "signal.unmatched", signal: key }], held: [] };
  for (const id of waiting) {
    const generation = draft.node(id).assigned_generation ?? run.generation;
    completeNode(draft, id, { released_by: "signal", signal: key, payload }, generation);
  }
  for (const id of waiting) propagate(draft, id);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}
