import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Random } from "../../lib/dev/faults/random";

/** Median, minimum and maximum of a non-empty list of samples. */
export interface Summary {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Half the min-max range relative to the median (0.05 = ±5 %). */
  readonly spread: number;
  readonly samples: readonly number[];
}

export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error("summarize: no samples");
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const median =
    sorted.length % 2 === 1
      ? (sorted[mid] ?? 0)
      : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  const min = sorted[0] ?? 0;
  const max = sorted.at(-1) ?? 0;
  return { median, min, max, spread: median > 0 ? (max - min) / (2 * median) : 0, samples };
}

/**
 * A forced full garbage collection, so that heap figures and timed samples do not carry the
 * previous sample's garbage. `--expose-gc` is switched on at run time (tsx owns the node command
 * line); when that is not possible the function does nothing.
 */
export const collectGarbage: () => void = (() => {
  try {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as unknown;
    if (typeof gc === "function") return () => gc();
  } catch {
    // fall through: no forced collection
  }
  return () => undefined;
})();

/** Heap in use after a forced collection, in bytes. */
export function heapUsed(): number {
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

export interface Pass<T> {
  /** Untimed: builds what one pass needs (fresh stores, fresh maps). */
  readonly prepare: () => T;
  /** Timed: processes the workload once and returns how many events it handled. */
  readonly run: (prepared: T) => Promise<number>;
}

/**
 * One throughput sample in events per second: whole passes are repeated until at least `minMs`
 * of timed work has accumulated, so fast runners are not measured on a few milliseconds.
 */
export async function sampleThroughput<T>(pass: Pass<T>, minMs: number): Promise<number> {
  collectGarbage();
  let events = 0;
  let elapsed = 0;
  do {
    const prepared = pass.prepare();
    const start = performance.now();
    events += await pass.run(prepared);
    elapsed += performance.now() - start;
  } while (elapsed < minMs);
  return events / (elapsed / 1000);
}

/** A deterministic pseudo-random generator (lib/dev/sim's) so every run shuffles the same way. */
export function seededRandom(seed: number): () => number {
  const random = new Random(seed);
  return () => random.next();
}

/** Fisher-Yates shuffle in place. */
export function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const a = items[i] as T;
    items[i] = items[j] as T;
    items[j] = a;
  }
  return items;
}

const grouped = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export const fmtInt = (n: number): string => grouped.format(Math.round(n));
export const fmt = (n: number, digits = 2): string => n.toFixed(digits);
export const fmtMiB = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
export const fmtPct = (fraction: number): string => `±${(fraction * 100).toFixed(1)}%`;

/** A plain-text table: left-aligned first column(s), right-aligned numbers. */
export function renderTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly ("l" | "r")[],
): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => {
        const width = widths[i] ?? cell.length;
        return align[i] === "r" ? cell.padStart(width) : cell.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)];
}
