import { Graph, layout } from "@dagrejs/dagre";
import type { RunEdgeView, RunNodeView } from "../views";

/** A node placed by dagre: its centre and size. */
export interface PlacedNode {
  readonly node: RunNodeView;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface PlacedEdge {
  readonly edge: RunEdgeView;
  readonly points: readonly { readonly x: number; readonly y: number }[];
  /** Centre and size of the condition's label, when the edge has one. */
  readonly label?: {
    readonly x: number;
    readonly y: number;
    readonly width: number;
    readonly height: number;
  };
}

export interface DagLayout {
  readonly width: number;
  readonly height: number;
  readonly nodes: readonly PlacedNode[];
  readonly edges: readonly PlacedEdge[];
  /** Edges whose ends are not nodes of the run (not drawn). */
  readonly dangling: readonly RunEdgeView[];
}

export const NODE_HEIGHT = 84;
const MIN_NODE_WIDTH = 150;
const MAX_NODE_WIDTH = 300;
/** Longest text a node shows on one line; longer text is cut and shown whole in its tooltip. */
export const MAX_LINE_CHARS = 36;

/** The lines a node shows, in order: id, role, state, attempt and duration. */
export function nodeLines(node: RunNodeView, duration: string): readonly string[] {
  const cut = (s: string) => (s.length > MAX_LINE_CHARS ? `${s.slice(0, MAX_LINE_CHARS - 1)}…` : s);
  const state =
    node.agent?.state === "BLOCKED"
      ? "BLOCKED"
      : node.agent?.state === "QUEUED"
        ? `${node.state} · queued`
        : node.state;
  return [cut(node.id), cut(node.role), cut(state), `attempt ${node.attempt} · ${duration}`];
}

function nodeWidth(lines: readonly string[]): number {
  const longest = Math.max(...lines.map((l) => l.length));
  return Math.min(MAX_NODE_WIDTH, Math.max(MIN_NODE_WIDTH, Math.ceil(longest * 7.6 + 28)));
}

function labelSize(condition: string): { width: number; height: number } {
  return { width: condition.length * 6.8 + 14, height: 20 };
}

/** The lines each node shows (a run's: `nodeLines`). */
export type NodeLines = (node: RunNodeView) => readonly string[];

/**
 * Lays the run's DAG out left to right with dagre; `duration` formats a node's duration, and
 * `lines` says what a node shows (a run's node: `nodeLines`), which sizes it.
 */
export function layoutDag(
  nodes: readonly RunNodeView[],
  edges: readonly RunEdgeView[],
  duration: (node: RunNodeView) => string,
  lines: NodeLines = (node) => nodeLines(node, duration(node)),
): DagLayout {
  const g = new Graph({ multigraph: true });
  g.setGraph({ rankdir: "LR", nodesep: 28, ranksep: 56, edgesep: 16, marginx: 16, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const node of nodes) {
    g.setNode(node.id, { width: nodeWidth(lines(node)), height: NODE_HEIGHT });
  }
  const ids = new Set(nodes.map((n) => n.id));
  const drawn = edges.filter((e) => ids.has(e.from) && ids.has(e.to));
  drawn.forEach((edge, i) => {
    const label = edge.condition ? { ...labelSize(edge.condition), labelpos: "c" as const } : {};
    g.setEdge(edge.from, edge.to, label, `e${i}`);
  });
  layout(g);
  return {
    width: g.graph().width ?? 0,
    height: g.graph().height ?? 0,
    nodes: nodes.map((node) => {
      const n = g.node(node.id);
      return { node, x: n.x ?? 0, y: n.y ?? 0, width: n.width, height: n.height };
    }),
    edges: drawn.map((edge, i) => placeEdge(edge, g.edge(edge.from, edge.to, `e${i}`))),
    dangling: edges.filter((e) => !drawn.includes(e)),
  };
}

function placeEdge(
  edge: RunEdgeView,
  label: { points?: { x: number; y: number }[]; x?: number; y?: number },
): PlacedEdge {
  const points = label.points ?? [];
  if (edge.condition && label.x !== undefined && label.y !== undefined) {
    return { edge, points, label: { x: label.x, y: label.y, ...labelSize(edge.condition) } };
  }
  return { edge, points };
}
