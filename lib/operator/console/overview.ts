import type {
  GroupStatusView,
  HeldReplyView,
  ItemSummary,
  OverviewView,
  SideEffectView,
  StatusView,
  WaitingView,
} from "../views";
import { formatCount, formatDuration, formatTime } from "./format";
import { type FormContext, renderHeldReplyForm, renderSendResolveForm } from "./forms";
import { attr, escapeHtml, link, runHref, traceHref } from "./html";
import { badge, fact, renderTable } from "./page";

/** Where an item of a list leads: a run to its DAG, a task or conversation to its trace. */
function itemLink(item: ItemSummary): string {
  return link(item.kind === "run" ? runHref(item.id) : traceHref(item.id), item.id);
}

/** Runs, conversations or tasks, newest started first (the order the lists keep). */
function itemTable(items: readonly ItemSummary[], kind: string, empty: string): string {
  const rows = items.map((item) => [
    itemLink(item),
    badge(item.status),
    escapeHtml(item.label ?? ""),
    escapeHtml(formatTime(item.listedAt)),
    escapeHtml(formatTime(item.updatedAt)),
  ]);
  const attrs = (i: number) =>
    `${attr("data-item-kind", kind)}${attr("data-item-id", items[i]?.id)}${attr("data-status", items[i]?.status)}`;
  return renderTable(["id", "status", "what", "started", "updated"], rows, empty, attrs);
}

/** What waits for a person, each with since when it waits (its last change where unknown). */
function itemList(items: readonly ItemSummary[]): string {
  if (items.length === 0) return `<p class="none">none</p>`;
  const when = (item: ItemSummary) =>
    item.waitingSince === undefined
      ? formatTime(item.updatedAt)
      : `waiting since ${formatTime(item.waitingSince)}`;
  const lis = items.map(
    (item) =>
      `<li${attr("data-item-id", item.id)}>${itemLink(item)} ${badge(item.status)} <span class="muted">${escapeHtml(item.label ?? "")} · ${escapeHtml(when(item))}</span></li>`,
  );
  return `<ul>${lis.join("")}</ul>`;
}

function sideEffectList(effects: readonly SideEffectView[], forms?: FormContext): string {
  if (effects.length === 0) return `<p class="none">none</p>`;
  const lis = effects.map(
    (s) =>
      `<li${attr("data-side-effect-key", s.key)}><code>${escapeHtml(s.key)}</code> ${escapeHtml(s.state)}, ${escapeHtml(s.attempts)} attempt(s) <span class="muted">· ${escapeHtml(formatTime(s.updatedAt))}</span>${forms && s.state === "unknown" ? renderSendResolveForm(s.key, forms) : ""}</li>`,
  );
  return `<ul>${lis.join("")}</ul>`;
}

/** The held replies' drafts, each with approve and reject (only where the console acts). */
function heldDraftForms(drafts: readonly HeldReplyView[] | undefined, forms?: FormContext): string {
  if (!forms || !drafts?.length) return "";
  return `<div class="held-drafts">${drafts.map((d) => renderHeldReplyForm(d, forms)).join("\n")}</div>`;
}

function card(name: string, title: string, count: number, content: string): string {
  const cls = count > 0 ? "card attention" : "card";
  return `<div class="${cls}" data-waiting="${escapeHtml(name)}" data-count="${escapeHtml(count)}"><h3>${escapeHtml(title)} (${escapeHtml(count)})</h3>${content}</div>`;
}

/**
 * What waits for a person, each kind in a card that stands out when it is not empty. A card's
 * count is the stack's count when that is larger than the list (the lists may be cut short).
 */
export function renderWaiting(
  waiting: WaitingView,
  counts: StatusView["counts"],
  actions: { readonly forms?: FormContext; readonly heldDrafts?: readonly HeldReplyView[] } = {},
): string {
  const held = Math.max(waiting.heldReplies.length, counts.heldReplies);
  const unknown = Math.max(waiting.unknownSideEffects.length, counts.unknownSideEffects);
  const { forms, heldDrafts } = actions;
  return `<h2>Waiting for a person</h2>
<div class="cards">
${card("held-replies", "Held replies", held, itemList(waiting.heldReplies) + heldDraftForms(heldDrafts, forms))}
${card("unknown-side-effects", "Side effects with unknown outcome", unknown, sideEffectList(waiting.unknownSideEffects, forms))}
${card("needs-human", "NEEDS_HUMAN", waiting.needsHuman.length, itemList(waiting.needsHuman))}
${card("failed-runs", "Failed runs", waiting.failedRuns.length, itemList(waiting.failedRuns))}
</div>`;
}

function groupRow(g: GroupStatusView): string[] {
  const num = (v: number | undefined) => escapeHtml(formatCount(v));
  const age = g.oldestAgeSeconds === undefined ? "—" : formatDuration(g.oldestAgeSeconds * 1000);
  return [
    `<code>${escapeHtml(g.group)}</code>`,
    num(g.depth),
    num(g.inFlight),
    escapeHtml(age),
    num(g.deadLetters),
    num(g.bufferDepth),
    num(g.bufferDeadLetters),
  ];
}

/** The per-group queue table; a group with dead letters is highlighted. */
export function renderGroups(groups: readonly GroupStatusView[]): string {
  const headers = [
    "group",
    "depth",
    "in flight",
    "oldest",
    "dead letters",
    "buffer depth",
    "buffer dead letters",
  ];
  const attrs = (i: number) => {
    const g = groups[i];
    const alert = g && (g.deadLetters > 0 || (g.bufferDeadLetters ?? 0) > 0);
    return `${attr("data-group", g?.group)}${alert ? ' class="alert"' : ""}`;
  };
  return renderTable(headers, groups.map(groupRow), "No consumer groups reported.", attrs);
}

function renderStatusFacts(status: StatusView): string {
  const runs = Object.entries(status.runsByStatus)
    .map(([s, n]) => `${badge(s)} ${escapeHtml(n)}`)
    .join(" ");
  const age =
    status.relayIteratorAgeMs === undefined ? "—" : formatDuration(status.relayIteratorAgeMs);
  return `<ul class="facts">
${fact("runs", runs || '<span class="none">none</span>')}
${fact("relay iterator age", escapeHtml(age))}
${fact("relay failures", escapeHtml(status.relayFailures))}
${fact("failed nodes", escapeHtml(status.counts.failedNodes))}
${fact("NEEDS_HUMAN nodes", escapeHtml(status.counts.needsHumanNodes))}
</ul>`;
}

/** The overview page's body; with `forms`, what waits for a person can be resolved from it. */
export function renderOverview(view: OverviewView, forms?: FormContext): string {
  return `<h1>Overview</h1>
${renderStatusFacts(view.status)}
${renderWaiting(view.waiting, view.status.counts, { forms, heldDrafts: view.heldDrafts })}
<h2>Queues by consumer group</h2>
${renderGroups(view.status.groups)}
<h2>Recent runs</h2>
${itemTable(view.runs, "run", "No runs.")}
<h2>Recent conversations</h2>
${itemTable(view.conversations, "conversation", "No conversations.")}
<h2>Recent tasks</h2>
${itemTable(view.tasks, "task", "No tasks.")}`;
}
