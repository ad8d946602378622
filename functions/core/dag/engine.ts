import { AgentBusError, describe } from "../errors";
import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft } from "./draft";
import { DagIntegrityError, DagRequestError } from "./errors";
import { type Graph, graphOf, requireNode } from "./graph";
import { assignment, releasePass } from "./release-pass";
import {
  type Capacity,
  type DagEvent,
  type DagRun,
  type IgnoredReason,
  type NodeError,
  NodeErrorSchema,
  type NodeRun,
  type Transition,
} from "./run";
import { finish, propagate } from "./settle";
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
 * - A failed node with `degrade: "empty"` becomes DEGRADED with output `{}` and counts as done.
 *   Conditions on edges leaving it are evaluated against `{}`.
 * - A failure never stops unrelated work: running siblings finish and their own descendants run.
 *   The run ends when nothing is PENDING, READY or RUNNING: COMPLETED when every node is
 *   COMPLETED, DEGRADED or SKIPPED; otherwise PARTIAL when at least one node COMPLETED (its output
 *   is the partial result), FAILED when none did.
 * - Deliveries are at-least-once: a completion or failure is applied only to a RUNNING node whose
 *   assignment carries the same generation; anything else is reported (`delivery.ignored`, with
 *   reason duplicate / stale_generation / not_running) and changes nothing.
 * - Partial re-run from a node resets that node and its descendants, bumps `generation`, and
 *   recomputes their counters from upstreams that have not ended: upstreams outside the re-run
 *   scope that already ended are stripped, so the seed node does not wait for them forever.
 *
 * This module holds the transitions that start a run and apply deliveries; the rest of the
 * executor lives beside it: the definition language (./definition) and its compiled graph
 * (./graph), the run aggregate (./run), the working copy (./draft), propagation and the end of a
 * run (./settle), the release pass (./release-pass), re-run and cancel (./rerun), the result
 * (./result).
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
  return draft.done();
}

function gate(
  run: DagRun,
  graph: Graph,
  nodeId: string,
  generation: number,
  outcome: "completed" | "failed",
): DagEvent | undefined {
  requireNode(graph, nodeId);
  if (!Number.isInteger(generation) || generation < 0 || generation > run.generation)
    throw new DagIntegrityError(
      "dag.bad_generation",
      `a ${outcome} delivery for node ${nodeId} carries generation ${show(generation)}, but run ${run.run_id} is at generation ${run.generation}`,
      { details: { run_id: run.run_id, node: nodeId, generation } },
    );
  const node = run.nodes[nodeId];
  if (!node)
    throw new DagIntegrityError("dag.run_mismatch", `run ${run.run_id} has no node ${nodeId}`);
  if (node.state === "RUNNING" && node.assigned_generation === generation) return undefined;
  // Same assignment, already ended: a redelivery. An older assignment: stale. Otherwise the node
  // was never assigned under this generation, or its assignment was cancelled.
  const reason: IgnoredReason =
    node.assigned_generation === generation
      ? node.state === "CANCELLED"
        ? "not_running"
        : "duplicate"
      : generation < run.generation
        ? "stale_generation"
        : "not_running";
  return {
    type: "delivery.ignored",
    node_id: nodeId,
    outcome,
    generation,
    reason,
    state: node.state,
  };
}

function ignored(run: DagRun, event: DagEvent): Transition {
  return { run, commands: [], events: [event], held: [] };
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
  return whenRunning(run, def, nodeId, generation, "completed", (draft) => {
    const { error: _error, ...node } = draft.node(nodeId);
    draft.put(nodeId, { ...node, state: "COMPLETED", output });
    draft.events.push({ type: "node.completed", node_id: nodeId, generation });
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
  return whenRunning(run, def, nodeId, generation, "failed", (draft, graph) => {
    const failure = toNodeError(error);
    const node = draft.node(nodeId);
    if (requireNode(graph, nodeId).degrade === "empty") {
      draft.put(nodeId, { ...node, state: "DEGRADED", output: {}, error: failure });
      draft.events.push({ type: "node.degraded", node_id: nodeId, generation, error: failure });
    } else {
      const { output: _output, ...rest } = node;
      draft.put(nodeId, { ...rest, state: "FAILED", error: failure });
      draft.events.push({ type: "node.failed", node_id: nodeId, generation, error: failure });
    }
    return settled(draft, nodeId, capacity);
  });
}

/**
 * The outcome of a node's assignment is unknown (its lease ran out: the request may still wait in
 * the agent's queue, or its answer may have been lost): send the same assignment again (same
 * generation and attempt, the same input), changing nothing in the run. The agent answers it
 * from its record of the assignment if it already ended, so a lost answer comes again, and the
 * delivery gate keeps a second answer from counting twice. Ignored (and reported) unless the
 * node is RUNNING under this generation.
 */
export function redeliver(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
): Transition {
  return whenRunning(run, def, nodeId, generation, "failed", (draft, graph) => {
    const node = draft.node(nodeId);
    const role = requireNode(graph, nodeId).role;
    draft.commands.push(assignment(draft, nodeId, role, node.attempt, generation));
    draft.events.push({
      type: "node.redelivered",
      node_id: nodeId,
      role,
      attempt: node.attempt,
      generation,
    });
    return draft.done();
  });
}

/**
 * A report about one node: `apply` changes a draft of the run when the node is RUNNING under
 * `generation`; any other report is ignored (and reported) without a change.
 */
function whenRunning(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  generation: number,
  outcome: "completed" | "failed",
  apply: (draft: Draft, graph: Graph) => Transition,
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const skip = gate(run, graph, nodeId, generation, outcome);
  if (skip) return ignored(run, skip);
  return apply(new Draft(graph, run), graph);
}

/** After a node ended: its downstream nodes decided, READY ones released, the run ended if done. */
function settled(draft: Draft, nodeId: string, capacity: Capacity): Transition {
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/** A node error as the run records it: from an AgentBusError, a NodeError-shaped value or else. */
function toNodeError(error: unknown): NodeError {
  if (error instanceof AgentBusError)
    return { code: error.code, message: error.message, error_class: error.errorClass };
  if (!(error instanceof Error)) {
    const parsed = NodeErrorSchema.safeParse(error);
    if (parsed.success) return parsed.data;
  }
  const { code, message } = describe(error);
  return { code, message };
}
