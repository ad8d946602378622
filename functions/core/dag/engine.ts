import { assignment, mapItemsOf } from "./assignment";
import type { WorkflowDefinition } from "./definition";
import { type Report, settled, toNodeError, whenRunning } from "./delivery";
import { checkRun, Draft } from "./draft";
import { DagRequestError } from "./errors";
import { graphOf, requireNode, roleOf } from "./graph";
import { recordItem } from "./map";
import { releasePass } from "./release-pass";
import type { Capacity, DagRun, NodeError, NodeRun, Transition } from "./run";
import { completeNode, failNode, finish } from "./settle";
import { show } from "./values";

/**
 * The DAG executor (seed 001 §3, §6): workflow definitions are data, a DAG run is a pure aggregate.
 *
 * Every transition takes the current run and returns `{ run, commands, events, held }` without
 * touching its input. `commands` are what the orchestrator turns into command envelopes
 * (`node.assign`, `node.cancel`); `events` record what happened and belong in the run's stream;
 * `held` lists READY nodes that a concurrency cap or the queue-depth gate kept back this time.
 *
 * Rules:
 * - In-degree: `remaining_upstreams` of a node is the number of its incoming edges whose upstream
 *   has not reached a terminal state. Each upstream that ends (COMPLETED, DEGRADED, SKIPPED,
 *   FAILED, CANCELLED) decrements each downstream counter exactly once; a counter that would go
 *   below zero is an integrity error (`dag.negative_indegree`), never clamped.
 * - An incoming edge resolves as *taken* (upstream COMPLETED or DEGRADED and its `when` holds on
 *   the upstream's output), *not taken* (condition false, or upstream SKIPPED) or *failed*
 *   (upstream FAILED or CANCELLED).
 * - join "all" (default): a failed edge cancels the node at once (and, transitively, everything
 *   below it that cannot run any more); otherwise, when the counter reaches 0, the node is READY
 *   if at least one edge was taken, SKIPPED if none was (skipping propagates).
 * - join "any-success": the node waits for every upstream to end; READY if at least one edge was
 *   taken (failed branches are left out of its input), else CANCELLED if a branch failed, else
 *   SKIPPED.
 * - join "quorum" (with `quorum: N`): READY as soon as N edges were taken, with those N outputs as
 *   its input; the other branches are left to finish (their outputs are in the run's result and
 *   reach their own downstreams). CANCELLED (or SKIPPED, when nothing failed) once fewer than N
 *   can still be taken.
 * - join "first-wins": READY as soon as one edge was taken, with that output as its input; every
 *   other upstream that has not ended is SKIPPED (reason first_wins; a RUNNING one is stopped:
 *   `node.cancel`, `child.cancel`), so what depends only on a dropped branch is skipped, not
 *   failed, and the run can still end COMPLETED.
 * - A failed node with `degrade: "empty"` becomes DEGRADED with output `{}` and counts as done.
 *   Conditions on edges leaving it are evaluated against `{}`.
 * - A failure never stops unrelated work: running siblings finish and their own descendants run.
 *   The run ends when nothing is PENDING, READY or RUNNING: COMPLETED when every node is
 *   COMPLETED, DEGRADED or SKIPPED; otherwise PARTIAL when at least one node COMPLETED (its output
 *   is the partial result), FAILED when none did.
 * - Deliveries are at-least-once: a completion or failure is applied only to a RUNNING node (or
 *   map item) whose assignment carries the same generation; anything else is reported
 *   (`delivery.ignored`, with reason duplicate / stale_generation / not_running) and changes
 *   nothing (./delivery).
 * - Map nodes (./map), loops (./loop), waits (./wait) and child runs (./child) are described in
 *   their modules.
 * - Partial re-run from a node resets that node and its descendants, bumps `generation`, and
 *   recomputes their counters from upstreams that have not ended: upstreams outside the re-run
 *   scope that already ended are stripped, so the seed node does not wait for them forever.
 *
 * This module holds the transitions that start a run and apply agents' deliveries; the rest of
 * the executor lives beside it: the definition language (./definition), its checks (./validate)
 * and compiled graph (./graph), the run aggregate (./run), the working copy (./draft),
 * propagation and the end of a run (./settle), the release pass (./release-pass), re-run and
 * cancel (./rerun), the result (./result).
 */

/** Start a run: every node PENDING with its in-degree, the roots READY, then a release pass. */
export function startRun(
  def: WorkflowDefinition,
  runId: string,
  input: unknown,
  capacity: Capacity = {},
): Transition {
  const graph = graphOf(def);
  if (typeof runId !== "string" || runId.length === 0 || runId.length > 256)
    throw new DagRequestError("dag.bad_run_id", `run id ${show(runId)} must be 1-256 characters`);
  const nodes: Record<string, NodeRun> = {};
  for (const id of graph.ids)
    nodes[id] = {
      state: "PENDING",
      remaining_upstreams: (graph.up.get(id) ?? []).length,
      attempt: 0,
    };
  const run: DagRun = {
    run_id: runId,
    workflow: { name: def.name, version: def.version },
    status: "RUNNING",
    generation: 0,
    input,
    nodes,
  };
  const draft = new Draft(graph, run);
  draft.events.push({ type: "run.started", generation: 0 });
  for (const id of graph.roots) {
    draft.put(id, { ...draft.node(id), state: "READY" });
    draft.events.push({ type: "node.ready", node_id: id, generation: 0 });
  }
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/**
 * Assign READY nodes (in node-id order) while the run's global cap, the role's cap and the
 * role's queue-depth gate allow; the rest stay READY and are listed in `held`.
 */
export function release(run: DagRun, def: WorkflowDefinition, capacity: Capacity = {}): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const draft = new Draft(graph, run);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/**
 * A node reported success. Ignored (and reported) unless the node is RUNNING under this
 * generation; otherwise the node is COMPLETED with `output`, its downstreams are decremented and
 * decided, READY nodes are released and the run ends if nothing is left.
 */
export function onNodeCompleted(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  output: unknown,
  generation: number,
  capacity: Capacity = {},
): Transition {
  const report = { nodeId, generation, outcome: "completed", kind: "task" } as const;
  return whenRunning(run, def, report, (draft) => {
    completeNode(draft, nodeId, output, generation);
    return settled(draft, nodeId, capacity);
  });
}

/**
 * A node reported a final failure (its own retries are over). With `degrade: "empty"` it becomes
 * DEGRADED with output {} and the run goes on as after a completion; otherwise it is FAILED, the
 * downstream nodes that can no longer run are CANCELLED (transitively), running siblings keep
 * running, and the run ends PARTIAL / FAILED once nothing is left.
 */
export function onNodeFailed(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  error: unknown,
  generation: number,
  capacity: Capacity = {},
): Transition {
  const report = { nodeId, generation, outcome: "failed", kind: "task" } as const;
  return whenRunning(run, def, report, (draft) => {
    failNode(draft, nodeId, toNodeError(error));
    return settled(draft, nodeId, capacity);
  });
}

/**
 * One item of a map node reported success. Ignored (and reported) unless the item is RUNNING
 * under this generation; otherwise its output is recorded, and the map node ends COMPLETED once
 * every item ended (./map), more items are assigned, and the run goes on as after a completion.
 */
export function onItemCompleted(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  item: number,
  output: unknown,
  generation: number,
  capacity: Capacity = {},
): Transition {
  return itemReport(run, def, { nodeId, item, generation, outcome: "completed" }, capacity, {
    output,
  });
}

/**
 * One item of a map node reported a final failure: recorded; over the map's tolerance the items
 * still running are cancelled and the node fails (./map).
 */
export function onItemFailed(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  item: number,
  error: unknown,
  generation: number,
  capacity: Capacity = {},
): Transition {
  return itemReport(run, def, { nodeId, item, generation, outcome: "failed" }, capacity, {
    error: toNodeError(error),
  });
}

function itemReport(
  run: DagRun,
  def: WorkflowDefinition,
  report: Omit<Report, "kind">,
  capacity: Capacity,
  end: { output: unknown } | { error: NodeError },
): Transition {
  return whenRunning(run, def, { ...report, kind: "map" }, (draft) => {
    if (recordItem(draft, report.nodeId, report.item ?? 0, end))
      return settled(draft, report.nodeId, capacity);
    releasePass(draft, capacity);
    return draft.done();
  });
}

/**
 * The outcome of an assignment is unknown (its lease ran out: the request may still wait in the
 * agent's queue, or its answer may have been lost): send the same assignment again (same
 * generation and attempt, the same input; with `item`, of that map item), changing nothing in
 * the run. The agent answers it from its record of the assignment if it already ended, so a lost
 * answer comes again, and the delivery gate keeps a second answer from counting twice. Ignored
 * (and reported) unless the node (or item) is RUNNING under this generation.
 */
export function redeliver(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  item?: number,
): Transition {
  const kind = item === undefined ? "task" : "map";
  const report = { nodeId, generation, outcome: "failed", kind, item } as const;
  return whenRunning(run, def, report, (draft, graph) => {
    const role = roleOf(requireNode(graph, nodeId));
    const node = draft.node(nodeId);
    const itemRun = item === undefined ? undefined : node.items?.[item];
    const attempt = itemRun?.attempt ?? node.attempt;
    const ref =
      item === undefined
        ? undefined
        : { index: item, count: node.items?.length ?? 0, value: mapItemsOf(draft, nodeId)?.[item] };
    draft.commands.push({
      ...assignment(draft, nodeId, role, attempt, generation, ref),
      redelivered: true,
    });
    draft.events.push({ type: "node.redelivered", node_id: nodeId, role, attempt, generation });
    return draft.done();
  });
}
