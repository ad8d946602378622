import type { RunNodeView } from "../views";
import type { DagLayout, NodeLines, PlacedEdge, PlacedNode } from "./dag-layout";
import { nodeLines } from "./dag-layout";
import { attr, escapeHtml } from "./html";

interface Paint {
  readonly fill: string;
  readonly stroke: string;
}

/** A node's colours by state; the legend lists them in this order. */
export const STATE_PAINT: Readonly<Record<string, Paint>> = {
  COMPLETED: { fill: "#d3f0d8", stroke: "#2e7d32" },
  RUNNING: { fill: "#d6e6fb", stroke: "#1f5fbf" },
  FAILED: { fill: "#f9d4d2", stroke: "#c62828" },
  CANCELLED: { fill: "#e4e4e4", stroke: "#7a7a7a" },
  SKIPPED: { fill: "#e4e4e4", stroke: "#7a7a7a" },
  DEGRADED: { fill: "#fbe7bf", stroke: "#c77c00" },
  PENDING: { fill: "#ffffff", stroke: "#8a8a8a" },
  READY: { fill: "#ffffff", stroke: "#8a8a8a" },
  NEEDS_HUMAN: { fill: "#e8dcf5", stroke: "#6a3d9a" },
  BLOCKED: { fill: "#fff3c4", stroke: "#b08800" },
};
const OTHER_PAINT: Paint = { fill: "#ffffff", stroke: "#333333" };

export function paintOf(state: string): Paint {
  return Object.hasOwn(STATE_PAINT, state) ? (STATE_PAINT[state] ?? OTHER_PAINT) : OTHER_PAINT;
}

const n1 = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "0");

/** A path through dagre's points, rounded at the bends (quadratic curves through the midpoints). */
export function edgePath(points: readonly { readonly x: number; readonly y: number }[]): string {
  const [first, ...rest] = points;
  if (!first) return "";
  const last = rest.pop();
  let d = `M${n1(first.x)},${n1(first.y)}`;
  rest.forEach((p, i) => {
    const next = rest[i + 1] ?? last ?? p;
    d += ` Q${n1(p.x)},${n1(p.y)} ${n1((p.x + next.x) / 2)},${n1((p.y + next.y) / 2)}`;
  });
  if (last) d += ` L${n1(last.x)},${n1(last.y)}`;
  return d;
}

function renderEdge(placed: PlacedEdge): string {
  const { edge, label } = placed;
  const text =
    edge.condition && label
      ? `<rect class="edge-label-bg" x="${n1(label.x - label.width / 2)}" y="${n1(label.y - label.height / 2)}" width="${n1(label.width)}" height="${n1(label.height)}" rx="4" fill="#fffbe6" stroke="#c9b458"/><text class="edge-label" x="${n1(label.x)}" y="${n1(label.y + 4)}" text-anchor="middle" font-size="12">${escapeHtml(edge.condition)}</text>`
      : "";
  const dashed = edge.loop ? ' stroke-dasharray="6 4"' : "";
  return `<g class="edge"${attr("data-from", edge.from)}${attr("data-to", edge.to)}${attr("data-condition", edge.condition)}${attr("data-loop", edge.loop ? "true" : undefined)}><path d="${edgePath(placed.points)}" fill="none" stroke="#5b6570" stroke-width="1.6"${dashed} marker-end="url(#arrow)"/>${text}</g>`;
}

function nodeTooltip(node: RunNodeView, duration: string): string {
  const parts = [
    `${node.id} (${node.role})`,
    `${node.state}, attempt ${node.attempt}, ${duration}`,
  ];
  if (node.error) parts.push(`${node.error.code}: ${node.error.message}`);
  return parts.join("\n");
}

/**
 * How a node's kind is drawn: a map as a stack of cards (one per item), a wait with a dotted
 * border, a child run with a double border; a task as a plain card.
 */
function kindShape(
  placed: PlacedNode,
  paint: Paint,
): { behind: string; inside: string; dash: string } {
  const { node, x, y, width, height } = placed;
  const left = x - width / 2;
  const top = y - height / 2;
  const box = (dx: number, dy: number, w: number, h: number, extra = "") =>
    `<rect x="${n1(left + dx)}" y="${n1(top + dy)}" width="${n1(w)}" height="${n1(h)}" rx="8" fill="${paint.fill}" stroke="${paint.stroke}" stroke-width="1.4"${extra}/>`;
  if (node.kind === "map")
    return {
      behind: `${box(8, -8, width, height)}${box(4, -4, width, height)}`,
      inside: "",
      dash: "",
    };
  if (node.kind === "child")
    return { behind: "", inside: box(4, 4, width - 8, height - 8, ' fill-opacity="0"'), dash: "" };
  if (node.kind === "wait") return { behind: "", inside: "", dash: ' stroke-dasharray="2 3"' };
  return { behind: "", inside: "", dash: "" };
}

function renderNode(placed: PlacedNode, lineTexts: readonly string[], tooltip: string): string {
  const { node, x, y, width, height } = placed;
  const paint = paintOf(node.agent?.state === "BLOCKED" ? "BLOCKED" : node.state);
  const left = x - width / 2;
  const top = y - height / 2;
  const shape = kindShape(placed, paint);
  const dashed = paint === OTHER_PAINT ? ' stroke-dasharray="5 3"' : shape.dash;
  const lines = lineTexts.map((line, i) => {
    const weight = i === 0 || i === 2 ? ' font-weight="700"' : "";
    const cls = ["node-id", "node-role", "node-state", "node-attempt"][i];
    return `<text class="${cls}" x="${n1(left + 12)}" y="${n1(top + 22 + i * 17)}" font-size="${i === 0 ? 13 : 12}"${weight}>${escapeHtml(line)}</text>`;
  });
  return `<g class="node"${attr("data-node-id", node.id)}${attr("data-state", node.state)}${attr("data-agent-state", node.agent?.state)}${attr("data-kind", node.kind)}><title>${escapeHtml(tooltip)}</title>${shape.behind}<rect x="${n1(left)}" y="${n1(top)}" width="${n1(width)}" height="${n1(height)}" rx="8" fill="${paint.fill}" stroke="${paint.stroke}" stroke-width="2"${dashed}/>${shape.inside}${lines.join("")}</g>`;
}

/**
 * The DAG as an inline SVG: one `<g data-node-id data-state data-kind>` per node, edges with
 * arrowheads (a loop's way back dashed). A run's nodes show `nodeLines`; `lines` replaces them
 * (a definition's graph, drawn before any run). The layout is made with the same `lines`.
 */
export function renderDagSvg(
  dag: DagLayout,
  duration: (node: RunNodeView) => string,
  lines?: NodeLines,
  label = "The run's DAG",
): string {
  const defs = `<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5b6570"/></marker></defs>`;
  const edges = dag.edges.map(renderEdge).join("\n");
  const nodes = dag.nodes
    .map((n) =>
      lines
        ? renderNode(n, lines(n.node), lines(n.node).join("\n"))
        : renderNode(n, nodeLines(n.node, duration(n.node)), nodeTooltip(n.node, duration(n.node))),
    )
    .join("\n");
  const w = n1(dag.width);
  const h = n1(dag.height);
  return `<svg class="dag-svg" xmlns="http://www.w3.org/2000/svg" role="img"${attr("aria-label", label)} width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="system-ui, sans-serif">
${defs}
${edges}
${nodes}
</svg>`;
}

/** The colour legend beside the DAG. */
export function renderLegend(): string {
  const groups: [string, string][] = [
    ["COMPLETED", "COMPLETED"],
    ["RUNNING", "RUNNING"],
    ["FAILED", "FAILED"],
    ["CANCELLED", "CANCELLED / SKIPPED"],
    ["DEGRADED", "DEGRADED"],
    ["PENDING", "PENDING / READY"],
    ["NEEDS_HUMAN", "NEEDS_HUMAN"],
    ["BLOCKED", "BLOCKED"],
  ];
  const items = groups.map(([state, text]) => {
    const p = paintOf(state);
    return `<li><span class="swatch" style="background:${p.fill};border-color:${p.stroke}"></span>${escapeHtml(text)}</li>`;
  });
  return `<ul class="legend" aria-label="Node colours">${items.join("")}</ul>`;
}
