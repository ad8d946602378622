import { type Flash, renderFlash } from "./flash";
import { escapeHtml, href, link } from "./html";
import { STYLESHEET } from "./style";

/** What a route answers: a status and a whole HTML page. */
export interface ConsolePage {
  readonly status: number;
  readonly html: string;
}

export interface PageOptions {
  readonly title: string;
  /** The body's HTML, already escaped. */
  readonly body: string;
  /** The search box's current text. */
  readonly search?: string;
  /** Seconds between reloads (`<meta http-equiv="refresh">`), none when undefined. */
  readonly refresh?: number;
  /** What the last action answered, shown above the body. */
  readonly flash?: Flash;
  /** The tenant the lists are filtered to, kept by the navigation's links. */
  readonly tenant?: string;
}

/** The shell every page shares: stylesheet, navigation, the trace search box. */
export function renderPage(options: PageOptions): string {
  const tenantQuery: Record<string, string> =
    options.tenant === undefined ? {} : { tenant: options.tenant };
  const refresh =
    options.refresh === undefined
      ? ""
      : `<meta http-equiv="refresh" content="${escapeHtml(options.refresh)}">`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refresh}<title>${escapeHtml(options.title)} · AgentBus console</title>
<style>${STYLESHEET}</style>
</head>
<body>
<header>
<a href="/">AgentBus console</a>
<nav>${link(href("/", tenantQuery), "Overview")}${link(href("/runs", tenantQuery), "Runs")}${link(href("/dead-letters", tenantQuery), "Dead letters")}${link(href("/workflows", tenantQuery), "Workflows")}</nav>
<form action="/trace" method="get" role="search">
<input type="search" name="id" aria-label="Event, task or correlation id" placeholder="event, task or correlation id"${options.search ? ` value="${escapeHtml(options.search)}"` : ""}>
<button type="submit">Trace</button>
</form>
</header>
<main>
${options.flash ? `${renderFlash(options.flash)}\n` : ""}${options.body}
</main>
</body>
</html>
`;
}

/** A table of rows whose cells are HTML already escaped; `empty` when there are no rows. */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
  empty: string,
  rowAttrs: (index: number) => string = () => "",
): string {
  if (rows.length === 0) return `<p class="none">${escapeHtml(empty)}</p>`;
  const head = headers.map((h) => `<th>${escapeHtml(h)}</th>`).join("");
  const body = rows
    .map((cells, i) => `<tr${rowAttrs(i)}>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`)
    .join("\n");
  return `<div class="table-wrap"><table>\n<thead><tr>${head}</tr></thead>\n<tbody>\n${body}\n</tbody>\n</table></div>`;
}

/** One `name: value` item of a page's `<ul class="facts">`; `valueHtml` is already escaped. */
export function fact(name: string, valueHtml: string): string {
  return `<li><span>${escapeHtml(name)}:</span> ${valueHtml}</li>`;
}

/** A status word as a coloured badge (the class is chosen from a fixed set of names). */
export function badge(status: string): string {
  const known = /^[A-Z_]+$/.test(status) ? ` status-${status}` : "";
  return `<span class="badge${known}">${escapeHtml(status)}</span>`;
}

/** 404: nothing is known of what was asked for. */
export function notFoundPage(message: string, search?: string): ConsolePage {
  const body = `<h1>Not found</h1>\n<p class="not-found" data-not-found>${escapeHtml(message)}</p>`;
  return { status: 404, html: renderPage({ title: "Not found", body, search }) };
}

const REQUEST_ERRORS: Readonly<Record<number, string>> = {
  403: "Forbidden",
  404: "Not found",
  405: "Method not allowed",
  413: "Too large",
  415: "Unsupported media type",
  421: "Misdirected request",
};

/** 400 / 403 / 405 and other refusals of the request itself. */
export function requestErrorPage(status: number, message: string): ConsolePage {
  const title = REQUEST_ERRORS[status] ?? "Bad request";
  const body = `<h1>${escapeHtml(title)}</h1>\n<p data-request-error>${escapeHtml(message)}</p>`;
  return { status, html: renderPage({ title, body }) };
}

/** 500: the source failed; its message is shown (escaped) so the operator sees why. */
export function serverErrorPage(error: unknown): ConsolePage {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const body = `<h1>The console could not read the stack</h1>
<p>Reading failed with:</p>
<pre class="error-box" data-error>${escapeHtml(message)}</pre>`;
  return { status: 500, html: renderPage({ title: "Error", body }) };
}
