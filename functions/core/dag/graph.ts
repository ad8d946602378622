import { deepFreeze } from "../freeze";
import {
  type EdgeDefinition,
  type NodeDefinition,
  parseDefinition,
  type WorkflowDefinition,
  type WorkflowDefinitionInput,
} from "./definition";
import { DagRequestError, WorkflowDefinitionError } from "./errors";
import { byString } from "./values";

/**
 * A workflow definition compiled into the graph the engine walks: nodes by id, edges in both
 * directions, roots and a topological order, after the structural checks a schema cannot make.
 */
export interface Graph {
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

type Edges = ReadonlyMap<string, readonly EdgeDefinition[]>;
type Fail = (code: string, message: string, details?: Record<string, unknown>) => Error;

const compiled = new WeakMap<object, Graph>();

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

/** The graph of a definition (compiled once by defineWorkflow, else validated and compiled now). */
export function graphOf(def: WorkflowDefinition): Graph {
  return compiled.get(def) ?? compile(parseDefinition(def));
}

function compile(def: WorkflowDefinition): Graph {
  const fail: Fail = (code, message, details = {}) =>
    new WorkflowDefinitionError(code, `workflow ${def.name} v${def.version}: ${message}`, {
      details: { workflow: def.name, version: def.version, ...details },
    });
  const nodes = indexNodes(def, fail);
  const ids = [...nodes.keys()].sort(byString);
  const { down, up } = indexEdges(def, nodes, ids, fail);
  checkRoleCaps(def, fail);
  const roots = ids.filter((id) => (up.get(id) ?? []).length === 0);
  checkAcyclic(ids, roots, down, fail);
  return { def, nodes, ids, topo: topologicalOrder(ids, down, up), down, up, roots };
}

function indexNodes(def: WorkflowDefinition, fail: Fail): Map<string, NodeDefinition> {
  const nodes = new Map<string, NodeDefinition>();
  for (const node of def.nodes) {
    if (nodes.has(node.id))
      throw fail("dag.duplicate_node", `node id ${node.id} is defined twice`, { node: node.id });
    nodes.set(node.id, node);
  }
  return nodes;
}

/** Edges by upstream (`down`, sorted by `to`) and by downstream (`up`, sorted by `from`). */
function indexEdges(
  def: WorkflowDefinition,
  nodes: ReadonlyMap<string, NodeDefinition>,
  ids: readonly string[],
  fail: Fail,
): { down: Edges; up: Edges } {
  const down = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const up = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const seen = new Set<string>();
  for (const edge of def.edges) {
    checkEdge(edge, nodes, seen, fail);
    down.get(edge.from)?.push(edge);
    up.get(edge.to)?.push(edge);
  }
  for (const list of down.values()) list.sort((a, b) => byString(a.to, b.to));
  for (const list of up.values()) list.sort((a, b) => byString(a.from, b.from));
  return { down, up };
}

function checkEdge(
  edge: EdgeDefinition,
  nodes: ReadonlyMap<string, NodeDefinition>,
  seen: Set<string>,
  fail: Fail,
): void {
  for (const end of [edge.from, edge.to]) {
    if (!nodes.has(end))
      throw fail("dag.unknown_node", `edge ${edge.from} -> ${edge.to} names unknown node ${end}`, {
        node: end,
        edge: { from: edge.from, to: edge.to },
      });
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
}

function checkRoleCaps(def: WorkflowDefinition, fail: Fail): void {
  const roles = new Set(def.nodes.map((n) => n.role));
  for (const [role, cap] of Object.entries(def.concurrency?.perRole ?? {})) {
    if (!roles.has(role))
      throw fail(
        "dag.bad_concurrency",
        `concurrency.perRole names role ${role} (cap ${cap}) that no node has`,
        { role },
      );
  }
}

function checkAcyclic(ids: readonly string[], roots: readonly string[], down: Edges, fail: Fail) {
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
}

/** A cycle as a closed path (first node repeated at the end), or undefined. */
function findCycle(ids: readonly string[], down: Edges): string[] | undefined {
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

function topologicalOrder(ids: readonly string[], down: Edges, up: Edges): string[] {
  const indegree = new Map(ids.map((id) => [id, (up.get(id) ?? []).length]));
  const ready = ids.filter((id) => indegree.get(id) === 0);
  const order: string[] = [];
  const next = () => ready.sort(byString).shift();
  for (let id = next(); id !== undefined; id = next()) {
    order.push(id);
    for (const edge of down.get(id) ?? []) {
      const left = (indegree.get(edge.to) ?? 0) - 1;
      indegree.set(edge.to, left);
      if (left === 0) ready.push(edge.to);
    }
  }
  return order;
}

/** The node and every node reachable from it, sorted. */
export function descendantsOf(def: WorkflowDefinition, nodeId: string): string[] {
  const graph = graphOf(def);
  requireNode(graph, nodeId);
  return [...scopeOf(graph, nodeId)].sort(byString);
}

/** The node and every node reachable from it. */
export function scopeOf(graph: Graph, nodeId: string): Set<string> {
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

export function requireNode(graph: Graph, nodeId: string): NodeDefinition {
  const node = graph.nodes.get(nodeId);
  if (!node)
    throw new DagRequestError(
      "dag.unknown_node",
      `workflow ${graph.def.name} v${graph.def.version} has no node ${nodeId}`,
      { details: { node: nodeId } },
    );
  return node;
}
