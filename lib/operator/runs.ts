import {
  conditionHolds,
  type EdgeCondition,
  type EdgeDefinition,
  type NodeDefinition,
  type WorkflowDefinition,
} from "../../functions/core/dag/definition";
import type { DagRun } from "../../functions/core/dag/run";
import { childRunsOf } from "../../functions/roles/orchestrator/child-commands";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import type { NodeKind, RunEdgeView, RunNodeView, RunView } from "./views";

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

/** A node's kind, and what carries it out in words (its role, or the wait's or child's). */
export function nodeKindOf(node: NodeDefinition): { kind: NodeKind; role: string } {
  if (node.wait) {
    const { seconds, until, signal } = node.wait;
    const time = seconds !== undefined ? `${seconds} s` : `until ${until}`;
    return { kind: "wait", role: signal ? `signal ${signal} (${time})` : `wait ${time}` };
  }
  if (node.workflow) return { kind: "child", role: `workflow ${node.workflow.name}` };
  if (node.map) return { kind: "map", role: `${node.role ?? "?"} per item` };
  return { kind: "task", role: node.role ?? "?" };
}

/** A definition's edges as the views draw them: a loop's way back says until when. */
export function edgeViews(edges: readonly EdgeDefinition[]): RunEdgeView[] {
  return edges.map((e) => {
    if (e.loop)
      return {
        from: e.from,
        to: e.to,
        loop: true,
        condition: `loop until ${conditionText(e.loop.until)}, ≤ ${e.loop.maxRounds} rounds`,
      };
    const condition = conditionText(e.when);
    return { from: e.from, to: e.to, ...(condition ? { condition } : {}) };
  });
}

/**
 * What a released node was given, as a step role reads it: the run's input with the output of
 * each upstream whose edge was taken under its id; undefined before its release.
 */
function nodeInputOf(
  run: DagRun,
  id: string,
  definition: WorkflowDefinition | undefined,
): Record<string, unknown> | undefined {
  const state = run.nodes[id]?.state;
  if (!definition || !state || state === "PENDING" || state === "READY" || state === "SKIPPED")
    return undefined;
  const input: Record<string, unknown> = { ...(run.input as Record<string, unknown>) };
  for (const edge of definition.edges) {
    const upstream = run.nodes[edge.from];
    if (edge.to !== id || edge.loop || upstream?.output === undefined) continue;
    if (conditionHolds(edge.when, upstream.output)) input[edge.from] = upstream.output;
  }
  return input;
}

/**
 * A workflow run as the operator sees it: its definition's nodes and edges (`definition`; a
 * workflow this tool does not know: the run's nodes without edges), each node's state, input and
 * output from the run, and its start and end from the run's timeline.
 */
export function runView(state: OrchestratorState, definition?: WorkflowDefinition): RunView {
  const { run } = state;
  const kinds = new Map(definition?.nodes.map((n) => [n.id, nodeKindOf(n)]) ?? []);
  const roles = new Map([...kinds].map(([id, k]) => [id, k.role]));
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
    const kind = kinds.get(id)?.kind;
    const input = nodeInputOf(run, id, definition);
    return {
      id,
      role: roles.get(id) ?? "?",
      ...(kind && kind !== "task" ? { kind } : {}),
      state: node?.state ?? "PENDING",
      attempt: node?.attempt ?? 0,
      ...(startedAt ? { startedAt } : {}),
      ...(endedAt ? { endedAt } : {}),
      ...(duration !== undefined ? { durationMs: duration } : {}),
      ...(node?.error ? { error: { code: node.error.code, message: node.error.message } } : {}),
      ...leaseOf(state, id),
      ...agentOf(state, id),
      ...(input ? { input } : {}),
      ...(node?.output === undefined ? {} : { output: node.output }),
    };
  });
  const edges = edgeViews(definition?.edges ?? []);
  return {
    runId: run.run_id,
    workflow: run.workflow,
    status: run.status,
    generation: run.generation,
    input: run.input,
    ...(state.origin
      ? { correlationId: state.origin.correlation_id, taskId: state.origin.task_id }
      : {}),
    ...(state.parent ? { parentRunId: state.parent.run_id } : {}),
    ...childRunsView(state),
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

/** The child runs a run's child nodes started, when it has any. */
function childRunsView(state: OrchestratorState): Pick<RunView, "childRuns"> {
  const children = childRunsOf(state);
  return children.length > 0 ? { childRuns: children } : {};
}
