import { whyLacking } from "../../../functions/roles/features";
import { ListPageError } from "../lists";
import type { OpsSource } from "../views";
import { renderDeadLetters } from "./dead-letters";
import type { Flash, FlashMessages } from "./flash";
import type { FormContext } from "./forms";
import { escapeHtml } from "./html";
import { renderOverview } from "./overview";
import {
  type ConsolePage,
  notFoundPage,
  renderPage,
  requestErrorPage,
  serverErrorPage,
} from "./page";
import { renderRun } from "./run";
import { renderRunList, runListParams } from "./run-list";
import { renderTenantFilter, tenantParam } from "./tenant-filter";
import { renderTrace } from "./trace";
import { renderWorkflow, renderWorkflowList } from "./workflows";

/** `?refresh=N` (1 to 3600 seconds) asks the page to reload itself; anything else is ignored. */
export function refreshSeconds(params: URLSearchParams): number | undefined {
  const raw = params.get("refresh");
  if (!raw || !/^\d{1,4}$/.test(raw)) return undefined;
  const seconds = Number(raw);
  return seconds >= 1 && seconds <= 3600 ? seconds : undefined;
}

/** What the pages of a console that acts need: its form token and the actions' messages. */
export interface PageContext {
  readonly forms?: FormContext;
  readonly flashes?: FlashMessages;
}

const ok = (html: string): ConsolePage => ({ status: 200, html });

async function tracePage(source: OpsSource, params: URLSearchParams): Promise<ConsolePage> {
  const refresh = refreshSeconds(params);
  const id = (params.get("id") ?? "").trim();
  if (!id) {
    const body = `<h1>Trace</h1>\n<p>Type an event, task or correlation id in the box above.</p>`;
    return ok(renderPage({ title: "Trace", body, refresh }));
  }
  const view = await source.trace(id);
  if (!view)
    return notFoundPage(
      `Nothing is known of id "${id}": no event, task or correlation has it.`,
      id,
    );
  return ok(renderPage({ title: `Trace ${id}`, body: renderTrace(view), search: id, refresh }));
}

interface Shown {
  readonly refresh?: number;
  readonly flash?: Flash;
  readonly forms?: FormContext;
}

async function runPage(source: OpsSource, runId: string, shown: Shown): Promise<ConsolePage> {
  if (!source.features.includes("runs"))
    return notFoundPage(`There are no runs to show: ${whyLacking("runs")}.`);
  const view = await source.run(runId);
  if (!view && shown.flash?.kind === "sent") {
    // A run just started from the console: the orchestrator has not recorded it yet.
    const body = `<h1>Run <code>${escapeHtml(runId)}</code></h1>\n<p data-run-pending>The run was asked for and is not recorded yet; this page reloads until it is.</p>`;
    return ok(renderPage({ title: `Run ${runId}`, body, ...shown, refresh: shown.refresh ?? 2 }));
  }
  if (!view) return notFoundPage(`Nothing is known of run "${runId}": no run has that id.`);
  const body = renderRun(view, shown.forms);
  return ok(renderPage({ title: `Run ${runId}`, body, ...shown }));
}

/** `/runs`: a page of runs, filtered by `?tenant=&status=&since=&before=`, after `?page=`. */
async function runListPage(source: OpsSource, url: URL, shown: Shown): Promise<ConsolePage> {
  if (!source.features.includes("runs"))
    return notFoundPage(`There are no runs to show: ${whyLacking("runs")}.`);
  const asked = runListParams(url.searchParams);
  if ("problem" in asked) return requestErrorPage(400, asked.problem);
  const { filter, after } = asked;
  try {
    const page = await source.runList(filter, after);
    const body = renderRunList(page, filter);
    return ok(
      renderPage({
        title: "Runs",
        body,
        ...shown,
        ...(filter.tenant ? { tenant: filter.tenant } : {}),
      }),
    );
  } catch (error) {
    if (error instanceof ListPageError)
      return requestErrorPage(400, `The page ${error.message}: follow a Next page link.`);
    throw error;
  }
}

/**
 * `/workflows` (every tenant's own; with `?tenant=`, that tenant's only) and `/workflows/<name>`
 * (`?version=`, `?tenant=`: as a start of that tenant finds it; after a refused start, its form
 * filled in as it was sent).
 */
async function workflowsPage(
  source: OpsSource,
  url: URL,
  name: string | undefined,
  shown: Shown,
): Promise<ConsolePage> {
  if (!source.features.includes("runs"))
    return notFoundPage(`There are no workflows to show: ${whyLacking("runs")}.`);
  const filter = tenantParam(url.searchParams);
  if ("problem" in filter) return requestErrorPage(400, filter.problem);
  const { tenant } = filter;
  const listed = { ...shown, ...(tenant === undefined ? {} : { tenant }) };
  if (name === undefined) {
    const body = `${renderTenantFilter("/workflows", tenant)}\n${renderWorkflowList(await source.workflows(tenant), tenant)}`;
    return ok(renderPage({ title: "Workflows", body, ...listed }));
  }
  const rawVersion = url.searchParams.get("version");
  const version = rawVersion === null ? undefined : Number(rawVersion);
  if (version !== undefined && !(Number.isInteger(version) && version >= 1))
    return requestErrorPage(
      400,
      `The version ${JSON.stringify(rawVersion)} is not a whole number, at least 1.`,
    );
  const view = await source.workflow(name, {
    ...(tenant === undefined ? {} : { tenant }),
    ...(version === undefined ? {} : { version }),
  });
  if (!view)
    return notFoundPage(
      `No workflow "${name}"${version === undefined ? "" : ` v${version}`} is known${tenant === undefined ? "" : ` for tenant ${tenant}`}.`,
    );
  const { flash } = shown;
  const refused = flash?.typed && { typed: flash.typed, message: flash.message };
  const body = renderWorkflow(view, shown.forms, tenant, refused);
  return ok(renderPage({ title: `Workflow ${name}`, body, ...listed }));
}

/** The segment of `/<prefix>/<segment>` decoded; undefined for other paths, null when malformed. */
function segmentOf(prefix: string, path: string): string | null | undefined {
  const match = new RegExp(`^/${prefix}/([^/]*)/?$`).exec(path);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1] ?? "");
  } catch {
    return null;
  }
}

async function dispatch(source: OpsSource, url: URL, context: PageContext): Promise<ConsolePage> {
  const shown: Shown = {
    refresh: refreshSeconds(url.searchParams),
    flash: context.flashes?.of(url.searchParams),
    forms: context.forms,
  };
  const path = url.pathname;
  if (path === "/" || path === "/dead-letters") {
    const filter = tenantParam(url.searchParams);
    if ("problem" in filter) return requestErrorPage(400, filter.problem);
    const { tenant } = filter;
    const listed = { ...shown, ...(tenant === undefined ? {} : { tenant }) };
    if (path === "/") {
      const view = await source.overview(tenant);
      const body = renderOverview(view, source.features, shown.forms, tenant);
      return ok(renderPage({ title: "Overview", body, ...listed }));
    }
    const body = renderDeadLetters(await source.deadLetters(tenant), shown.forms, tenant);
    return ok(renderPage({ title: "Dead letters", body, ...listed }));
  }
  if (path === "/trace") return tracePage(source, url.searchParams);
  if (path === "/workflows" || path === "/workflows/")
    return workflowsPage(source, url, undefined, shown);
  const workflow = segmentOf("workflows", path);
  if (workflow === null)
    return requestErrorPage(400, "The workflow's name could not be read (a malformed %-escape).");
  if (workflow) return workflowsPage(source, url, workflow, shown);
  if (path === "/runs" || path === "/runs/") return runListPage(source, url, shown);
  const runId = segmentOf("runs", path);
  if (runId === null)
    return requestErrorPage(400, "The run id could not be read (a malformed %-escape).");
  if (runId !== undefined) return runPage(source, runId, shown);
  return notFoundPage(`There is no page at ${path}.`);
}

/**
 * The console's pages by method and request target (`/path?query`), with forms when `context`
 * has a form token (POSTs are ./actions'): 200 with the page, 404 when
 * nothing is known of the id or the path, 400/405 for a request it cannot read, 500 with the
 * source's error message when reading the stack fails.
 */
export async function routeRequest(
  source: OpsSource,
  method: string,
  target: string,
  context: PageContext = {},
): Promise<ConsolePage> {
  if (method !== "GET" && method !== "HEAD") {
    return requestErrorPage(
      405,
      `The console's pages answer GET (its forms POST to their own addresses): ${method} is not allowed.`,
    );
  }
  let url: URL;
  try {
    url = new URL(target, "http://console.invalid");
  } catch {
    return requestErrorPage(400, `The address ${target} could not be read.`);
  }
  try {
    return await dispatch(source, url, context);
  } catch (error) {
    return serverErrorPage(error);
  }
}
