import type { WorkflowDefinition } from "../../core/dag/definition";
import { onItemFailed, redeliver } from "../../core/dag/engine";
import type { Capacity, DagRun, NodeError, Transition } from "../../core/dag/run";

/**
 * The items of a map node under the node's one lease (./leases): when the lease runs out, the
 * outcome of every item still RUNNING under the lease's generation is unknown, so each is sent
 * again, or, once the node's redeliveries are spent, each fails (the map's tolerance then decides
 * whether the node goes on). Each is one transition of the engine, applied one after the other.
 */

/** The items of map node `nodeId` RUNNING under `generation`, by index; [] when it has none. */
export function runningItems(run: DagRun, nodeId: string, generation: number): number[] {
  const node = run.nodes[nodeId];
  if (node?.state !== "RUNNING" || node.assigned_generation !== generation) return [];
  return (node.items ?? []).flatMap((item, index) =>
    item.state === "RUNNING" && item.assigned_generation === generation ? [index] : [],
  );
}

/** Send the assignment of each of `items` again (the run does not change). */
export function redeliverItems(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  items: readonly number[],
): Transition {
  return inSequence(
    run,
    items.map((item) => (current) => redeliver(current, def, nodeId, generation, item)),
  );
}

/** Fail each of `items` with `error`. */
export function failItems(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  items: readonly number[],
  error: NodeError,
  capacity: Capacity,
): Transition {
  return inSequence(
    run,
    items.map(
      (item) => (current) => onItemFailed(current, def, nodeId, item, error, generation, capacity),
    ),
  );
}

/** `steps` applied one after the other as one transition: the last run, every command and event. */
function inSequence(run: DagRun, steps: readonly ((run: DagRun) => Transition)[]): Transition {
  let result: Transition = { run, commands: [], events: [], held: [] };
  for (const step of steps) {
    const next = step(result.run);
    result = {
      run: next.run,
      commands: [...result.commands, ...next.commands],
      events: [...result.events, ...next.events],
      held: next.run === result.run ? result.held : next.held,
    };
  }
  return result;
}
