/**
 * A small HTML reader for the render tests: enough of the console's own markup (no scripts, no
 * comments, attributes always double-quoted) to ask which element holds which, without a browser.
 */

export interface El {
  readonly tag: string;
  readonly attrs: Readonly<Record<string, string>>;
  readonly children: El[];
  readonly parent?: El;
  /** Text and elements directly inside, in order (text with entities decoded). */
  readonly parts: (El | string)[];
}

const VOID = new Set(["meta", "input", "br", "img", "link", "hr"]);
const DECODE: Readonly<Record<string, string>> = {
  "&amp;": "&",
  "&lt;": "<",
  "&gt;": ">",
  "&quot;": '"',
  "&#39;": "'",
};
const decode = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (m) => DECODE[m] ?? m);

function parseAttrs(raw: string): Record<string, string> {
  const attrs: Record<string, string> = {};
  for (const m of raw.matchAll(/([\w:-]+)(?:="([^"]*)")?/g)) {
    if (m[1]) attrs[m[1]] = decode(m[2] ?? "");
  }
  return attrs;
}

export function parseHtml(html: string): El {
  const root: El = { tag: "#root", attrs: {}, children: [], parts: [] };
  let current = root;
  let last = 0;
  for (const m of html.matchAll(/<(\/?)([a-zA-Z][\w-]*)((?:\s+[\w:-]+(?:="[^"]*")?)*)\s*(\/?)>/g)) {
    current.parts.push(decode(html.slice(last, m.index)));
    last = m.index + m[0].length;
    const [, closing, tag = "", rawAttrs = "", selfClosing] = m;
    if (closing) {
      if (current.tag !== tag.toLowerCase()) throw new Error(`</${tag}> closes <${current.tag}>`);
      current = current.parent ?? root;
      continue;
    }
    const el: El = {
      tag: tag.toLowerCase(),
      attrs: parseAttrs(rawAttrs),
      children: [],
      parent: current,
      parts: [],
    };
    current.children.push(el);
    current.parts.push(el);
    if (!selfClosing && !VOID.has(el.tag)) current = el;
  }
  current.parts.push(decode(html.slice(last)));
  if (current !== root) throw new Error(`<${current.tag}> is never closed`);
  return root;
}

/** Every element under `el` (depth first) that `match` accepts. */
export function findAll(el: El, match: (e: El) => boolean): El[] {
  return el.children.flatMap((c) => [...(match(c) ? [c] : []), ...findAll(c, match)]);
}

export function find(el: El, match: (e: El) => boolean): El {
  const [first] = findAll(el, match);
  if (!first) throw new Error("no element matches");
  return first;
}

export const withAttr =
  (name: string, value?: string) =>
  (e: El): boolean =>
    value === undefined ? name in e.attrs : e.attrs[name] === value;

/** All text under `el`, whitespace collapsed. */
export function textOf(el: El): string {
  const all = (e: El): string =>
    e.parts.map((p) => (typeof p === "string" ? p : ` ${all(p)} `)).join("");
  return all(el).replace(/\s+/g, " ").trim();
}

/** The nearest ancestor of `el` that `match` accepts. */
export function closest(el: El, match: (e: El) => boolean): El | undefined {
  for (let p = el.parent; p; p = p.parent) if (match(p)) return p;
  return undefined;
}
