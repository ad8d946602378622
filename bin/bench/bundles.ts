import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";
import {
  buildVariant,
  type EntryFunctions,
  emptyModule,
  stackEntries,
  VARIANT_LABELS,
  VARIANTS,
  type Variant,
} from "./bundle-builds";
import { fmt, fmtInt, renderTable, summarize } from "./stats";

/**
 * `npm run bench -- bundles`: per function bundle, its size (minified, as uploaded) and its init
 * time (the median of fresh `node` processes importing it, with the function's environment:
 * dummy values, its NODE_OPTIONS; nothing is called at import), next to the targets and to the
 * alternatives of bundle-builds.ts built in the same run. Runs are interleaved across bundles so
 * a busy moment of the machine does not fall on one of them only.
 */

/** Issue targets: a bundle's size (minified) and its module init time. */
export const TARGET_KB = 250;
export const TARGET_INIT_MS = 100;

export interface BundleRow {
  readonly entry: EntryFunctions;
  readonly kb: Readonly<Record<Variant, number>>;
  /** Median wall-clock time of the import. */
  readonly initMs: Readonly<Record<Variant, number>>;
  /** Median CPU time (user + system) of the import: steadier than wall time on a busy machine. */
  readonly cpuMs: Readonly<Record<Variant, number>>;
}

export interface BundlesResult {
  readonly rows: readonly BundleRow[];
  /** Median import time of an empty module: this machine's floor under every init figure. */
  readonly emptyInitMs: number;
  readonly runs: number;
}

type Out = (line?: string) => void;

export async function runBundlesSection(out: Out, runs = 5): Promise<BundlesResult> {
  const entries = stackEntries();
  const built = await Promise.all(
    entries.map(async (entry) => {
      const paths = await Promise.all(VARIANTS.map((variant) => buildVariant(entry, variant)));
      return { entry, paths: Object.fromEntries(VARIANTS.map((v, i) => [v, paths[i]])) };
    }),
  );
  out(`built ${built.length * VARIANTS.length} bundles of ${entries.length} handler entries`);
  const empty = emptyModule();
  const samples = new Map<string, { wall: number; cpu: number }[]>();
  const sample = (key: string, path: string, env: Record<string, string>) =>
    samples.set(key, [...(samples.get(key) ?? []), importTime(path, env)]);
  for (let run = 0; run < runs; run++) {
    sample("empty", empty, {});
    for (const { entry, paths } of built) {
      for (const variant of VARIANTS) {
        sample(`${entry.name}/${variant}`, paths[variant]?.path ?? "", entry.environment);
      }
    }
  }
  const median = (key: string, of: "wall" | "cpu") =>
    summarize((samples.get(key) ?? []).map((s) => s[of])).median;
  const rows = built.map(({ entry, paths }) => ({
    entry,
    kb: record((v) => (paths[v]?.bytes ?? 0) / 1024),
    initMs: record((v) => median(`${entry.name}/${v}`, "wall")),
    cpuMs: record((v) => median(`${entry.name}/${v}`, "cpu")),
  }));
  const result = { rows, emptyInitMs: median("empty", "wall"), runs };
  for (const line of bundlesTable(result)) out(line);
  return result;
}

function record(value: (variant: Variant) => number): Record<Variant, number> {
  return Object.fromEntries(VARIANTS.map((v) => [v, value(v)])) as Record<Variant, number>;
}

/** Milliseconds, wall-clock and CPU, a fresh `node` spends importing `path` (after its start-up). */
function importTime(path: string, env: Record<string, string>): { wall: number; cpu: number } {
  const url = JSON.stringify(pathToFileURL(path).href);
  const code = `const c = process.cpuUsage(); const t = performance.now(); await import(${url}); const u = process.cpuUsage(c); process.stdout.write(JSON.stringify([performance.now() - t, (u.user + u.system) / 1000]));`;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    encoding: "utf8",
    env: {
      PATH: process.env.PATH ?? "",
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "bench",
      AWS_SECRET_ACCESS_KEY: "bench",
      AWS_EC2_METADATA_DISABLED: "true",
      ...env,
    },
  });
  if (child.status !== 0) {
    throw new Error(`importing ${path} failed (exit ${child.status}): ${child.stderr.trim()}`);
  }
  const [wall, cpu] = JSON.parse(child.stdout) as [number, number];
  return { wall, cpu };
}

/** The per-bundle table, the targets and the ratios to the baseline. */
export function bundlesTable({ rows, emptyInitMs, runs }: BundlesResult): string[] {
  const mark = (value: number, target: number) => (value <= target ? " ✓" : " ✗");
  const header = [
    "bundle (functions)",
    ...VARIANTS.map((v) => `KB ${VARIANT_LABELS[v]}`),
    "×base",
    ...VARIANTS.map((v) => `ms ${VARIANT_LABELS[v]}`),
    "×base",
    "cpu ms AgentBus",
    "cpu ms baseline",
  ];
  const cells = rows.map(({ entry, kb, initMs, cpuMs }) => [
    `${entry.name} (${entry.functions.length})`,
    `${fmtInt(kb.agentbus)}${mark(kb.agentbus, TARGET_KB)}`,
    fmtInt(kb.baseline),
    fmt(kb.agentbus / kb.baseline),
    `${fmtInt(initMs.agentbus)}${mark(initMs.agentbus, TARGET_INIT_MS)}`,
    fmtInt(initMs.baseline),
    fmt(initMs.agentbus / initMs.baseline),
    fmtInt(cpuMs.agentbus),
    fmtInt(cpuMs.baseline),
  ]);
  return [
    ...renderTable(header, cells, ["l", ...header.slice(1).map(() => "r" as const)]),
    "",
    `KB: minified bundle as uploaded (source map apart); ms: median import time of ${runs} fresh node ${process.version} processes with the function's environment (NODE_OPTIONS included); ✓/✗ against the targets ${TARGET_KB} KB and ${TARGET_INIT_MS} ms; cpu ms: the import's median CPU time. An empty module takes ${fmt(emptyInitMs, 1)} ms to import on this machine now.`,
    `AgentBus: as deployed, AWS called through the SDK v3 clients of the operations each function sends (lib/infra/constructs/bundling.ts); baseline: the bundling before the SDK was trimmed (an SDK client of each service made at init, every credential provider, Powertools Tracer with the X-Ray SDK, all of zod).`,
  ];
}

/** One line for the bench summary. */
export function bundlesSummary({ rows }: BundlesResult): string {
  const range = (values: number[], digits = 0) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    const f = (n: number) => (digits ? fmt(n, digits) : fmtInt(n));
    return f(lo) === f(hi) ? f(lo) : `${f(lo)}-${f(hi)}`;
  };
  const of = (pick: (row: BundleRow) => number) => rows.map(pick);
  const kb = of((r) => r.kb.agentbus);
  const ms = of((r) => r.initMs.agentbus);
  return `4. Lambda bundles: ${range(kb)} KB (${kb.filter((k) => k <= TARGET_KB).length}/${rows.length} within ${TARGET_KB} KB), init ${range(ms)} ms (${ms.filter((m) => m <= TARGET_INIT_MS).length}/${rows.length} within ${TARGET_INIT_MS} ms), CPU ${range(of((r) => r.cpuMs.agentbus))} ms; ${range(
    of((r) => r.kb.agentbus / r.kb.baseline),
    2,
  )}× the baseline's size and ${range(
    of((r) => r.initMs.agentbus / r.initMs.baseline),
    2,
  )}× its init time.`;
}
