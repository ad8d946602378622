import { conditionHolds, type EdgeDefinition } from "./definition";
import { DagIntegrityError } from "./errors";
import type { Graph } from "./graph";
import type { DagCommand, DagEvent, DagRun, HeldNode, NodeRun, Transition } from "./run";

/**
 * A working copy of a run: node records are replaced, never mutated, so a transition never
 * touches its input. It collects the commands, events and held nodes of one transition.
 */
export class Draft {
  run: DagRun;
  readonly nodes: Record<string, NodeRun>;
  readonly commands: DagCommand[] = [];
  readonly events: DagEvent[] = [];
  readonly held: HeldNode[] = [];

  constructor(
    readonly graph: Graph,
    source: DagRun,
  ) {
    this.nodes = { ...source.nodes };
    this.run = { ...source, nodes: this.nodes };
  }

  node(id: string): NodeRun {
    const node = this.nodes[id];
    if (!node)
      throw new DagIntegrityError(
        "dag.run_mismatch",
        `run ${this.run.run_id} has no record for node ${id} of workflow ${this.graph.def.name}`,
        { details: { run_id: this.run.run_id, node: id } },
      );
    return node;
  }

  put(id: string, node: NodeRun): void {
    this.nodes[id] = node;
  }

  done(): Transition {
    return { run: this.run, commands: this.commands, events: this.events, held: this.held };
  }
}

/** The run belongs to this definition and has a record for each of its nodes. */
export function checkRun(run: DagRun, graph: Graph): void {
  const { name, version } = graph.def;
  if (run.workflow.name !== name || run.workflow.version !== version)
    throw new DagIntegrityError(
      "dag.workflow_mismatch",
      `run ${run.run_id} belongs to workflow ${run.workflow.name} v${run.workflow.version}, not ${name} v${version}`,
      { details: { run_id: run.run_id, run_workflow: run.workflow, workflow: { name, version } } },
    );
  for (const id of graph.ids) {
    if (!run.nodes[id])
      throw new DagIntegrityError(
        "dag.run_mismatch",
        `run ${run.run_id} has no record for node ${id} of workflow ${name} v${version}`,
        { details: { run_id: run.run_id, node: id } },
      );
  }
}

export type EdgeOutcome = "taken" | "not_taken" | "failed" | "open";

/** How an incoming edge resolves for its upstream's current state. */
export function edgeOutcome(edge: EdgeDefinition, upstream: NodeRun): EdgeOutcome {
  switch (upstream.state) {
    case "COMPLETED":
    case "DEGRADED":
      return conditionHolds(edge.when, upstream.output ?? {}) ? "taken" : "not_taken";
    case "SKIPPED":
      return "not_taken";
    case "FAILED":
    case "CANCELLED":
      return "failed";
    default:
      return "open";
  }
}
