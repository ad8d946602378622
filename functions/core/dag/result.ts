import type { DagRun, NodeState, RunResult } from "./run";
import { byString } from "./values";

/** The run's result so far: outputs, and which nodes failed, were cancelled or skipped. */
export function runResult(run: DagRun): RunResult {
  const ids = Object.keys(run.nodes).sort(byString);
  const inState = (state: NodeState) => ids.filter((id) => run.nodes[id]?.state === state);
  const outputs: Record<string, unknown> = {};
  for (const id of ids) {
    const node = run.nodes[id];
    if (node && (node.state === "COMPLETED" || node.state === "DEGRADED"))
      outputs[id] = node.output;
  }
  return {
    status: run.status,
    outputs,
    completed: inState("COMPLETED"),
    degraded: inState("DEGRADED"),
    failed: inState("FAILED").map((id) => ({ node_id: id, error: run.nodes[id]?.error })),
    cancelled: inState("CANCELLED"),
    skipped: inState("SKIPPED"),
  };
}
