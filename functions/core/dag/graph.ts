import { deepFreeze } from "../freeze";
import {
  type EdgeDefinition,
  type NodeDefinition,
  parseDefinition,
  type WorkflowDefinition,
  type WorkflowDefinitionInput,
} from "./definition";
import { DagIntegrityError, DagRequestError } from "./errors";
import { checkedParts, type KnownNames, type LoopOf } from "./validate";
import { byString } from "./values";

/**
 * A workflow definition compiled into the graph the engine walks: nodes by id, forward edges in
 * both directions, roots, a topological order and the loops, after the structural checks a
 * schema cannot make (./validate).
 */
export interface Graph {
  readonly def: WorkflowDefinition;
  readonly nodes: ReadonlyMap<string, NodeDefinition>;
  /** Node ids, sorted (the deterministic order of every pass). */
  readonly ids: readonly string[];
  /** Node ids in topological order of the forward edges (ties by id). */
  readonly topo: readonly string[];
  /** Forward edges (loop edges are in `loops`), by upstream and by downstream. */
  readonly down: ReadonlyMap<string, readonly EdgeDefinition[]>;
  readonly up: ReadonlyMap<string, readonly EdgeDefinition[]>;
  readonly roots: readonly string[];
  /** Loops by their last node. */
  readonly loops: ReadonlyMap<string, LoopOf>;
  /** The loop (its last node) each node of a loop's body belongs to. */
  readonly loopOfNode: ReadonlyMap<string, string>;
}

type Edges = ReadonlyMap<string, readonly EdgeDefinition[]>;

/** What carries out a node: a role (task), a role per item (map), a wait, a child run. */
export type NodeKind = "task" | "map" | "wait" | "child";

export function kindOf(node: NodeDefinition): NodeKind {
  if (node.wait) return "wait";
  if (node.workflow) return "child";
  return node.map ? "map" : "task";
}

/** The role of a task or map node (validated present on every node that has a role's work). */
export function roleOf(node: NodeDefinition): string {
  if (node.role === undefined)
    throw new DagIntegrityError(
      "dag.no_role",
      `node ${node.id} is a ${kindOf(node)} node: no role carries it out`,
      { details: { node: node.id } },
    );
  return node.role;
}

const compiled = new WeakMap<object, Graph>();

/**
 * Validate a workflow definition and return it with defaults applied, deep-frozen. Throws
 * WorkflowDefinitionError: dag.invalid_definition or dag.bad_concurrency with every schema issue;
 * else, when the structure is wrong, every structural problem at once (./validate), the first
 * one's code on the error. With `known.roles`, a node's role must be one of them.
 */
export function defineWorkflow(
  input: WorkflowDefinitionInput,
  known: KnownNames = {},
): WorkflowDefinition {
  const def = parseDefinition(input);
  const graph = compile(def, known);
  deepFreeze(def);
  compiled.set(def, graph);
  return def;
}

/** The graph of a definition (compiled once by defineWorkflow, else validated and compiled now). */
export function graphOf(def: WorkflowDefinition): Graph {
  return compiled.get(def) ?? compile(parseDefinition(def));
}

function compile(def: WorkflowDefinition, known: KnownNames = {}): Graph {
  const { nodes, ids, down, up, roots, loops } = checkedParts(def, known);
  const loopOfNode = new Map<string, string>();
  for (const loop of loops.values()) for (const id of loop.body) loopOfNode.set(id, loop.exit);
  const topo = topologicalOrder(ids, down, up);
  return { def, nodes, ids, topo, down, up, roots, loops, loopOfNode };
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
