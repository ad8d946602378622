import { RUN_STATUSES } from "../../../functions/core/dag/run";
import { checkedListFilter, type ListFilter, ListFilterError } from "../lists";
import type { ItemPage } from "../views";
import { formatTime } from "./format";
import { attr, escapeHtml, href, link, runHref } from "./html";
import { badge, renderTable } from "./page";

/**
 * The console's runs page, `/runs`: a page of the stack's workflow runs, newest first, filtered
 * by tenant, status and when each was started (`?tenant=&status=&since=&before=`, checked as the
 * CLI's `agentbus lists runs` checks them: lib/operator/lists.ts), and `?page=` for the page after
 * the one that linked to it. One tenant's runs of one status are one Query of the by-tenant-status
 * index per page.
 */

/** What `/runs` asks for: the filter and the page after, or why the query cannot be used. */
export function runListParams(
  params: URLSearchParams,
): { readonly filter: ListFilter; readonly after?: string } | { readonly problem: string } {
  try {
    const filter = checkedListFilter({
      tenant: params.get("tenant") ?? undefined,
      status: params.get("status") ?? undefined,
      since: params.get("since") ?? undefined,
      before: params.get("before") ?? undefined,
    });
    const after = params.get("page")?.trim() || undefined;
    return after === undefined ? { filter } : { filter, after };
  } catch (error) {
    if (error instanceof ListFilterError) return { problem: `The filter ${error.message}.` };
    throw error;
  }
}

function input(name: keyof ListFilter, label: string, value: string | undefined, extra = "") {
  return `<label>${escapeHtml(label)} <input name="${name}"${value === undefined ? "" : attr("value", value)}${extra}></label>`;
}

/** The filter's form: a GET to `/runs` with the filter shown now. */
function renderFilter(filter: ListFilter): string {
  const statuses = RUN_STATUSES.map((s) => `<option value="${s}"></option>`).join("");
  return `<form class="run-filter" action="/runs" method="get" data-run-filter>
${input("tenant", "Tenant", filter.tenant, ' placeholder="every tenant"')}
${input("status", "Status", filter.status, ' list="run-statuses" placeholder="any status"')}<datalist id="run-statuses">${statuses}</datalist>
${input("since", "Started since", filter.since, ' placeholder="2026-12-01 or 2026-12-01T09:00Z"')}
${input("before", "Started before", filter.before, ' placeholder="ISO 8601"')}
<button type="submit">Filter</button>
</form>`;
}

/** The link to the page after this one, keeping the filter. */
function nextLink(filter: ListFilter, next: string | undefined): string {
  if (next === undefined) return "";
  const query: Record<string, string> = { ...filter, page: next };
  return `<p><a data-next-page href="${escapeHtml(href("/runs", query))}">Next page</a></p>`;
}

/** The runs page: the filter, the page's runs, and the link to the next page. */
export function renderRunList(page: ItemPage, filter: ListFilter): string {
  const rows = page.rows.map((run) => [
    link(runHref(run.id), run.id),
    badge(run.status),
    escapeHtml(run.tenant ?? ""),
    escapeHtml(run.label ?? ""),
    escapeHtml(formatTime(run.listedAt)),
    escapeHtml(formatTime(run.updatedAt)),
  ]);
  const attrs = (i: number) =>
    `${attr("data-item-id", page.rows[i]?.id)}${attr("data-status", page.rows[i]?.status)}${attr("data-tenant", page.rows[i]?.tenant)}`;
  const shown = Object.keys(filter).length === 0 ? "every run" : "the runs the filter names";
  return `<h1>Runs</h1>
${renderFilter(filter)}
<p class="muted">${shown}, newest started first</p>
${renderTable(["id", "status", "tenant", "workflow", "started", "updated"], rows, "No run matches.", attrs)}
${nextLink(filter, page.next)}`;
}
