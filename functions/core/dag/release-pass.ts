import { assignment, childStart } from "./assignment";
import { type ChildWorkflow, DEFAULT_GLOBAL_CONCURRENCY, type WaitSpec } from "./definition";
import type { Draft } from "./draft";
import { kindOf, requireNode, roleOf } from "./graph";
import { type ItemSlots, releaseItems, startMap } from "./map";
import type { Capacity, HeldReason, NodeRun } from "./run";
import { propagate } from "./settle";

export { assignment } from "./assignment";

/**
 * A release pass: READY nodes (in node-id order) start: a task node is assigned while the run's
 * global cap, the role's cap and the role's queue-depth gate allow, a map node's items likewise,
 * item by item; a wait or child node starts at once (no role's work, so no cap). What a cap kept
 * back stays READY (or PENDING, for items) and is listed in `held`. A map node that ends at its
 * start (no list, or an empty one) flows downstream and the pass goes round again.
 */
export function releasePass(draft: Draft, capacity: Capacity): void {
  const slots = new Slots(draft, capacity);
  for (let again = true; again && draft.run.status === "RUNNING"; ) {
    again = false;
    draft.held.length = 0;
    for (const id of draft.graph.ids) if (releaseNode(draft, id, slots)) again = true;
  }
}

/** Start or feed node `id` if it is READY (or a RUNNING map); true when it ended by that. */
function releaseNode(draft: Draft, id: string, slots: Slots): boolean {
  const node = draft.node(id);
  if (node.state !== "READY" && node.state !== "RUNNING") return false;
  const definition = requireNode(draft.graph, id);
  const kind = kindOf(definition);
  if (node.state === "RUNNING" && kind !== "map") return false;
  const hold = (reason: HeldReason | undefined) => {
    if (reason) draft.held.push({ node_id: id, role: roleOf(definition), reason });
  };
  switch (kind) {
    case "task": {
      const reason = slots.heldReason(roleOf(definition));
      if (reason) hold(reason);
      else {
        slots.take(roleOf(definition));
        assign(draft, id, node, roleOf(definition));
      }
      return false;
    }
    case "map":
      if (node.state === "READY" && startMap(draft, id)) {
        propagate(draft, id);
        return true;
      }
      hold(releaseItems(draft, id, slots));
      return false;
    case "wait":
      if (definition.wait) startWait(draft, id, node, definition.wait);
      return false;
    case "child":
      if (definition.workflow) startChild(draft, id, node, definition.workflow);
      return false;
  }
}

/** What is RUNNING (overall and by role) and what this pass released, against the caps. A map
 * node counts its RUNNING items; wait and child nodes do no role's work and count for nothing. */
class Slots implements ItemSlots {
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
      const node = draft.node(id);
      const definition = requireNode(graph, id);
      if (node.state !== "RUNNING" || definition.role === undefined) continue;
      const units = node.items ? node.items.filter((item) => item.state === "RUNNING").length : 1;
      this.running += units;
      const role = definition.role;
      this.runningByRole.set(role, (this.runningByRole.get(role) ?? 0) + units);
    }
  }

  /** Why a unit of `role`'s work must wait, or undefined when it may go. */
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

/** A wait node goes RUNNING with a `wait.start` command: its timer, or its signal and deadline. */
function startWait(draft: Draft, id: string, node: NodeRun, wait: WaitSpec): void {
  const attempt = node.attempt + 1;
  const generation = draft.run.generation;
  draft.put(id, { ...node, state: "RUNNING", attempt, assigned_generation: generation });
  const when = {
    ...(wait.until === undefined ? {} : { until: wait.until }),
    ...(wait.seconds === undefined ? {} : { after_seconds: wait.seconds }),
    ...(wait.signal === undefined ? {} : { signal: wait.signal }),
  };
  const ids = { run_id: draft.run.run_id, node_id: id, attempt, generation };
  draft.commands.push({ type: "wait.start", ...ids, ...when });
  draft.events.push({ type: "wait.started", node_id: id, generation, ...when });
}

/** A child node goes RUNNING with a `child.start` command for its child run. */
function startChild(draft: Draft, id: string, node: NodeRun, workflow: ChildWorkflow): void {
  const attempt = node.attempt + 1;
  const generation = draft.run.generation;
  draft.put(id, { ...node, state: "RUNNING", attempt, assigned_generation: generation });
  const command = childStart(draft, id, workflow, attempt, generation);
  draft.commands.push(command);
  draft.events.push({
    type: "child.started",
    node_id: id,
    generation,
    child_run_id: command.child_run_id,
  });
}
