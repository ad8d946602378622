import type { GroupOutcome, SideEffectView, TraceNode, TraceRun, TraceView } from "../views";
import { formatTime } from "./format";
import { attr, escapeHtml, link, runHref, traceHref } from "./html";
import { fact } from "./page";

/** An outcome in words: `applied (gap repair)`, `discarded: superseded`, `retrying (3 attempts, last error: ...)`. */
export function describeOutcome(o: GroupOutcome): string {
  const text = outcomeWords(o);
  return o.duplicates ? `${text}, duplicate×${o.duplicates}` : text;
}

function outcomeWords(o: GroupOutcome): string {
  const error = o.error ? `${o.error.code}: ${o.error.message}` : undefined;
  const attempts = o.attempts === undefined ? undefined : `${o.attempts} attempt(s)`;
  switch (o.outcome) {
    case "applied":
      return o.repaired ? "applied (gap repair)" : "applied";
    case "discarded":
    case "rejected":
      return o.reason ? `${o.outcome}: ${o.reason}` : o.outcome;
    case "retrying": {
      const detail = [attempts, error && `last error ${error}`].filter(Boolean).join(", ");
      return detail ? `retrying (${detail})` : "retrying";
    }
    case "dead-lettered": {
      const detail = [attempts, error].filter(Boolean).join(", ");
      return `dead-lettered: ${o.reason ?? "no reason recorded"}${detail ? ` (${detail})` : ""}`;
    }
    default:
      return String(o.outcome);
  }
}

const OUTCOME_CLASSES = new Set(["applied", "discarded", "rejected", "retrying", "dead-lettered"]);

function renderOutcome(o: GroupOutcome): string {
  const cls = OUTCOME_CLASSES.has(o.outcome) ? ` outcome-${o.outcome}` : "";
  return `<li class="group-outcome"${attr("data-group", o.group)}${attr("data-outcome", o.outcome)}${attr("data-reason", o.reason)}><code>${escapeHtml(o.group)}</code> <span class="outcome${cls}">${escapeHtml(describeOutcome(o))}</span> <span class="muted">${escapeHtml(formatTime(o.at))}</span></li>`;
}

function renderSideEffect(s: SideEffectView): string {
  return `<li class="side-effect"${attr("data-side-effect-key", s.key)}${attr("data-state", s.state)}>side effect <code>${escapeHtml(s.key)}</code>: ${escapeHtml(s.state)}, ${escapeHtml(s.attempts)} attempt(s) <span class="muted">${escapeHtml(formatTime(s.updatedAt))}</span></li>`;
}

function renderDeadLetter(d: { readonly group: string; readonly queue: string }): string {
  return `<li class="dead-letter"${attr("data-group", d.group)}${attr("data-queue", d.queue)}><span class="outcome outcome-dead-lettered">in dead-letter queue</span> <code>${escapeHtml(d.queue)}</code> of <code>${escapeHtml(d.group)}</code></li>`;
}

function renderEventHead(node: TraceNode): string {
  const e = node.event;
  const version = e.version > 0 ? `v${e.version}` : "unsequenced";
  return `<div class="event-head">
<span class="event-type">${escapeHtml(e.eventType)}</span>
<span class="aggregate">${escapeHtml(e.aggregate.type)}/<code>${escapeHtml(e.aggregate.id)}</code></span>
<span class="version">${escapeHtml(version)}</span>${
    e.storedSchemaVersion
      ? `\n<span class="muted">stored as schema v${escapeHtml(String(e.storedSchemaVersion))}</span>`
      : ""
  }
${e.agentStep ? `<span class="agent-step">after ${escapeHtml(e.agentStep)}</span>\n` : ""}<span class="producer">by ${escapeHtml(e.producer)}</span>
<span class="muted">${escapeHtml(formatTime(e.occurredAt))}</span>
<span class="muted mono">${link(traceHref(e.eventId), e.eventId)}</span>
</div>`;
}

function renderNode(node: TraceNode): string {
  const details = [
    ...node.outcomes.map(renderOutcome),
    ...node.sideEffects.map(renderSideEffect),
    ...node.deadLetters.map(renderDeadLetter),
  ];
  const none = '<li class="none">no consumer group recorded this event</li>';
  const children =
    node.children.length > 0 ? `\n<ul>\n${node.children.map(renderNode).join("\n")}\n</ul>` : "";
  return `<li class="trace-event"${attr("data-event-id", node.event.eventId)}${attr("data-event-type", node.event.eventType)}>
<div class="event">
${renderEventHead(node)}
<ul class="details">${details.length > 0 ? details.join("") : none}</ul>
</div>${children}
</li>`;
}

function idList(name: string, ids: readonly string[]): string {
  const links = ids.map((id) => `<code>${link(traceHref(id), id)}</code>`).join(", ");
  return fact(name, links || '<span class="none">none</span>');
}

/** A workflow run of the trace: a link to it, its parent run and its child runs. */
function runFacts(run: TraceRun): string {
  const runLink = (id: string) => `<code>${link(runHref(id), id)}</code>`;
  const parent = run.parentRunId ? `, child of ${runLink(run.parentRunId)}` : "";
  const children = run.childRunIds.length
    ? `, child runs ${run.childRunIds.map(runLink).join(", ")}`
    : "";
  return fact("run", `${runLink(run.runId)}${parent}${children}`);
}

/** The trace page's body: the causal tree, each event with what every group did with it. */
export function renderTrace(view: TraceView): string {
  const tree =
    view.roots.length > 0
      ? `<ul class="tree">\n${view.roots.map(renderNode).join("\n")}\n</ul>`
      : '<p class="none">The trace holds no events.</p>';
  return `<h1>Trace of <code>${escapeHtml(view.query)}</code></h1>
<ul class="facts">
${idList("correlation", view.correlationIds)}
${idList("task", view.taskIds)}
${view.traceIds?.length ? fact("trace id", view.traceIds.map((id) => `<code>${escapeHtml(id)}</code>`).join(", ")) : ""}
${(view.runs ?? []).map(runFacts).join("\n")}
</ul>
<section class="trace"${attr("data-query", view.query)}>
${tree}
</section>${renderRelated(view)}`;
}

/** Messages of other traces this one made moot (superseded or invalidated replies). */
function renderRelated(view: TraceView): string {
  if (!view.related?.length) return "";
  return `
<section class="trace related">
<h2>Made moot by this trace</h2>
<p class="muted">Messages of other traces that a group discarded because of this one.</p>
<ul class="tree">
${view.related.map(renderNode).join("\n")}
</ul>
</section>`;
}
