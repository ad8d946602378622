import { DEFAULT_TENANT } from "../../../schemas/ids";
import type { DeadLetterView } from "../views";
import { formatCount, formatTime } from "./format";
import { type FormContext, renderRedriveForm } from "./forms";
import { attr, escapeHtml, link, traceHref } from "./html";
import { renderTable } from "./page";
import { renderTenantFilter } from "./tenant-filter";

const code = (text: string | undefined) => (text ? `<code>${escapeHtml(text)}</code>` : "");
const traced = (id: string | undefined) => (id ? `<code>${link(traceHref(id), id)}</code>` : "");

function row(d: DeadLetterView): string[] {
  return [
    code(d.group),
    escapeHtml(d.queue === "buffer" ? "buffer (dispatcher)" : "queue (consumer)"),
    d.eventId ? traced(d.eventId) : code(d.messageId),
    escapeHtml(d.eventType ?? ""),
    escapeHtml(d.tenantId ?? (d.eventId === undefined ? "" : DEFAULT_TENANT)),
    code(d.orderKey),
    code(d.code),
    escapeHtml(d.reason),
    escapeHtml(formatCount(d.receiveCount)),
    escapeHtml(formatTime(d.sentAt)),
    traced(d.correlationId ?? d.taskId),
  ];
}

/**
 * The redrive forms; none while a tenant filter is on, since a redrive moves every tenant's dead
 * letters of the group's queue.
 */
function redriveSection(
  letters: readonly DeadLetterView[],
  forms: FormContext,
  tenant: string | undefined,
): string {
  if (tenant === undefined) return redriveForms(letters, forms);
  if (letters.length === 0) return "";
  return `<p class="muted" data-redrive-hidden>A redrive moves every tenant's dead letters of a queue: clear the tenant filter to redrive.</p>`;
}

/** One redrive form per group and queue that holds dead letters. */
function redriveForms(letters: readonly DeadLetterView[], forms: FormContext): string {
  const counts = new Map<string, { group: string; queue: "queue" | "buffer"; count: number }>();
  for (const d of letters) {
    const id = `${d.group}\u0000${d.queue}`;
    const seen = counts.get(id) ?? { group: d.group, queue: d.queue, count: 0 };
    counts.set(id, { ...seen, count: seen.count + 1 });
  }
  if (counts.size === 0) return "";
  const all = [...counts.values()].map((c) => renderRedriveForm(c.group, c.queue, c.count, forms));
  return `<h2>Redrive</h2>
<p class="muted">Puts a group's dead letters back on the queue they came from, in order per order key; recorded in the audit trail.</p>
<div class="forms">${all.join("\n")}</div>`;
}

/**
 * The dead-letters page's body: every message in a dead-letter queue, by group; with `tenant`,
 * that tenant's (the source read them so).
 */
export function renderDeadLetters(
  letters: readonly DeadLetterView[],
  forms?: FormContext,
  tenant?: string,
): string {
  const headers = [
    "group",
    "queue",
    "event (or message)",
    "type",
    "tenant",
    "order key",
    "code",
    "reason",
    "receives",
    "sent to DLQ",
    "trace",
  ];
  const attrs = (i: number) => {
    const d = letters[i];
    return `${attr("data-group", d?.group)}${attr("data-queue", d?.queue)}${attr("data-event-id", d?.eventId)}${attr("data-message-id", d?.messageId)}`;
  };
  const empty =
    tenant === undefined
      ? "No dead letters: every dead-letter queue is empty."
      : `No dead letters of tenant ${tenant}.`;
  return `<h1>Dead letters (${escapeHtml(letters.length)})</h1>
${renderTenantFilter("/dead-letters", tenant)}
${renderTable(headers, letters.map(row), empty, attrs)}${forms ? redriveSection(letters, forms, tenant) : ""}`;
}
