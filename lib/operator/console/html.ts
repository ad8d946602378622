/**
 * The console's one escaping rule: every value that goes into the page (text, attribute values,
 * SVG text) passes through `escapeHtml`, numbers included, since the data comes from the stack and
 * may hold anything.
 */

const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text safe inside an element or a quoted attribute value, in HTML and in inline SVG. */
export function escapeHtml(value: string | number | boolean | null | undefined): string {
  if (value === null || value === undefined) return "";
  return String(value).replace(/[&<>"']/g, (ch) => ENTITIES[ch] ?? ch);
}

/** ` name="value"` with the value escaped; nothing when the value is undefined. */
export function attr(name: string, value: string | number | undefined): string {
  return value === undefined ? "" : ` ${name}="${escapeHtml(value)}"`;
}

/** A link to `href` (a path this console serves, built by `href`) with escaped text. */
export function link(href: string, text: string): string {
  return `<a href="${escapeHtml(href)}">${escapeHtml(text)}</a>`;
}

/** A console path with its query parameters encoded. */
export function href(path: string, query: Readonly<Record<string, string>> = {}): string {
  const params = new URLSearchParams(query).toString();
  return params ? `${path}?${params}` : path;
}

export const traceHref = (id: string): string => href("/trace", { id });
export const runHref = (runId: string): string => `/runs/${encodeURIComponent(runId)}`;
