import type { RunNodeView, RunView } from "../views";
import { layoutDag } from "./dag-layout";
import { renderDagSvg, renderLegend } from "./dag-svg";
import { formatDuration, formatOffset, formatTime } from "./format";
import { type FormContext, renderRunForms } from "./forms";
import { attr, escapeHtml, link, runHref, traceHref } from "./html";
import { badge, fact, renderTable } from "./page";
import { redactPersonal } from "./redact";

/** A node's duration: recorded, or measured from its start and end, or "running"/"—". */
export function nodeDuration(node: RunNodeView): string {
  if (node.durationMs !== undefined) return formatDuration(node.durationMs);
  const start = node.startedAt ? Date.parse(node.startedAt) : Number.NaN;
  const end = node.endedAt ? Date.parse(node.endedAt) : Number.NaN;
  if (!Number.isNaN(start) && !Number.isNaN(end)) return formatDuration(end - start);
  return node.state === "RUNNING" ? "running" : "—";
}

function renderFacts(run: RunView): string {
  const traceLink = (id: string | undefined) =>
    id ? `<code>${link(traceHref(id), id)}</code>` : '<span class="none">none</span>';
  return `<ul class="facts">
${fact("workflow", `${escapeHtml(run.workflow.name)} v${escapeHtml(run.workflow.version)}`)}
${fact("status", `<span data-run-status="${escapeHtml(run.status)}">${badge(run.status)}</span>`)}
${fact("generation", escapeHtml(run.generation))}
${fact("correlation", traceLink(run.correlationId))}
${fact("task", traceLink(run.taskId))}
${run.parentRunId ? fact("parent run", runLink(run.parentRunId)) : ""}
${run.childRuns?.length ? fact("child runs", run.childRuns.map((c) => `${runLink(c.runId)} (node <code>${escapeHtml(c.nodeId)}</code>)`).join(", ")) : ""}
</ul>`;
}

const runLink = (runId: string) => `<code>${link(runHref(runId), runId)}</code>`;

function renderDag(run: RunView): string {
  if (run.nodes.length === 0) return '<p class="none">This run has no nodes.</p>';
  const dag = layoutDag(run.nodes, run.edges, nodeDuration);
  const dangling = dag.dangling.map(
    (e) => `<li><code>${escapeHtml(e.from)}</code> → <code>${escapeHtml(e.to)}</code></li>`,
  );
  const note =
    dangling.length > 0
      ? `<p>Edges not drawn (an end is not a node of this run):</p><ul>${dangling.join("")}</ul>`
      : "";
  return `<div class="dag">${renderDagSvg(dag, nodeDuration)}</div>\n${renderLegend()}\n${note}`;
}

/**
 * A node's state: the DAG's, and for a RUNNING node what its agent reported (queued, started,
 * BLOCKED on a confirmation with its question and deadline).
 */
export function nodeState(n: RunNodeView): string {
  const agent = n.agent;
  if (!agent) return badge(n.state);
  const tag = `<span class="agent-state"${attr("data-agent-state", agent.state)}>`;
  if (agent.state === "BLOCKED")
    return `${badge("BLOCKED")} ${tag}waits for a confirmation until ${escapeHtml(formatTime(agent.confirmBy))}: ${escapeHtml(agent.question ?? "")}</span>`;
  if (agent.state === "RUNNING")
    return `${badge("RUNNING")} ${tag}started ${escapeHtml(formatTime(agent.since))}</span>`;
  return `${badge(n.state)} ${tag}queued: the agent has not started</span>`;
}

function renderNodeTable(run: RunView): string {
  const rows = run.nodes.map((n) => [
    `<code>${escapeHtml(n.id)}</code>`,
    escapeHtml(n.role),
    nodeState(n),
    escapeHtml(n.attempt),
    escapeHtml(formatTime(n.startedAt)),
    escapeHtml(formatTime(n.endedAt)),
    escapeHtml(nodeDuration(n)),
    n.error ? `<code>${escapeHtml(n.error.code)}</code> ${escapeHtml(n.error.message)}` : "",
  ]);
  const headers = ["node", "role", "state", "attempt", "started", "ended", "duration", "error"];
  const attrs = (i: number) => attr("data-node-row", run.nodes[i]?.id);
  return renderTable(headers, rows, "No nodes.", attrs);
}

/** The run's timeline, each step's time as an offset from the first step. */
export function renderTimeline(timeline: RunView["timeline"]): string {
  const times = timeline.map((t) => Date.parse(t.at)).filter((t) => !Number.isNaN(t));
  const origin = times.length > 0 ? Math.min(...times) : undefined;
  const rows = timeline.map((t) => [
    `<span title="${escapeHtml(formatTime(t.at))}">${escapeHtml(formatOffset(t.at, origin))}</span>`,
    escapeHtml(t.event),
    t.nodeId ? `<code>${escapeHtml(t.nodeId)}</code>` : "",
    escapeHtml(t.generation ?? ""),
    escapeHtml(t.cause),
  ]);
  const headers = ["offset", "event", "node", "generation", "cause"];
  return renderTable(headers, rows, "The run recorded no steps.", () => ' class="timeline-step"');
}

/** A JSON value as the page shows it: personal fields redacted (./redact), indented. */
export function jsonBlock(value: unknown, attrs = ""): string {
  return `<pre class="json"${attrs}>${escapeHtml(JSON.stringify(redactPersonal(value), null, 2))}</pre>`;
}

/** What each released node was given and what it answered (the run's input first). */
export function renderNodeData(run: RunView): string {
  const runInput =
    run.input === undefined
      ? ""
      : `<h3>Run input</h3>\n${jsonBlock(run.input, " data-run-input")}\n`;
  const shown = run.nodes.filter((n) => n.input !== undefined || n.output !== undefined);
  const nodes = shown.map((n) => {
    const input =
      n.input === undefined ? "" : `<p>Input</p>${jsonBlock(n.input, ' data-io="input"')}`;
    const output =
      n.output === undefined ? "" : `<p>Output</p>${jsonBlock(n.output, ' data-io="output"')}`;
    return `<section class="node-io"${attr("data-node-io", n.id)}><h3>Node <code>${escapeHtml(n.id)}</code> ${badge(n.state)}</h3>
${input}${output}</section>`;
  });
  const none = shown.length === 0 ? '<p class="none">No node was released yet.</p>' : "";
  return `${runInput}${nodes.join("\n")}${none}`;
}

/**
 * The run page's body: facts, the DAG with its legend, the nodes, each node's input and output,
 * the actions (with `forms`) and the timeline.
 */
export function renderRun(run: RunView, forms?: FormContext): string {
  const actions = forms ? `\n<h2>Actions</h2>\n${renderRunForms(run, forms)}` : "";
  return `<h1>Run <code>${escapeHtml(run.runId)}</code></h1>
${renderFacts(run)}
<h2>DAG</h2>
${renderDag(run)}
<h2>Nodes</h2>
${renderNodeTable(run)}
<h2>Inputs and outputs</h2>
${renderNodeData(run)}${actions}
<h2>Timeline</h2>
${renderTimeline(run.timeline)}`;
}
