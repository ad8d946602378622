import { readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import { fileURLToPath } from "node:url";

/**
 * Stack traces of a bundled function in terms of its TypeScript sources, at no cost to cold
 * start. `NODE_OPTIONS=--enable-source-maps` reads and parses every bundle's source map (0.7 MB
 * of JSON) while the bundle loads, which `npm run bench -- bundles` measures at about a quarter
 * of a function's init time. This reads a bundle's map only when a stack trace of one of its
 * frames is first formatted (an error that is logged), with Node's own `SourceMap` decoder, and
 * keeps it for the container's life. V8 formats a stack lazily, on the first read of `.stack`,
 * so errors that are thrown and handled without looking at their stack cost nothing either.
 */

const maps = new Map<string, SourceMap | null>();

function mapOf(file: string): SourceMap | null {
  let map = maps.get(file);
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, "utf8")));
    } catch {
      map = null; // no map beside this file (Node's own modules, the runtime's)
    }
    maps.set(file, map);
  }
  return map;
}

interface Origin {
  readonly source: string;
  readonly line: number;
  readonly column: number;
  readonly name?: string;
}

function originOf(site: NodeJS.CallSite): Origin | undefined {
  const name = site.getFileName() ?? site.getScriptNameOrSourceURL();
  const line = site.getLineNumber();
  const column = site.getColumnNumber();
  if (!name || line === null || column === null) return undefined;
  if (!name.startsWith("file://") && !name.startsWith("/")) return undefined;
  const map = mapOf(name.startsWith("file://") ? fileURLToPath(name) : name);
  const entry = map?.findEntry(line - 1, column - 1);
  if (!entry || !("originalSource" in entry)) return undefined;
  return {
    source: entry.originalSource.replace(/^(\.\.\/)+/, ""),
    line: entry.originalLine + 1,
    column: entry.originalColumn + 1,
    name: (entry as { name?: string }).name,
  };
}

/**
 * One frame: a mapped frame names its function as the caller's source calls it (the name the
 * map records at the caller's position, as Node's own source-map support does), since the
 * bundle's names are minified.
 */
function frameText(
  site: NodeJS.CallSite,
  origin: Origin | undefined,
  callerOrigin: Origin | undefined,
): string {
  if (!origin) return site.toString();
  const where = `${origin.source}:${origin.line}:${origin.column}`;
  const name = callerOrigin?.name ?? site.getFunctionName();
  return name ? `${site.isAsync() ? "async " : ""}${name} (${where})` : where;
}

function prepareStackTrace(error: Error, sites: NodeJS.CallSite[]): string {
  const origins = sites.map(originOf);
  const frames = sites.map((site, i) => `\n    at ${frameText(site, origins[i], origins[i + 1])}`);
  let head: string;
  try {
    head = String(error);
  } catch {
    head = "Error";
  }
  return `${head}${frames.join("")}`;
}

/** Maps stack traces from here on, unless Node's own source-map support already does. */
export function installLazySourceMaps(): void {
  if (process.sourceMapsEnabled) return;
  Error.prepareStackTrace = prepareStackTrace;
}
