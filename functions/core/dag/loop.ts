import { conditionHolds } from "./definition";
import type { Draft } from "./draft";
import { type LoopRun, TERMINAL } from "./run";
import { stopNode } from "./stop";
import type { LoopOf } from "./validate";

/**
 * Bounded loops: a loop edge `{ from: exit, to: head, loop: { until, maxRounds, onMax } }` makes
 * the nodes between head and exit a body that runs again while `until` does not hold on the
 * exit's output. When the exit ends COMPLETED (or DEGRADED) the loop either ends (`until` holds,
 * or the last round ran) and the exit's end flows downstream as any node's, or it runs another
 * round: the generation goes up (deliveries of the round before become stale), the body's nodes
 * go back to PENDING with their counters recounted, and what they produced is kept as the
 * loop's `previous`, which every assignment in the body gets in the next round. The nodes below
 * the exit wait for the loop's end. An exit that fails, is cancelled or is skipped ends the
 * loop's rounds there.
 */

/** What the end of node `exitId` means for its loop. */
export type LoopStep =
  /** Not a loop's last node, or the loop ended: the node's end flows downstream. */
  | "done"
  /** Another round started: nothing flows downstream; the body's nodes are to be decided. */
  | "round"
  /** The last round ended without `until` under `onMax: "fail"`: fail the exit, then flow. */
  | "fail";

export function loopStep(draft: Draft, exitId: string): LoopStep {
  const loop = draft.graph.loops.get(exitId);
  if (!loop) return "done";
  const exit = draft.node(exitId);
  if (exit.state !== "COMPLETED" && exit.state !== "DEGRADED") return "done";
  const record = draft.run.loops?.[exitId] ?? { round: 1 };
  if (record.ended) return "done";
  if (conditionHolds(loop.spec.until, exit.output ?? {})) {
    endLoop(draft, loop, record.round, "condition");
    return "done";
  }
  if (record.round >= loop.spec.maxRounds) {
    endLoop(draft, loop, record.round, "max_rounds");
    return loop.spec.onMax === "fail" ? "fail" : "done";
  }
  nextRound(draft, loop, record.round + 1);
  return "round";
}

function setLoop(draft: Draft, exit: string, record: LoopRun): void {
  draft.run = { ...draft.run, loops: { ...draft.run.loops, [exit]: record } };
}

function endLoop(draft: Draft, loop: LoopOf, rounds: number, reason: "condition" | "max_rounds") {
  setLoop(draft, loop.exit, { round: rounds, ended: reason });
  draft.events.push({ type: "loop.ended", exit: loop.exit, rounds, reason });
}

/** The body back to PENDING under a new generation, its outputs kept as the loop's `previous`. */
function nextRound(draft: Draft, loop: LoopOf, round: number): void {
  const previous: Record<string, unknown> = {};
  for (const id of loop.body) {
    const node = draft.node(id);
    if (node.state === "COMPLETED" || node.state === "DEGRADED") previous[id] = node.output ?? {};
  }
  const generation = draft.run.generation + 1;
  draft.run = { ...draft.run, generation };
  setLoop(draft, loop.exit, { round, previous });
  // A body node may still run (a branch a quorum join left to finish): its work is the last
  // round's, so it is told to stop, as a re-run tells a node it starts again.
  for (const id of loop.body) {
    const node = stopNode(draft, id, "rerun");
    draft.put(id, { state: "PENDING", remaining_upstreams: 0, attempt: node.attempt });
  }
  for (const id of loop.body) {
    const open = (draft.graph.up.get(id) ?? []).filter(
      (edge) => !TERMINAL.has(draft.node(edge.from).state),
    ).length;
    draft.put(id, { ...draft.node(id), remaining_upstreams: open });
  }
  draft.events.push({
    type: "loop.round",
    node_id: loop.head,
    exit: loop.exit,
    round,
    generation,
  });
}
