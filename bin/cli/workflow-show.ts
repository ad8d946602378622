import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import type { NodeRun } from "../../functions/core/dag/run";
import type { StoredState } from "../../functions/core/ports";
import { childRunsOf } from "../../functions/roles/orchestrator/child-commands";
import {
  type OrchestratorState,
  pendingPlanApproval,
} from "../../functions/roles/orchestrator/state";
import { currentTimers } from "../../functions/roles/orchestrator/timers";
import { out } from "./target";

/** `agentbus workflow show`: a run's status, nodes and timeline as text. */

/**
 * The run's nodes in the order of its workflow definition when known (the stack's), the others
 * after it, sorted.
 */
function nodeOrder({ run }: OrchestratorState, definition?: WorkflowDefinition): string[] {
  const defined = definition?.nodes.map((n) => n.id) ?? [];
  const ids = Object.keys(run.nodes);
  return [
    ...defined.filter((id) => ids.includes(id)),
    ...ids.filter((id) => !defined.includes(id)).sort(),
  ];
}

export function printRun(
  stored: StoredState<OrchestratorState>,
  definition?: WorkflowDefinition,
): void {
  const { workflow, run, held, timeline } = stored.data;
  out(`run ${run.run_id}`);
  out(`  workflow    ${workflow} (${run.workflow.name} v${run.workflow.version})`);
  const { parent, plan } = stored.data;
  if (parent)
    out(
      `  parent      ${parent.run_id}, node ${parent.node_id} (generation ${parent.generation})${plan === undefined ? "" : ", a plan"}`,
    );
  out(`  status      ${run.status}`);
  out(`  generation  ${run.generation}`);
  out(`  revision    ${stored.revision} (stream version ${stored.version})`);
  out();
  const rows = nodeOrder(stored.data, definition).map(
    (id) => [id, run.nodes[id] as NodeRun] as const,
  );
  const cells = rows.map(([id, node]) => [
    id,
    node.state,
    String(node.attempt),
    node.assigned_generation === undefined ? "-" : String(node.assigned_generation),
    node.error ? `${node.error.code}: ${node.error.message.split("\n")[0]}` : "",
  ]);
  const header = ["node", "state", "attempt", "generation", "error"];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    `  ${cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()}`;
  out("nodes");
  out(line(header));
  for (const row of cells) out(line(row));
  printChildRuns(stored.data);
  printLeases(stored.data);
  printTimers(stored.data);
  printPlanApprovals(stored.data);
  if (held.length) {
    out();
    out("held back");
    for (const h of held) out(`  ${JSON.stringify(h)}`);
  }
  out();
  out(`timeline (${timeline.length} steps)`);
  for (const step of timeline) {
    const node = step.node_id ? ` ${step.node_id}` : "";
    const gen = step.generation === undefined ? "" : ` g${step.generation}`;
    const signal = step.signal === undefined ? "" : ` ${step.signal}`;
    out(`  ${step.at}  ${step.event}${node}${gen}${signal}  (${step.cause})`);
  }
}

/** The lease of each RUNNING node a role carries out, and what a BLOCKED one waits for. */
function printLeases(state: OrchestratorState): void {
  const leases = Object.entries(state.leases ?? {});
  if (leases.length === 0) return;
  out();
  out("leases (RUNNING nodes)");
  for (const [id, lease] of leases) {
    const again = lease.redeliveries ? `, sent again ${lease.redeliveries}x` : "";
    const since = lease.started_at ? ` at ${lease.started_at}` : "";
    out(
      `  ${id}  ${lease.started ? `started${since}` : "queued"}${again}, until ${lease.expires_at}`,
    );
    if (lease.blocked && !lease.blocked.outcome)
      out(`    BLOCKED until ${lease.blocked.confirm_by}: ${lease.blocked.question}`);
  }
}

/** The child nodes whose plan waits for a person's approval: the plan, and what answers it. */
function printPlanApprovals(state: OrchestratorState): void {
  const waiting = Object.keys(state.plan_approvals ?? {}).flatMap((nodeId) => {
    const approval = pendingPlanApproval(state, nodeId);
    return approval ? [[nodeId, approval] as const] : [];
  });
  if (waiting.length === 0) return;
  out();
  out("plans waiting for an approval (they name roles that write)");
  for (const [nodeId, { plan, writes, deadline }] of waiting) {
    const nodes = plan.nodes.map((n) => `${n.id} (${n.runs})`).join(", ");
    const more = plan.node_count - plan.nodes.length;
    out(`  ${nodeId}  ${plan.name} v${plan.version} until ${deadline}: ${nodes}`);
    if (more > 0) out(`    and ${more} more nodes`);
    out(`    writes: ${writes.map((w) => `${w.role} (${w.integrations.join(", ")})`).join(", ")}`);
    out(`    agentbus approve|reject ${state.run.run_id} --step ${nodeId}`);
  }
}

/** The child run of each child node that started one. */
function printChildRuns(state: OrchestratorState): void {
  const children = childRunsOf(state);
  if (children.length === 0) return;
  out();
  out("child runs (`workflow show <run>` shows one)");
  for (const child of children) out(`  ${child.nodeId}  ${child.runId}`);
}

/** What each RUNNING wait node waits for: its timer, or a signal and its deadline. */
function printTimers(state: OrchestratorState): void {
  const timers = currentTimers(state);
  if (timers.length === 0) return;
  out();
  out("waits (RUNNING wait nodes)");
  for (const [id, timer] of timers)
    out(
      timer.signal === undefined
        ? `  ${id}  timer until ${timer.due_at}`
        : `  ${id}  signal ${timer.signal}, deadline ${timer.due_at}`,
    );
}
