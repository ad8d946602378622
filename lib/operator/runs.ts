import type { EdgeCondition } from "../../functions/core/dag/definition";
import { contentWorkflowFor } from "../../functions/roles/content-agents/workflows";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import type { RunEdgeView, RunNodeView, RunView } from "./views";

/** What ends a node's assignment on the run's timeline. */
const NODE_ENDS = new Set([
  "node.completed",
  "node.resolved",
  "node.failed",
  "node.degraded",
  "node.cancelled",
  "node.skipped",
]);

function conditionText(when: EdgeCondition | undefined): string | undefined {
  if (!when) return undefined;
  if (when.in !== undefined) return `${when.path} in ${JSON.stringify(when.in)}`;
  if (when.equals !== undefined) return `${when.path} = ${JSON.stringify(when.equals)}`;
  return `${when.path} is truthy`;
}

/** The lease of a RUNNING node as the operator sees it: started or queued, and redeliveries. */
function leaseOf(state: OrchestratorState, id: string): Pick<RunNodeView, "lease"> {
  const lease = state.run.nodes[id]?.state === "RUNNING" ? state.leases?.[id] : undefined;
  if (!lease) return {};
  return { lease: { started: lease.started ?? false, redeliveries: lease.redeliveries ?? 0 } };
}

/** What the agent of a RUNNING node reported: queued, started, or BLOCKED on a confirmation. */
function agentOf(state: OrchestratorState, id: string): Pick<RunNodeView, "agent"> {
  const node = state.run.nodes[id];
  const lease = node?.state === "RUNNING" ? state.leases?.[id] : undefined;
  if (!lease) return {};
  const { blocked } = lease;
  if (blocked && !blocked.outcome)
    return {
      agent: {
        state: "BLOCKED",
        since: blocked.since,
        confirmBy: blocked.confirm_by,
        question: blocked.question,
      },
    };
  if (lease.started)
    return {
      agent: { state: "RUNNING", ...(lease.started_at ? { since: lease.started_at } : {}) },
    };
  return { agent: { state: "QUEUED" } };
}

/**
 * A workflow run as the operator sees it: its definition's nodes and edges (by the run's workflow
 * kind), each node's state from the run, and its start and end from the run's timeline.
 */
export function runView(state: OrchestratorState): RunView {
  const { run } = state;
  let definition: ReturnType<typeof contentWorkflowFor> | undefined;
  try {
    definition = contentWorkflowFor({ kind: state.workflow });
  } catch {
    definition = undefined; // a workflow this tool does not know: nodes without edges
  }
  const roles = new Map(definition?.nodes.map((n) => [n.id, n.role]) ?? []);
  const ids = [
    ...(definition?.nodes.map((n) => n.id) ?? []).filter((id) => id in run.nodes),
    ...Object.keys(run.nodes)
      .filter((id) => !roles.has(id))
      .sort(),
  ];
  const nodes: RunNodeView[] = ids.map((id) => {
    const node = run.nodes[id];
    const steps = state.timeline.filter((s) => s.node_id === id);
    const startedAt = steps.filter((s) => s.event === "node.released").at(-1)?.at;
    const endedAt = steps.filter((s) => NODE_ENDS.has(s.event)).at(-1)?.at;
    const duration =
      startedAt && endedAt && endedAt >= startedAt
        ? Date.parse(endedAt) - Date.parse(startedAt)
        : undefined;
    return {
      id,
      role: roles.get(id) ?? "?",
      state: node?.state ?? "PENDING",
      attempt: node?.attempt ?? 0,
      ...(startedAt ? { startedAt } : {}),
      ...(endedAt ? { endedAt } : {}),
      ...(duration !== undefined ? { durationMs: duration } : {}),
      ...(node?.error ? { error: { code: node.error.code, message: node.error.message } } : {}),
      ...leaseOf(state, id),
      ...agentOf(state, id),
    };
  });
  const edges: RunEdgeView[] = (definition?.edges ?? []).map((e) => {
    const condition = conditionText(e.when);
    return { from: e.from, to: e.to, ...(condition ? { condition } : {}) };
  });
  return {
    runId: run.run_id,
    workflow: run.workflow,
    status: run.status,
    generation: run.generation,
    ...(state.origin
      ? { correlationId: state.origin.correlation_id, taskId: state.origin.task_id }
      : {}),
    nodes,
    edges,
    timeline: state.timeline.map((s) => ({
      at: s.at,
      event: s.event,
      cause: s.cause,
      ...(s.node_id ? { nodeId: s.node_id } : {}),
      ...(s.generation !== undefined ? { generation: s.generation } : {}),
    })),
  };
}
