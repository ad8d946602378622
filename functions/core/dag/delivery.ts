import { AgentBusError, describe } from "../errors";
import type { WorkflowDefinition } from "./definition";
import { checkRun, Draft } from "./draft";
import { DagIntegrityError, DagRequestError } from "./errors";
import { type Graph, graphOf, kindOf, type NodeKind, requireNode } from "./graph";
import { releasePass } from "./release-pass";
import {
  type Capacity,
  type DagEvent,
  type DagRun,
  type IgnoredReason,
  type NodeError,
  NodeErrorSchema,
  type Transition,
} from "./run";
import { finish, propagate } from "./settle";
import { show } from "./values";

/**
 * The gate every report about an assignment passes (seed 001: at-least-once delivery): a
 * report changes the run only when it is for the node's (or the map item's) current assignment,
 * RUNNING under the report's generation; anything else is reported as `delivery.ignored`
 * (duplicate, stale_generation or not_running) and changes nothing. A report meant for another
 * kind of node (an agent's answer for a wait node, say) is refused: dag.wrong_node_kind.
 */

/** Which assignment a report is about. */
export interface Report {
  readonly nodeId: string;
  readonly generation: number;
  readonly outcome: "completed" | "failed";
  /** The node kind that makes such reports. */
  readonly kind: NodeKind;
  /** The map item, for a map node. */
  readonly item?: number;
}

/**
 * `apply` changes a draft of the run when the report is for the current assignment; any other
 * report is ignored (and reported) without a change.
 */
export function whenRunning(
  run: DagRun,
  def: WorkflowDefinition,
  report: Report,
  apply: (draft: Draft, graph: Graph) => Transition,
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const definition = requireNode(graph, report.nodeId);
  if (kindOf(definition) !== report.kind)
    throw new DagRequestError(
      "dag.wrong_node_kind",
      `a ${report.kind} report for node ${report.nodeId} of run ${run.run_id}, which is a ${kindOf(definition)} node`,
      { details: { run_id: run.run_id, node: report.nodeId, kind: kindOf(definition) } },
    );
  const skip = gate(run, report);
  if (skip) return { run, commands: [], events: [skip], held: [] };
  return apply(new Draft(graph, run), graph);
}

function gate(run: DagRun, report: Report): DagEvent | undefined {
  const { nodeId, generation, outcome, item } = report;
  if (!Number.isInteger(generation) || generation < 0 || generation > run.generation)
    throw new DagIntegrityError(
      "dag.bad_generation",
      `a ${outcome} delivery for node ${nodeId} carries generation ${show(generation)}, but run ${run.run_id} is at generation ${run.generation}`,
      { details: { run_id: run.run_id, node: nodeId, generation } },
    );
  const node = run.nodes[nodeId];
  if (!node)
    throw new DagIntegrityError("dag.run_mismatch", `run ${run.run_id} has no node ${nodeId}`);
  const current = node.state === "RUNNING" && node.assigned_generation === generation;
  let ended = node.state === "CANCELLED" || node.state === "SKIPPED";
  if (current && item !== undefined) {
    const itemRun = node.items?.[item];
    if (!itemRun || !Number.isInteger(item))
      throw new DagIntegrityError(
        "dag.bad_item",
        `a ${outcome} delivery for item ${show(item)} of map node ${nodeId}, which has ${node.items?.length ?? 0} items`,
        { details: { run_id: run.run_id, node: nodeId, item } },
      );
    if (itemRun.state === "RUNNING" && itemRun.assigned_generation === generation) return;
    ended = itemRun.state === "CANCELLED";
  } else if (current) return undefined;
  // Same assignment, already ended: a redelivery. An older assignment: stale. Otherwise the node
  // was never assigned under this generation, or its assignment was cancelled or dropped.
  const reason: IgnoredReason =
    node.assigned_generation === generation
      ? ended
        ? "not_running"
        : "duplicate"
      : generation < run.generation
        ? "stale_generation"
        : "not_running";
  return {
    type: "delivery.ignored",
    node_id: nodeId,
    ...(item === undefined ? {} : { item }),
    outcome,
    generation,
    reason,
    state: node.state,
  };
}

/** After a node ended: its downstream nodes decided, READY ones released, the run ended if done. */
export function settled(draft: Draft, nodeId: string, capacity: Capacity): Transition {
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/** A node error as the run records it: from an AgentBusError, a NodeError-shaped value or else. */
export function toNodeError(error: unknown): NodeError {
  if (error instanceof AgentBusError)
    return { code: error.code, message: error.message, error_class: error.errorClass };
  if (!(error instanceof Error)) {
    const parsed = NodeErrorSchema.safeParse(error);
    if (parsed.success) return parsed.data;
  }
  const { code, message } = describe(error);
  return { code, message };
}
