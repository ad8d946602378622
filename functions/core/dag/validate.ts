import type {
  EdgeDefinition,
  Loop,
  NodeDefinition,
  OutputRef,
  WorkflowDefinition,
} from "./definition";
import { WorkflowDefinitionError } from "./errors";
import { byString } from "./values";

/**
 * The structural checks of a definition, the ones a schema cannot make. Every problem is found
 * before anything is thrown: a definition is refused once, with a WorkflowDefinitionError whose
 * code is the first problem's and whose `details.problems` lists them all (code, message and
 * what it concerns). Codes: dag.duplicate_node, dag.unknown_node, dag.unknown_role,
 * dag.bad_node, dag.self_loop, dag.duplicate_edge, dag.bad_concurrency, dag.no_root, dag.cycle,
 * dag.unreachable, dag.bad_loop, dag.bad_quorum, dag.bad_map_path, dag.bad_child_input,
 * dag.bad_plan_path.
 */

export type Edges = ReadonlyMap<string, readonly EdgeDefinition[]>;

/** A loop of the definition: its edge back, its first and last node, and its body. */
export interface LoopOf {
  readonly head: string;
  readonly exit: string;
  readonly spec: Loop;
  /** The nodes on the paths from `head` to `exit`, both included, sorted. */
  readonly body: readonly string[];
}

/** Names the definition may use besides its own: the roles that exist. */
export interface KnownNames {
  readonly roles?: Iterable<string>;
}

export interface Problem {
  readonly code: string;
  readonly message: string;
  readonly details: Record<string, unknown>;
}

/** What the checks found and built: nodes by id, forward edges both ways, roots, loops. */
export interface CheckedParts {
  readonly nodes: ReadonlyMap<string, NodeDefinition>;
  readonly ids: readonly string[];
  readonly down: Edges;
  readonly up: Edges;
  readonly roots: readonly string[];
  /** Loops by their last node. */
  readonly loops: ReadonlyMap<string, LoopOf>;
}

/** The definition's parts, or WorkflowDefinitionError naming every structural problem. */
export function checkedParts(def: WorkflowDefinition, known: KnownNames = {}): CheckedParts {
  const problems: Problem[] = [];
  const add = (code: string, message: string, details: Record<string, unknown> = {}) =>
    problems.push({ code, message, details });
  const nodes = indexNodes(def, add);
  const ids = [...nodes.keys()].sort(byString);
  const { down, up, loopEdges } = indexEdges(def, nodes, ids, add);
  checkNodes(def, up, known, add);
  checkRoleCaps(def, add);
  const roots = ids.filter((id) => (up.get(id) ?? []).length === 0);
  checkAcyclic(ids, roots, down, add);
  const loops = compileLoops(loopEdges, down, up, add);
  checkReferences(def, nodes, up, add);
  if (problems.length > 0) throw definitionError(def, problems);
  return { nodes, ids, down, up, roots, loops };
}

type Add = (code: string, message: string, details?: Record<string, unknown>) => void;

function definitionError(def: WorkflowDefinition, problems: Problem[]): WorkflowDefinitionError {
  const [first] = problems;
  return new WorkflowDefinitionError(
    first?.code ?? "dag.invalid_definition",
    `workflow ${def.name} v${def.version}: ${problems.map((p) => p.message).join("; ")}`,
    {
      details: {
        workflow: def.name,
        version: def.version,
        ...first?.details,
        problems: problems.map((p) => ({ code: p.code, message: p.message, ...p.details })),
      },
    },
  );
}

function indexNodes(def: WorkflowDefinition, add: Add): Map<string, NodeDefinition> {
  const nodes = new Map<string, NodeDefinition>();
  for (const node of def.nodes) {
    if (nodes.has(node.id))
      add("dag.duplicate_node", `node id ${node.id} is defined twice`, { node: node.id });
    else nodes.set(node.id, node);
  }
  return nodes;
}

/** Forward edges by upstream (`down`, sorted by `to`) and by downstream (`up`, sorted by
 * `from`), and the loop edges apart; an edge with a problem is left out. */
function indexEdges(
  def: WorkflowDefinition,
  nodes: ReadonlyMap<string, NodeDefinition>,
  ids: readonly string[],
  add: Add,
): { down: Edges; up: Edges; loopEdges: EdgeDefinition[] } {
  const down = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const up = new Map<string, EdgeDefinition[]>(ids.map((id) => [id, []]));
  const loopEdges: EdgeDefinition[] = [];
  const seen = new Set<string>();
  for (const edge of def.edges) {
    if (!edgeIsSound(edge, nodes, seen, add)) continue;
    if (edge.loop) loopEdges.push(edge);
    else {
      down.get(edge.from)?.push(edge);
      up.get(edge.to)?.push(edge);
    }
  }
  for (const list of down.values()) list.sort((a, b) => byString(a.to, b.to));
  for (const list of up.values()) list.sort((a, b) => byString(a.from, b.from));
  return { down, up, loopEdges };
}

function edgeIsSound(
  edge: EdgeDefinition,
  nodes: ReadonlyMap<string, NodeDefinition>,
  seen: Set<string>,
  add: Add,
): boolean {
  const name = `edge ${edge.from} -> ${edge.to}`;
  const unknown = [edge.from, edge.to].filter((end) => !nodes.has(end));
  for (const end of new Set(unknown))
    add("dag.unknown_node", `${name} names unknown node ${end}`, {
      node: end,
      edge: { from: edge.from, to: edge.to },
    });
  if (unknown.length > 0) return false;
  if (edge.from === edge.to && !edge.loop) {
    add("dag.self_loop", `${name} is a self-loop (a node that repeats needs a loop edge)`, {
      node: edge.from,
    });
    return false;
  }
  const key = `${edge.from}\u0000${edge.to}`;
  if (seen.has(key)) {
    add(
      "dag.duplicate_edge",
      `${name} is defined twice (it would count twice in the in-degree of ${edge.to}; merge the conditions into one edge with "in")`,
      { edge: { from: edge.from, to: edge.to } },
    );
    return false;
  }
  seen.add(key);
  return true;
}

/** What kind each node is, that its roles exist, and that its join fits its inputs. */
function checkNodes(def: WorkflowDefinition, up: Edges, known: KnownNames, add: Add): void {
  const roles = known.roles === undefined ? undefined : new Set(known.roles);
  for (const node of def.nodes) {
    const kinds = [
      node.role !== undefined && "role",
      node.wait && "wait",
      node.workflow && "workflow",
    ].filter((k): k is string => typeof k === "string");
    if (kinds.length !== 1)
      add(
        "dag.bad_node",
        `node ${node.id} ${kinds.length === 0 ? "has none" : `has ${kinds.join(" and ")}`} of role, wait and workflow: a node is a task (role), a wait (wait) or a child run (workflow)`,
        { node: node.id },
      );
    if (node.map && node.role === undefined)
      add("dag.bad_node", `node ${node.id} has map but no role to run each item`, {
        node: node.id,
      });
    if (roles && node.role !== undefined && !roles.has(node.role))
      add(
        "dag.unknown_role",
        `node ${node.id} names role ${node.role}, which is not one of the known roles (${[...roles].sort(byString).join(", ") || "none"})`,
        { node: node.id, role: node.role },
      );
    checkQuorum(node, (up.get(node.id) ?? []).length, add);
  }
}

function checkQuorum(node: NodeDefinition, inputs: number, add: Add): void {
  if (node.join === "quorum" && node.quorum === undefined)
    add("dag.bad_quorum", `node ${node.id} joins by quorum but gives no quorum`, {
      node: node.id,
    });
  if (node.join !== "quorum" && node.quorum !== undefined)
    add("dag.bad_quorum", `node ${node.id} gives a quorum but joins by ${node.join}`, {
      node: node.id,
    });
  if (node.join === "quorum" && node.quorum !== undefined && node.quorum > inputs)
    add(
      "dag.bad_quorum",
      `node ${node.id} needs a quorum of ${node.quorum} but has ${inputs} incoming edge${inputs === 1 ? "" : "s"}`,
      { node: node.id, quorum: node.quorum, inputs },
    );
}

function checkRoleCaps(def: WorkflowDefinition, add: Add): void {
  const roles = new Set(def.nodes.map((n) => n.role));
  for (const [role, cap] of Object.entries(def.concurrency?.perRole ?? {})) {
    if (!roles.has(role))
      add(
        "dag.bad_concurrency",
        `concurrency.perRole names role ${role} (cap ${cap}) that no node has`,
        { role },
      );
  }
}

/** A root to start from, no cycle of forward edges, and every node reachable from a root. */
function checkAcyclic(ids: readonly string[], roots: readonly string[], down: Edges, add: Add) {
  const cycle = findCycle(ids, down);
  if (roots.length === 0) {
    add(
      "dag.no_root",
      ids.length === 0
        ? "has no nodes, so no root node to start from"
        : `has no root node: every node has an upstream (${ids.join(", ")})${cycle ? `; cycle ${cycle.join(" -> ")}` : ""}`,
      { cycle },
    );
    return;
  }
  if (cycle)
    add(
      "dag.cycle",
      `has a cycle: ${cycle.join(" -> ")} (a repeat is a loop edge: { from, to, loop: { until, maxRounds } })`,
      { cycle, nodes: [...new Set(cycle)].sort(byString) },
    );
  const reached = reach(roots, down, "to");
  const unreachable = ids.filter((id) => !reached.has(id));
  if (unreachable.length > 0)
    add(
      "dag.unreachable",
      `node${unreachable.length === 1 ? "" : "s"} ${unreachable.join(", ")} cannot be reached from a root`,
      { nodes: unreachable },
    );
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

/**
 * The nodes reachable from `starts` along `edges` (`to`: downstream, `from`: upstream), through
 * the nodes of `within` only when it is given.
 */
export function reach(
  starts: Iterable<string>,
  edges: Edges,
  toward: "to" | "from",
  within?: ReadonlySet<string>,
): Set<string> {
  const inside = (id: string) => within === undefined || within.has(id);
  const seen = new Set<string>([...starts].filter(inside));
  // Breadth first; read by index, as shifting a long queue moves every node left in it.
  const queue = [...seen];
  for (let next = 0; next < queue.length; next++) {
    for (const edge of edges.get(queue[next] as string) ?? []) {
      const id = edge[toward];
      if (!seen.has(id) && inside(id)) {
        seen.add(id);
        queue.push(id);
      }
    }
  }
  return seen;
}

/**
 * Each loop edge closes a body (the nodes between its `to` and its `from`); bodies do not share
 * nodes, and only a loop's last node has edges leaving its body (what leaves earlier would see
 * every round end).
 */
function compileLoops(
  loopEdges: readonly EdgeDefinition[],
  down: Edges,
  up: Edges,
  add: Add,
): Map<string, LoopOf> {
  const loops = new Map<string, LoopOf>();
  const owner = new Map<string, string>();
  for (const edge of loopEdges) {
    const name = `loop edge ${edge.from} -> ${edge.to}`;
    if (!edge.loop) continue;
    // What reaches the last node, once per loop edge; the body is what the first node reaches
    // among it (a node on a path from the first to the last has every node before it upstream).
    const upstream = reach([edge.from], up, "from");
    const between = reach([edge.to], down, "to", upstream);
    if (!between.has(edge.from)) {
      add("dag.bad_loop", `${name}: ${edge.to} is not upstream of ${edge.from}, so nothing loops`, {
        edge: { from: edge.from, to: edge.to },
      });
      continue;
    }
    if (loops.has(edge.from)) {
      add("dag.bad_loop", `${name}: ${edge.from} already ends another loop`, { node: edge.from });
      continue;
    }
    const body = [...between].sort(byString);
    const shared = body.filter((id) => owner.has(id));
    if (shared.length > 0)
      add("dag.bad_loop", `${name}: its body shares ${shared.join(", ")} with another loop`, {
        nodes: shared,
      });
    for (const id of body) {
      owner.set(id, edge.from);
      if (id === edge.from) continue;
      for (const out of down.get(id) ?? [])
        if (!between.has(out.to))
          add(
            "dag.bad_loop",
            `${name}: edge ${id} -> ${out.to} leaves the loop's body before its last node ${edge.from}`,
            { edge: { from: id, to: out.to } },
          );
    }
    loops.set(edge.from, { head: edge.to, exit: edge.from, spec: edge.loop, body });
  }
  return loops;
}

/** A map's list, a child's input and its plan come from nodes upstream of the node that reads them. */
function checkReferences(
  def: WorkflowDefinition,
  nodes: ReadonlyMap<string, NodeDefinition>,
  up: Edges,
  add: Add,
): void {
  for (const node of def.nodes) {
    const refs: [string, OutputRef, string][] = [];
    const items = node.map?.items;
    if (items && "input" in items) checkInputList(def, node.id, items.input, add);
    else if (items) refs.push(["dag.bad_map_path", items, "map.items"]);
    for (const [field, ref] of Object.entries(node.workflow?.input ?? {}))
      refs.push(["dag.bad_child_input", ref, `workflow.input.${field}`]);
    if (node.workflow?.plan) refs.push(["dag.bad_plan_path", node.workflow.plan, "workflow.plan"]);
    if (refs.length === 0) continue;
    const upstream = reach([node.id], up, "from");
    upstream.delete(node.id);
    for (const [code, ref, where] of refs) {
      if (upstream.has(ref.node)) continue;
      add(
        code,
        `node ${node.id}: ${where} reads node ${ref.node}, which ${nodes.has(ref.node) ? "is not upstream of it" : "does not exist"}`,
        { node: node.id, from: ref.node },
      );
    }
  }
}

/**
 * A map over a list in the run's input reads a field the declared input leaves free: a declared
 * property is a string, number or boolean, never a list, and `additionalProperties: false` lets
 * no other field in.
 */
function checkInputList(def: WorkflowDefinition, id: string, path: string, add: Add): void {
  const spec = def.input;
  const field = path.split(".")[0] ?? path;
  if (!spec) return;
  const declared = spec.properties[field];
  if (declared)
    add(
      "dag.bad_map_path",
      `node ${id}: map.items reads the run input's ${field}, which the workflow's input declares a ${declared.type}, not a list`,
      { node: id, input: path },
    );
  else if (spec.additionalProperties === false)
    add(
      "dag.bad_map_path",
      `node ${id}: map.items reads the run input's ${field}, which the workflow's input does not allow (additionalProperties is false)`,
      { node: id, input: path },
    );
}
