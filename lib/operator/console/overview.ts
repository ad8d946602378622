import { ALL_FEATURES, type Feature, whyLacking } from "../../../functions/roles/features";
import { replyKeyTask } from "../support-actions";
import type {
  AgentWaitView,
  GroupStatusView,
  HeldReplyView,
  ItemSummary,
  OverviewView,
  SideEffectView,
  StatusView,
  WaitingView,
} from "../views";
import { renderAgentWait } from "./agent-waits";
import { formatCount, formatDuration, formatTime } from "./format";
import {
  type FormContext,
  renderHeldReplyForm,
  renderSendResolveForm,
  renderTenantStopForms,
} from "./forms";
import { attr, escapeHtml, link, runHref, traceHref } from "./html";
import { badge, fact, renderTable } from "./page";
import { renderTenantFilter } from "./tenant-filter";

/** Where an item of a list leads: a run to its DAG, a task or conversation to its trace. */
function itemLink(item: ItemSummary): string {
  return link(item.kind === "run" ? runHref(item.id) : traceHref(item.id), item.id);
}

/** Runs, conversations or tasks, newest started first (the order the lists keep). */
function itemTable(items: readonly ItemSummary[], kind: string, empty: string): string {
  const rows = items.map((item) => [
    itemLink(item),
    badge(item.status),
    escapeHtml(item.tenant ?? ""),
    escapeHtml(item.label ?? ""),
    escapeHtml(formatTime(item.listedAt)),
    escapeHtml(formatTime(item.updatedAt)),
  ]);
  const attrs = (i: number) =>
    `${attr("data-item-kind", kind)}${attr("data-item-id", items[i]?.id)}${attr("data-status", items[i]?.status)}${attr("data-tenant", items[i]?.tenant)}`;
  return renderTable(["id", "status", "tenant", "what", "started", "updated"], rows, empty, attrs);
}

/**
 * What waits for a person, each with since when it waits (its last change where unknown), and
 * under it `details` of the item, if any.
 */
function itemList(
  items: readonly ItemSummary[],
  details: (item: ItemSummary) => string = () => "",
): string {
  if (items.length === 0) return `<p class="none">none</p>`;
  const when = (item: ItemSummary) =>
    item.waitingSince === undefined
      ? formatTime(item.updatedAt)
      : `waiting since ${formatTime(item.waitingSince)}`;
  const lis = items.map(
    (item) =>
      `<li${attr("data-item-id", item.id)}${attr("data-tenant", item.tenant)}>${itemLink(item)} ${badge(item.status)} <span class="muted">${escapeHtml(item.label ?? "")}${item.tenant === undefined ? "" : ` · tenant ${escapeHtml(item.tenant)}`} · ${escapeHtml(when(item))}</span>${details(item)}</li>`,
  );
  return `<ul>${lis.join("")}</ul>`;
}

/**
 * A reply's unknown send is resolved here; an agent run's write, on its run (NEEDS_HUMAN). Other
 * keys have no form: their owner resolves them.
 */
function sideEffectResolve(
  effect: SideEffectView,
  waits: readonly AgentWaitView[],
  forms?: FormContext,
): string {
  if (!forms || effect.state !== "unknown") return "";
  if (!("problem" in replyKeyTask(effect.key))) return renderSendResolveForm(effect.key, forms);
  const run = waits.find((w) => w.key === effect.key)?.runId;
  return run
    ? ` <span class="muted">· resolve it on agent run ${escapeHtml(run)} (NEEDS_HUMAN)</span>`
    : "";
}

function sideEffectList(
  effects: readonly SideEffectView[],
  waits: readonly AgentWaitView[],
  forms?: FormContext,
): string {
  if (effects.length === 0) return `<p class="none">none</p>`;
  const lis = effects.map(
    (s) =>
      `<li${attr("data-side-effect-key", s.key)}><code>${escapeHtml(s.key)}</code> ${escapeHtml(s.state)}, ${escapeHtml(s.attempts)} attempt(s) <span class="muted">· ${escapeHtml(formatTime(s.updatedAt))}</span>${sideEffectResolve(s, waits, forms)}</li>`,
  );
  return `<ul>${lis.join("")}</ul>`;
}

/** What a listed agent run waits for (from its journal), if it was read. */
function agentDetails(waits: readonly AgentWaitView[], forms?: FormContext) {
  const byRun = new Map(waits.map((w) => [w.runId, w]));
  return (item: ItemSummary): string => {
    const wait = byRun.get(item.id);
    return wait ? renderAgentWait(wait, forms) : "";
  };
}

/** The held replies' drafts, each with approve and reject (only where the console acts). */
function heldDraftForms(drafts: readonly HeldReplyView[] | undefined, forms?: FormContext): string {
  if (!forms || !drafts?.length) return "";
  return `<div class="held-drafts">${drafts.map((d) => renderHeldReplyForm(d, forms)).join("\n")}</div>`;
}

/** A card of what waits; `wide` (a row of its own) where it shows agent runs' calls and forms. */
function card(name: string, title: string, count: number, content: string, wide = false): string {
  const cls = `card${count > 0 ? " attention" : ""}${wide ? " wide" : ""}`;
  return `<div class="${cls}" data-waiting="${escapeHtml(name)}" data-count="${escapeHtml(count)}"><h3>${escapeHtml(title)} (${escapeHtml(count)})</h3>${content}</div>`;
}

/** What the cards of what waits show besides the lists: the forms, the held drafts, the agent runs' waits. */
interface WaitingActions {
  readonly forms?: FormContext;
  readonly heldDrafts?: readonly HeldReplyView[];
  readonly agentWaits?: readonly AgentWaitView[];
}

/**
 * The cards of what waits, for a stack with `features`: the held replies and the conversations
 * handed off where it has conversations, the failed runs where it has runs. A card's count is the
 * stack's count when that is larger than the list (the lists may be cut short).
 */
function waitingCards(
  waiting: WaitingView,
  counts: StatusView["counts"],
  features: readonly Feature[],
  { forms, heldDrafts, agentWaits = [] }: WaitingActions,
): string[] {
  const held = Math.max(waiting.heldReplies.length, counts.heldReplies);
  const approvals = Math.max(waiting.awaitingApproval.length, counts.awaitingApproval);
  const unknown = Math.max(waiting.unknownSideEffects.length, counts.unknownSideEffects);
  const details = agentDetails(agentWaits, forms);
  const shown = (items: readonly ItemSummary[]) =>
    items.some((i) => agentWaits.some((w) => w.runId === i.id));
  const has = (feature: Feature, html: () => string) =>
    features.includes(feature) ? [html()] : [];
  const { awaitingApproval, needsHuman } = waiting;
  return [
    ...has("conversations", () =>
      card(
        "held-replies",
        "Held replies",
        held,
        itemList(waiting.heldReplies) + heldDraftForms(heldDrafts, forms),
      ),
    ),
    card(
      "awaiting-approval",
      "Awaiting approval",
      approvals,
      itemList(awaitingApproval, details),
      shown(awaitingApproval),
    ),
    card(
      "unknown-side-effects",
      "Side effects with unknown outcome",
      unknown,
      sideEffectList(waiting.unknownSideEffects, agentWaits, forms),
    ),
    card(
      "needs-human",
      "NEEDS_HUMAN",
      needsHuman.length,
      itemList(needsHuman, details),
      shown(needsHuman),
    ),
    ...has("runs", () =>
      card("failed-runs", "Failed runs", waiting.failedRuns.length, itemList(waiting.failedRuns)),
    ),
    ...has("conversations", () =>
      card(
        "handed-off",
        "Handed off to a person",
        waiting.handedOff.length,
        itemList(waiting.handedOff),
      ),
    ),
  ];
}

/** What waits for a person, each kind in a card that stands out when it is not empty. */
export function renderWaiting(
  waiting: WaitingView,
  counts: StatusView["counts"],
  features: readonly Feature[],
  actions: WaitingActions = {},
): string {
  return `<h2>Waiting for a person</h2>
<div class="cards">
${waitingCards(waiting, counts, features, actions).join("\n")}
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

function renderStatusFacts(status: StatusView, features: readonly Feature[]): string {
  const runs = Object.entries(status.runsByStatus)
    .map(([s, n]) => `${badge(s)} ${escapeHtml(n)}`)
    .join(" ");
  const age =
    status.relayIteratorAgeMs === undefined ? "—" : formatDuration(status.relayIteratorAgeMs);
  const sweep = status.lastSweepAt === undefined ? "—" : formatTime(status.lastSweepAt);
  const ofRuns = features.includes("runs");
  const facts = [
    ofRuns && fact("runs", runs || '<span class="none">none</span>'),
    fact("relay iterator age", escapeHtml(age)),
    fact("relay failures", escapeHtml(status.relayFailures)),
    ofRuns && fact("last sweep", escapeHtml(sweep)),
    ofRuns && fact("failed nodes", escapeHtml(status.counts.failedNodes)),
    fact("NEEDS_HUMAN nodes", escapeHtml(status.counts.needsHumanNodes)),
  ];
  return `<ul class="facts">\n${facts.filter((f) => f !== false).join("\n")}\n</ul>`;
}

/** The stack's recent runs, conversations and tasks: a list for each feature it has. */
function renderRecent(view: OverviewView, features: readonly Feature[]): string {
  const lists = {
    runs: ["Recent runs", itemTable(view.runs, "run", "No runs.")],
    conversations: [
      "Recent conversations",
      itemTable(view.conversations, "conversation", "No conversations."),
    ],
    tasks: ["Recent tasks", itemTable(view.tasks, "task", "No tasks.")],
  } satisfies Record<Feature, [string, string]>;
  return ALL_FEATURES.filter((f) => features.includes(f))
    .map((f) => `<h2>${escapeHtml(lists[f][0])}</h2>\n${lists[f][1]}`)
    .join("\n");
}

/**
 * What the page leaves out, and why: the lists, cards and facts of each reference application's
 * feature the stack lacks (an application's own stack lacks them all).
 */
function renderLacking(features: readonly Feature[]): string {
  const lacking = ALL_FEATURES.filter((f) => !features.includes(f));
  if (lacking.length === 0) return "";
  const items = lacking.map(
    (f) => `<li${attr("data-lacking", f)}>${escapeHtml(whyLacking(f))}</li>`,
  );
  return `<div class="lacking" data-lacking-features><p>Left out of this page: the parts of the reference applications this stack does not run.</p><ul>${items.join("")}</ul></div>`;
}

/**
 * The overview page's body, for a stack with `features`; with `forms`, what waits for a person
 * can be resolved from it; with `tenant`, the lists are that tenant's (the source read them so),
 * and with `forms` too the tenant can be stopped and resumed from it.
 */
export function renderOverview(
  view: OverviewView,
  features: readonly Feature[],
  forms?: FormContext,
  tenant?: string,
): string {
  const stopForms = forms && tenant !== undefined ? renderTenantStopForms(tenant, forms) : "";
  return `<h1>Overview</h1>
${renderTenantFilter("/", tenant)}
${stopForms}
${renderLacking(features)}
${renderStatusFacts(view.status, features)}
${renderWaiting(view.waiting, view.status.counts, features, { forms, heldDrafts: view.heldDrafts, agentWaits: view.agentWaits })}
<h2>Queues by consumer group${tenant === undefined ? "" : " (every tenant's)"}</h2>
${renderGroups(view.status.groups)}
${renderRecent(view, features)}`;
}
