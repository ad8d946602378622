import { DEFAULT_GLOBAL_CONCURRENCY } from "./definition";
import { type Draft, edgeOutcome } from "./draft";
import { requireNode } from "./graph";
import type { Capacity, DagCommand, HeldReason, NodeRun } from "./run";

/**
 * A release pass: READY nodes (in node-id order) are assigned while the run's global cap, the
 * role's cap and the role's queue-depth gate allow; the rest stay READY and are listed in `held`.
 */
export function releasePass(draft: Draft, capacity: Capacity): void {
  if (draft.run.status !== "RUNNING") return;
  const slots = new Slots(draft, capacity);
  for (const id of draft.graph.ids) {
    const node = draft.node(id);
    if (node.state !== "READY") continue;
    const role = requireNode(draft.graph, id).role;
    const reason = slots.heldReason(role);
    if (reason) draft.held.push({ node_id: id, role, reason });
    else {
      slots.take(role);
      assign(draft, id, node, role);
    }
  }
}

/** What is RUNNING (overall and by role) and what this pass released, against the caps. */
class Slots {
  private running = 0;
  private readonly runningByRole = new Map<string, number>();
  private readonly releasedByRole = new Map<string, number>();
  private readonly globalCap: number;
  private readonly perRoleCap: Readonly<Record<string, number>>;

  constructor(
    draft: Draft,
    private readonly capacity: Capacity,
  ) {
    const { graph } = draft;
    this.globalCap = graph.def.concurrency?.global ?? DEFAULT_GLOBAL_CONCURRENCY;
    this.perRoleCap = graph.def.concurrency?.perRole ?? {};
    for (const id of graph.ids) {
      if (draft.node(id).state !== "RUNNING") continue;
      this.running++;
      const role = requireNode(graph, id).role;
      this.runningByRole.set(role, (this.runningByRole.get(role) ?? 0) + 1);
    }
  }

  /** Why a READY node of `role` must wait, or undefined when it may go. */
  heldReason(role: string): HeldReason | undefined {
    const roleCap = this.perRoleCap[role];
    const { queueDepth, threshold } = this.capacity;
    const depth = (queueDepth?.[role] ?? 0) + (this.releasedByRole.get(role) ?? 0);
    if (this.running >= this.globalCap) return "global_cap";
    if (roleCap !== undefined && (this.runningByRole.get(role) ?? 0) >= roleCap) return "role_cap";
    if (threshold !== undefined && depth >= threshold) return "queue_depth";
    return undefined;
  }

  take(role: string): void {
    this.running++;
    this.runningByRole.set(role, (this.runningByRole.get(role) ?? 0) + 1);
    this.releasedByRole.set(role, (this.releasedByRole.get(role) ?? 0) + 1);
  }
}

/** The node goes RUNNING under the run's generation, with a `node.assign` command. */
function assign(draft: Draft, id: string, node: NodeRun, role: string): void {
  const attempt = node.attempt + 1;
  const generation = draft.run.generation;
  draft.put(id, { ...node, state: "RUNNING", attempt, assigned_generation: generation });
  draft.commands.push(assignment(draft, id, role, attempt, generation));
  draft.events.push({ type: "node.released", node_id: id, role, attempt, generation });
}

/** The `node.assign` command of an assignment of node `id`, with the input it gets. */
export function assignment(
  draft: Draft,
  id: string,
  role: string,
  attempt: number,
  generation: number,
): DagCommand {
  return {
    type: "node.assign",
    run_id: draft.run.run_id,
    node_id: id,
    role,
    attempt,
    generation,
    input: inputOf(draft, id),
    run_input: draft.run.input,
  };
}

/** The outputs of the upstreams whose edge into `id` was taken, by node id. */
function inputOf(draft: Draft, id: string): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const edge of draft.graph.up.get(id) ?? []) {
    const upstream = draft.node(edge.from);
    if (edgeOutcome(edge, upstream) === "taken") input[edge.from] = upstream.output ?? {};
  }
  return input;
}
