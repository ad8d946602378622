import { z } from "zod";
import { AgentBusError, describe, PermanentError } from "./errors";

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
 */

// ---------------------------------------------------------------------------------------------
// Errors

/** A workflow definition that can never run (class permanent). */
export class WorkflowDefinitionError extends PermanentError {}

/** A run whose bookkeeping contradicts its definition: a bug or corrupted state (permanent). */
export class DagIntegrityError extends PermanentError {}

/** A request the run cannot satisfy: unknown node, blocked re-run, unknown workflow kind. */
export class DagRequestError extends PermanentError {}

// ---------------------------------------------------------------------------------------------
// Definitions (data)

const IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const Identifier = z.string().regex(IDENTIFIER, {
  message: "must be 1-64 characters of A-Z a-z 0-9 _ . - starting with a letter or digit",
});
const DOT_PATH = /^[^.]+(\.[^.]+)*$/;

/** Default cap on RUNNING nodes of one run (the seed's min(cpu*2, 16) with the CPU term unknown). */
export const DEFAULT_GLOBAL_CONCURRENCY = 16;

export const EdgeConditionSchema = z
  .strictObject({
    /** Dot path into the upstream node's output, e.g. "verdict" or "checks.0.status". */
    path: z.string().regex(DOT_PATH, { message: "must be a dot path like verdict or a.b.0" }),
    /** The edge is taken when the value at `path` deep-equals this. */
    equals: z.unknown().optional(),
    /** The edge is taken when the value at `path` deep-equals one of these. */
    in: z.array(z.unknown()).min(1).optional(),
  })
  .refine((c) => c.equals === undefined || c.in === undefined, {
    message: "give either equals or in, not both",
  });

export const EdgeDefinitionSchema = z.strictObject({
  from: Identifier,
  to: Identifier,
  /** Conditional branch: taken only when this holds on `from`'s output (truthy when neither
   * `equals` nor `in` is given). Without `when` the edge is always taken. */
  when: EdgeConditionSchema.optional(),
});

export const NodeDefinitionSchema = z.strictObject({
  id: Identifier,
  /** The agent role (consumer group) that executes the node. */
  role: Identifier,
  /** On failure: "fail" (default) -> FAILED and downstream CANCELLED; "empty" -> DEGRADED with
   * output {} and downstream continues. */
  degrade: z.enum(["fail", "empty"]).default("fail"),
  /** How the node treats failed upstream branches: "all" (default) cancels it as soon as one
   * fails; "any-success" runs it with the branches that succeeded once all have ended. */
  join: z.enum(["all", "any-success"]).default("all"),
});

export const ConcurrencySchema = z.strictObject({
  /** Cap on RUNNING nodes of one run; default DEFAULT_GLOBAL_CONCURRENCY. */
  global: z.int().positive().optional(),
  /** Cap on RUNNING nodes of one run per role; roles not listed are capped only globally. */
  perRole: z.record(Identifier, z.int().positive()).optional(),
});

export const WorkflowDefinitionSchema = z.strictObject({
  name: Identifier,
  version: z.int().positive(),
  nodes: z.array(NodeDefinitionSchema).max(1000),
  edges: z.array(EdgeDefinitionSchema).max(10_000).default([]),
  concurrency: ConcurrencySchema.optional(),
});

export type EdgeCondition = z.output<typeof EdgeConditionSchema>;
export type EdgeDefinition = z.output<typeof EdgeDefinitionSchema>;
export type NodeDefinition = z.output<typeof NodeDefinitionSchema>;
export type Concurrency = z.output<typeof ConcurrencySchema>;
export type WorkflowDefinition = z.output<typeof WorkflowDefinitionSchema>;
/** What an author writes: `degrade`, `join` and `edges` may be left out. */
export type WorkflowDefinitionInput = z.input<typeof WorkflowDefinitionSchema>;

interface Graph {
  readonly def: WorkflowDefinition;
  readonly nodes: ReadonlyMap<string, NodeDefinition>;
  /** Node ids, sorted (the deterministic order of every pass). */
  readonly ids: readonly string[];
  /** Node ids in topological order (ties by id). */
  readonly topo: readonly string[];
  readonly down: ReadonlyMap<string, readonly EdgeDefinition[]>;
  readonly up: ReadonlyMap<string, readonly EdgeDefinition[]>;
  readonly roots: readonly string[];
}

const compiled = new WeakMap<object, Graph>();

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Validate a workflow definition and return it with defaults applied, deep-frozen. Throws
 * WorkflowDefinitionError with a dotted code: dag.invalid_definition, dag.bad_concurrency,
 * dag.duplicate_node, dag.unknown_node, dag.self_loop, dag.duplicate_edge, dag.no_root, dag.cycle.
 */
export function defineWorkflow(input: WorkflowDefinitionInput): WorkflowDefinition {
  const def = parseDefinition(input);
  const graph = compile(def);
  deepFreeze(def);
  compiled.set(def, graph);
  return def;
}

function parseDefinition(input: unknown): WorkflowDefinition {
  const parsed = WorkflowDefinitionSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const name = isRecord(input) && typeof input.name === "string" ? input.name : "(unnamed)";
  const described = issues.map((issue) => {
    const where = issue.path.map(String).join(".") || "(definition)";
    const got = valueAtPath(input, issue.path);
    return `${where}: ${issue.message} (got ${show(got)})`;
  });
  const concurrency = issues.find((i) => i.path[0] === "concurrency");
  const code = concurrency ? "dag.bad_concurrency" : "dag.invalid_definition";
  throw new WorkflowDefinitionError(code, `workflow ${name}: ${described.join("; ")}`, {
    details: { workflow: name, issues: described },
  });
}

function compile(def: WorkflowDefinition): Graph {
  const fail = (code: string, message: string, details: Record<string, unknown> = {}) =>
    new WorkflowDefinitionError(code, `workflow ${def.name} v${def.version}: ${message}`, {
      details: { workflow: def.name, version: def.version, ...details },
    });

  const nodes = new Map<string, NodeDefinition>();
  for (const node of def.nodes) {
    if (nodes.has(node.id))
      throw fail("dag.duplicate_node", `node id ${node.id} is defined twice`, { node: node.id });
    nodes.set(node.id, node);
  }
  const ids = [...nodes.keys()].sort(byString);
  const down = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const up = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const seen = new Set<string>();
  for (const edge of def.edges) {
    for (const end of [edge.from, edge.to]) {
      if (!nodes.has(end))
        throw fail(
          "dag.unknown_node",
          `edge ${edge.from} -> ${edge.to} names unknown node ${end}`,
          {
            node: end,
            edge: { from: edge.from, to: edge.to },
          },
        );
    }
    if (edge.from === edge.to)
      throw fail("dag.self_loop", `edge ${edge.from} -> ${edge.to} is a self-loop`, {
        node: edge.from,
      });
    const key = `${edge.from}\u0000${edge.to}`;
    if (seen.has(key))
      throw fail(
        "dag.duplicate_edge",
        `edge ${edge.from} -> ${edge.to} is defined twice (it would count twice in the in-degree of ${edge.to}; merge the conditions into one edge with "in")`,
        { edge: { from: edge.from, to: edge.to } },
      );
    seen.add(key);
    down.get(edge.from)?.push(edge);
    up.get(edge.to)?.push(edge);
  }
  for (const list of down.values()) list.sort((a, b) => byString(a.to, b.to));
  for (const list of up.values()) list.sort((a, b) => byString(a.from, b.from));

  const roles = new Set(def.nodes.map((n) => n.role));
  for (const [role, cap] of Object.entries(def.concurrency?.perRole ?? {})) {
    if (!roles.has(role))
      throw fail(
        "dag.bad_concurrency",
        `concurrency.perRole names role ${role} (cap ${cap}) that no node has`,
        { role },
      );
  }

  const roots = ids.filter((id) => (up.get(id) ?? []).length === 0);
  if (roots.length === 0) {
    const cycle = findCycle(ids, down);
    throw fail(
      "dag.no_root",
      ids.length === 0
        ? "has no nodes, so no root node to start from"
        : `has no root node: every node has an upstream (${ids.join(", ")})${cycle ? `; cycle ${cycle.join(" -> ")}` : ""}`,
      { cycle },
    );
  }
  const cycle = findCycle(ids, down);
  if (cycle)
    throw fail("dag.cycle", `has a cycle: ${cycle.join(" -> ")}`, {
      cycle,
      nodes: [...new Set(cycle)].sort(byString),
    });

  return { def, nodes, ids, topo: topologicalOrder(ids, down, up), down, up, roots };
}

/** A cycle as a closed path (first node repeated at the end), or undefined. */
function findCycle(
  ids: readonly string[],
  down: ReadonlyMap<string, readonly EdgeDefinition[]>,
): string[] | undefined {
  const color = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (id: string): string[] | undefined => {
    color.set(id, 1);
    stack.push(id);
    for (const edge of down.get(id) ?? []) {
      const state = color.get(edge.to);
      if (state === 1) return [...stack.slice(stack.indexOf(edge.to)), edge.to];
      if (state === undefined) {
        const found = visit(edge.to);
        if (found) return found;
      }
    }
    stack.pop();
    color.set(id, 2);
    return undefined;
  };
  for (const id of ids) {
    if (color.has(id)) continue;
    const found = visit(id);
    if (found) return found;
  }
  return undefined;
}

function topologicalOrder(
  ids: readonly string[],
  down: ReadonlyMap<string, readonly EdgeDefinition[]>,
  up: ReadonlyMap<string, readonly EdgeDefinition[]>,
): string[] {
  const indegree = new Map(ids.map((id) => [id, (up.get(id) ?? []).length]));
  const ready = ids.filter((id) => indegree.get(id) === 0);
  const order: string[] = [];
  while (ready.length > 0) {
    ready.sort(byString);
    const id = ready.shift() as string;
    order.push(id);
    for (const edge of down.get(id) ?? []) {
      const left = (indegree.get(edge.to) ?? 0) - 1;
      indegree.set(edge.to, left);
      if (left === 0) ready.push(edge.to);
    }
  }
  return order;
}

function graphOf(def: WorkflowDefinition): Graph {
  return compiled.get(def) ?? compile(parseDefinition(def));
}

/** The node and every node reachable from it, sorted. */
export function descendantsOf(def: WorkflowDefinition, nodeId: string): string[] {
  const graph = graphOf(def);
  requireNode(graph, nodeId);
  return [...scopeOf(graph, nodeId)].sort(byString);
}

function scopeOf(graph: Graph, nodeId: string): Set<string> {
  const scope = new Set<string>([nodeId]);
  const queue = [nodeId];
  for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
    for (const edge of graph.down.get(id) ?? []) {
      if (!scope.has(edge.to)) {
        scope.add(edge.to);
        queue.push(edge.to);
      }
    }
  }
  return scope;
}

// ---------------------------------------------------------------------------------------------
// Conditions

/** Whether an edge with this condition is taken for the upstream `output`. */
export function conditionHolds(when: EdgeCondition | undefined, output: unknown): boolean {
  if (!when) return true;
  const value = valueAtPath(output, when.path.split("."));
  if (when.equals !== undefined) return deepEqual(value, when.equals);
  if (when.in !== undefined) return when.in.some((candidate) => deepEqual(value, candidate));
  return Boolean(value);
}

function valueAtPath(root: unknown, path: readonly PropertyKey[]): unknown {
  let current = root;
  for (const segment of path) {
    if (current === null || typeof current !== "object") return undefined;
    const key = typeof segment === "symbol" ? segment : String(segment);
    if (!Object.hasOwn(current, key)) return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every(
    (k) =>
      Object.hasOwn(b, k) &&
      deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
  );
}

// ---------------------------------------------------------------------------------------------
// The run (aggregate)

export const NODE_STATES = [
  "PENDING",
  "READY",
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "DEGRADED",
  "SKIPPED",
] as const;
export const RUN_STATUSES = ["RUNNING", "COMPLETED", "FAILED", "PARTIAL", "CANCELLED"] as const;

export const NodeStateSchema = z.enum(NODE_STATES);
export const RunStatusSchema = z.enum(RUN_STATUSES);

export const NodeErrorSchema = z.object({
  code: z.string().min(1),
  message: z.string(),
  error_class: z.enum(["transient", "permanent", "business", "unknown_outcome"]).optional(),
});

export const NodeRunSchema = z.object({
  state: NodeStateSchema,
  /** Incoming edges whose upstream has not ended yet (the in-degree counter). */
  remaining_upstreams: z.int().nonnegative(),
  /** How many times the node was assigned, over all generations (1 on the first assignment). */
  attempt: z.int().nonnegative(),
  /** The run generation of the node's current assignment; absent until assigned (again). */
  assigned_generation: z.int().nonnegative().optional(),
  output: z.unknown().optional(),
  error: NodeErrorSchema.optional(),
});

export const DagRunSchema = z.object({
  run_id: z.string().min(1).max(256),
  workflow: z.object({ name: Identifier, version: z.int().positive() }),
  status: RunStatusSchema,
  /** Incremented by each partial re-run: deliveries for an older assignment are stale. */
  generation: z.int().nonnegative(),
  /** The run's input, handed to the root nodes. */
  input: z.unknown(),
  nodes: z.record(Identifier, NodeRunSchema),
});

export type NodeState = z.output<typeof NodeStateSchema>;
export type RunStatus = z.output<typeof RunStatusSchema>;
export type NodeError = z.output<typeof NodeErrorSchema>;
export type NodeRun = z.output<typeof NodeRunSchema>;
export type DagRun = z.output<typeof DagRunSchema>;

export type DagCommand =
  | {
      readonly type: "node.assign";
      readonly run_id: string;
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
      /** Outputs of the upstreams whose edge into this node was taken, by node id. */
      readonly input: Readonly<Record<string, unknown>>;
      /** The run's input (what the roots work from). */
      readonly run_input: unknown;
    }
  | {
      /** Stop work on an assignment that no longer counts (re-run or run cancelled). */
      readonly type: "node.cancel";
      readonly run_id: string;
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
      readonly reason: "rerun" | "run_cancelled";
    };

export type IgnoredReason = "duplicate" | "stale_generation" | "not_running";

export type DagEvent =
  | { readonly type: "run.started"; readonly generation: number }
  | { readonly type: "node.ready"; readonly node_id: string; readonly generation: number }
  | {
      readonly type: "node.released";
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
    }
  | { readonly type: "node.completed"; readonly node_id: string; readonly generation: number }
  | {
      readonly type: "node.degraded";
      readonly node_id: string;
      readonly generation: number;
      readonly error: NodeError;
    }
  | {
      readonly type: "node.failed";
      readonly node_id: string;
      readonly generation: number;
      readonly error: NodeError;
    }
  | {
      readonly type: "node.cancelled";
      readonly node_id: string;
      readonly reason: "upstream_failed" | "run_cancelled";
      /** The failed or cancelled upstream(s) that decided it. */
      readonly upstreams?: readonly string[];
    }
  | { readonly type: "node.skipped"; readonly node_id: string }
  | {
      readonly type: "delivery.ignored";
      readonly node_id: string;
      readonly outcome: "completed" | "failed";
      readonly generation: number;
      readonly reason: IgnoredReason;
      readonly state: NodeState;
    }
  | {
      readonly type: "run.rerun";
      readonly from: string;
      readonly generation: number;
      readonly nodes: readonly string[];
    }
  | {
      readonly type: "run.completed" | "run.partial" | "run.failed" | "run.cancelled";
      readonly result: RunResult;
    };

export type HeldReason = "global_cap" | "role_cap" | "queue_depth";

export interface HeldNode {
  readonly node_id: string;
  readonly role: string;
  readonly reason: HeldReason;
}

/** What a release pass may use: queue depth per role and the depth at which release stops. */
export interface Capacity {
  /** Messages waiting in each role's queue (missing roles count as 0). */
  readonly queueDepth?: Readonly<Record<string, number>>;
  /** New work for a role is released only while its depth (plus what this pass released) is
   * below this. Without a threshold there is no queue-depth gate. */
  readonly threshold?: number;
}

export interface Transition {
  readonly run: DagRun;
  readonly commands: readonly DagCommand[];
  readonly events: readonly DagEvent[];
  readonly held: readonly HeldNode[];
}

export interface RunResult {
  readonly status: RunStatus;
  /** Outputs of COMPLETED and DEGRADED nodes, by node id. */
  readonly outputs: Readonly<Record<string, unknown>>;
  readonly completed: readonly string[];
  readonly degraded: readonly string[];
  readonly failed: readonly { readonly node_id: string; readonly error?: NodeError }[];
  readonly cancelled: readonly string[];
  readonly skipped: readonly string[];
}

const TERMINAL: ReadonlySet<NodeState> = new Set([
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "DEGRADED",
  "SKIPPED",
]);
const LIVE: ReadonlySet<NodeState> = new Set(["PENDING", "READY", "RUNNING"]);

export const isTerminalNodeState = (state: NodeState): boolean => TERMINAL.has(state);

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

/** A working copy of a run: node records are replaced, never mutated. */
class Draft {
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

function checkRun(run: DagRun, graph: Graph): void {
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

function requireNode(graph: Graph, nodeId: string): NodeDefinition {
  const node = graph.nodes.get(nodeId);
  if (!node)
    throw new DagRequestError(
      "dag.unknown_node",
      `workflow ${graph.def.name} v${graph.def.version} has no node ${nodeId}`,
      { details: { node: nodeId } },
    );
  return node;
}

type EdgeOutcome = "taken" | "not_taken" | "failed" | "open";

function edgeOutcome(edge: EdgeDefinition, upstream: NodeRun): EdgeOutcome {
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

/** READY, SKIPPED or CANCELLED for a PENDING node whose upstreams have all ended. */
function decide(
  draft: Draft,
  id: string,
): { state: "READY" | "SKIPPED" | "CANCELLED"; failed: string[] } {
  const definition = requireNode(draft.graph, id);
  const incoming = draft.graph.up.get(id) ?? [];
  if (incoming.length === 0) return { state: "READY", failed: [] };
  let taken = false;
  const failed: string[] = [];
  for (const edge of incoming) {
    const outcome = edgeOutcome(edge, draft.node(edge.from));
    if (outcome === "open")
      throw new DagIntegrityError(
        "dag.indegree_mismatch",
        `node ${id} has no remaining upstreams by its counter, but upstream ${edge.from} is still ${draft.node(edge.from).state}`,
        { details: { run_id: draft.run.run_id, node: id, upstream: edge.from } },
      );
    if (outcome === "taken") taken = true;
    if (outcome === "failed") failed.push(edge.from);
  }
  if (definition.join === "all" && failed.length > 0) return { state: "CANCELLED", failed };
  if (taken) return { state: "READY", failed };
  if (failed.length > 0) return { state: "CANCELLED", failed };
  return { state: "SKIPPED", failed };
}

/** Apply a decision to a PENDING node; returns true when the node ended (and must propagate). */
function settleNode(draft: Draft, id: string): boolean {
  const node = draft.node(id);
  const { state, failed } = decide(draft, id);
  draft.put(id, { ...node, state });
  if (state === "READY") {
    draft.events.push({ type: "node.ready", node_id: id, generation: draft.run.generation });
    return false;
  }
  if (state === "SKIPPED") draft.events.push({ type: "node.skipped", node_id: id });
  else
    draft.events.push({
      type: "node.cancelled",
      node_id: id,
      reason: "upstream_failed",
      upstreams: failed,
    });
  return true;
}

/**
 * `endedId` just reached a terminal state: decrement each downstream counter once, cancel or
 * decide the downstreams it unblocked, and keep going through the nodes that ended in turn.
 */
function propagate(draft: Draft, endedId: string): void {
  const queue = [endedId];
  for (let from = queue.shift(); from !== undefined; from = queue.shift()) {
    const upstream = draft.node(from);
    for (const edge of draft.graph.down.get(from) ?? []) {
      const id = edge.to;
      const node = draft.node(id);
      const remaining = node.remaining_upstreams - 1;
      if (remaining < 0)
        throw new DagIntegrityError(
          "dag.negative_indegree",
          `in-degree of node ${id} would become ${remaining} when ${from} ended (run ${draft.run.run_id}): a duplicate edge or a duplicate completion was counted`,
          { details: { run_id: draft.run.run_id, node: id, upstream: from, remaining } },
        );
      draft.put(id, { ...node, remaining_upstreams: remaining });
      if (node.state !== "PENDING") continue;
      const join = requireNode(draft.graph, id).join;
      if (join === "all" && edgeOutcome(edge, upstream) === "failed") {
        draft.put(id, { ...node, remaining_upstreams: remaining, state: "CANCELLED" });
        draft.events.push({
          type: "node.cancelled",
          node_id: id,
          reason: "upstream_failed",
          upstreams: [from],
        });
        queue.push(id);
      } else if (remaining === 0 && settleNode(draft, id)) {
        queue.push(id);
      }
    }
  }
}

function releasePass(draft: Draft, capacity: Capacity): void {
  if (draft.run.status !== "RUNNING") return;
  const { graph } = draft;
  const globalCap = graph.def.concurrency?.global ?? DEFAULT_GLOBAL_CONCURRENCY;
  const perRoleCap = graph.def.concurrency?.perRole ?? {};
  let running = 0;
  const runningByRole = new Map<string, number>();
  for (const id of graph.ids) {
    if (draft.node(id).state !== "RUNNING") continue;
    running++;
    const role = requireNode(graph, id).role;
    runningByRole.set(role, (runningByRole.get(role) ?? 0) + 1);
  }
  const releasedByRole = new Map<string, number>();
  for (const id of graph.ids) {
    const node = draft.node(id);
    if (node.state !== "READY") continue;
    const role = requireNode(graph, id).role;
    const roleRunning = runningByRole.get(role) ?? 0;
    const roleCap = perRoleCap[role];
    const depth = (capacity.queueDepth?.[role] ?? 0) + (releasedByRole.get(role) ?? 0);
    let reason: HeldReason | undefined;
    if (running >= globalCap) reason = "global_cap";
    else if (roleCap !== undefined && roleRunning >= roleCap) reason = "role_cap";
    else if (capacity.threshold !== undefined && depth >= capacity.threshold)
      reason = "queue_depth";
    if (reason) {
      draft.held.push({ node_id: id, role, reason });
      continue;
    }
    const attempt = node.attempt + 1;
    const generation = draft.run.generation;
    draft.put(id, { ...node, state: "RUNNING", attempt, assigned_generation: generation });
    running++;
    runningByRole.set(role, roleRunning + 1);
    releasedByRole.set(role, (releasedByRole.get(role) ?? 0) + 1);
    draft.commands.push({
      type: "node.assign",
      run_id: draft.run.run_id,
      node_id: id,
      role,
      attempt,
      generation,
      input: inputOf(draft, id),
      run_input: draft.run.input,
    });
    draft.events.push({ type: "node.released", node_id: id, role, attempt, generation });
  }
}

function inputOf(draft: Draft, id: string): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const edge of draft.graph.up.get(id) ?? []) {
    const upstream = draft.node(edge.from);
    if (edgeOutcome(edge, upstream) === "taken") input[edge.from] = upstream.output ?? {};
  }
  return input;
}

/** End the run when nothing is PENDING, READY or RUNNING any more. */
function finish(draft: Draft): void {
  if (draft.run.status !== "RUNNING") return;
  const states = draft.graph.ids.map((id) => draft.node(id).state);
  if (states.some((s) => LIVE.has(s))) return;
  const ok = states.every((s) => s === "COMPLETED" || s === "DEGRADED" || s === "SKIPPED");
  const status: RunStatus = ok ? "COMPLETED" : states.includes("COMPLETED") ? "PARTIAL" : "FAILED";
  draft.run = { ...draft.run, status };
  const type =
    status === "COMPLETED" ? "run.completed" : status === "PARTIAL" ? "run.partial" : "run.failed";
  draft.events.push({ type, result: runResult(draft.run) });
}

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
  const graph = graphOf(def);
  checkRun(run, graph);
  const skip = gate(run, graph, nodeId, generation, "completed");
  if (skip) return ignored(run, skip);
  const draft = new Draft(graph, run);
  const { error: _error, ...node } = draft.node(nodeId);
  draft.put(nodeId, { ...node, state: "COMPLETED", output });
  draft.events.push({ type: "node.completed", node_id: nodeId, generation });
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
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
  const graph = graphOf(def);
  checkRun(run, graph);
  const skip = gate(run, graph, nodeId, generation, "failed");
  if (skip) return ignored(run, skip);
  const draft = new Draft(graph, run);
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
  propagate(draft, nodeId);
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/**
 * Partial re-run: reset `nodeId` and its descendants (outputs and errors dropped, attempts kept),
 * bump the generation, and recompute their counters from the upstreams that have not ended.
 * Everything else keeps its state and output; RUNNING nodes in the scope get a `node.cancel`
 * and their late deliveries become stale. Throws dag.rerun_blocked when `nodeId` could not run
 * (an upstream failed or was cancelled, or none of its incoming edges is taken).
 */
export function rerunFrom(
  run: DagRun,
  def: WorkflowDefinition,
  nodeId: string,
  capacity: Capacity = {},
): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  requireNode(graph, nodeId);
  const scope = scopeOf(graph, nodeId);
  const generation = run.generation + 1;
  const draft = new Draft(graph, run);
  draft.run = { ...draft.run, generation, status: "RUNNING" };
  const inScope = graph.topo.filter((id) => scope.has(id));
  for (const id of inScope) {
    const node = draft.node(id);
    if (node.state === "RUNNING")
      draft.commands.push({
        type: "node.cancel",
        run_id: run.run_id,
        node_id: id,
        role: requireNode(graph, id).role,
        attempt: node.attempt,
        generation: node.assigned_generation ?? run.generation,
        reason: "rerun",
      });
    draft.put(id, { state: "PENDING", remaining_upstreams: 0, attempt: node.attempt });
  }
  for (const id of inScope) {
    const open = (graph.up.get(id) ?? []).filter(
      (edge) => !TERMINAL.has(draft.node(edge.from).state),
    ).length;
    draft.put(id, { ...draft.node(id), remaining_upstreams: open });
  }
  draft.events.push({
    type: "run.rerun",
    from: nodeId,
    generation,
    nodes: [...scope].sort(byString),
  });
  const blocked = (why: string, upstreams: string[]) =>
    new DagRequestError("dag.rerun_blocked", `cannot re-run ${nodeId}: ${why}`, {
      details: { run_id: run.run_id, node: nodeId, upstreams },
    });
  const failedUpstreams = (graph.up.get(nodeId) ?? [])
    .filter((edge) => edgeOutcome(edge, draft.node(edge.from)) === "failed")
    .map((edge) => edge.from);
  if (requireNode(graph, nodeId).join === "all" && failedUpstreams.length > 0)
    throw blocked(
      `upstream ${failedUpstreams.join(", ")} failed or was cancelled; re-run from there`,
      failedUpstreams,
    );
  if (draft.node(nodeId).remaining_upstreams === 0) {
    const { state, failed } = decide(draft, nodeId);
    if (state === "CANCELLED")
      throw blocked(`every upstream failed or was cancelled (${failed.join(", ")})`, failed);
    if (state === "SKIPPED")
      throw blocked("none of its incoming edges is taken, so it would be skipped", []);
    settleNode(draft, nodeId);
  }
  releasePass(draft, capacity);
  finish(draft);
  return draft.done();
}

/**
 * Cancel the whole run: every node not yet ended is CANCELLED (RUNNING ones get a `node.cancel`),
 * and the run is CANCELLED with what it produced so far. A run that already ended is returned as is.
 */
export function cancelRun(run: DagRun, def: WorkflowDefinition): Transition {
  const graph = graphOf(def);
  checkRun(run, graph);
  const draft = new Draft(graph, run);
  if (run.status !== "RUNNING") return draft.done();
  for (const id of graph.ids) {
    const node = draft.node(id);
    if (!LIVE.has(node.state)) continue;
    if (node.state === "RUNNING")
      draft.commands.push({
        type: "node.cancel",
        run_id: run.run_id,
        node_id: id,
        role: requireNode(graph, id).role,
        attempt: node.attempt,
        generation: node.assigned_generation ?? run.generation,
        reason: "run_cancelled",
      });
    draft.put(id, { ...node, state: "CANCELLED" });
    draft.events.push({ type: "node.cancelled", node_id: id, reason: "run_cancelled" });
  }
  // Every node has ended, so no counter has anything left to wait for.
  for (const id of graph.ids) draft.put(id, { ...draft.node(id), remaining_upstreams: 0 });
  draft.run = { ...draft.run, status: "CANCELLED" };
  draft.events.push({ type: "run.cancelled", result: runResult(draft.run) });
  return draft.done();
}

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

// ---------------------------------------------------------------------------------------------
// The content-production workflows (seed 001 §6)

const CONTENT_NODES = [
  { id: "topic-selection", role: "topic-selector" },
  { id: "fact-check", role: "fact-checker" },
  { id: "writing", role: "writer" },
  { id: "review", role: "reviewer" },
] as const;

/** Quick news: topic selection, then fact check and writing in parallel, then review. */
export const quickNews: WorkflowDefinition = defineWorkflow({
  name: "content.quick-news",
  version: 1,
  nodes: [...CONTENT_NODES],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "topic-selection", to: "writing" },
    { from: "fact-check", to: "review" },
    { from: "writing", to: "review" },
  ],
});

/** Long form: topic selection, fact check, writing, review, one after the other. */
export const longForm: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 1,
  nodes: [...CONTENT_NODES],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "fact-check", to: "writing" },
    { from: "writing", to: "review" },
  ],
});

export const ContentRequestSchema = z.object({ kind: z.enum(["quick-news", "long-form"]) });
export type ContentRequest = z.output<typeof ContentRequestSchema>;

/** The workflow for a content request: quick news runs fact check || writing, long form serially. */
export function contentWorkflowFor(request: ContentRequest): WorkflowDefinition {
  const parsed = ContentRequestSchema.safeParse(request);
  if (!parsed.success) {
    const kind = isRecord(request) ? request.kind : request;
    throw new DagRequestError(
      "dag.unknown_content_kind",
      `content request kind ${show(kind)} is not one of quick-news, long-form`,
      { details: { kind } },
    );
  }
  return parsed.data.kind === "quick-news" ? quickNews : longForm;
}

// ---------------------------------------------------------------------------------------------
// Helpers

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object";
}

function show(value: unknown): string {
  if (value === undefined) return "undefined";
  try {
    const text = JSON.stringify(value);
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  } catch {
    return String(value);
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
