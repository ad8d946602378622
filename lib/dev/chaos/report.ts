import { FAULT_KINDS } from "../faults/kinds";
import { replayCommand } from "../faults/schedule";
import type { StackScheduleResult } from "./schedule";

const WHERE = ["dynamodb", "sqs", "eventbridge", "sns", "kms", "channel"] as const;

/**
 * The summary of a full-stack chaos run: how many of each fault were injected, and where (the
 * service of the call, or for the runtime's faults the consumer group or function); what was
 * played and how it ended; the time per schedule; then `N schedules, M violations`.
 */
export function renderSummary(results: readonly StackScheduleResult[], seconds: number): string {
  const lines = ["", "faults injected (all schedules):", ...faultTable(results)];
  lines.push(`  runtime faults by function: ${runtimeFaultsByFunction(results)}`, "");
  lines.push("what was played:", ...playedLines(results), "");
  lines.push(...wholeBatchLines(results));
  const times = results.map((r) => r.ms / 1000).sort((a, b) => a - b);
  const mean = times.reduce((a, b) => a + b, 0) / Math.max(1, times.length);
  lines.push(
    `time per schedule: mean ${mean.toFixed(1)} s, median ${(times[Math.floor(times.length / 2)] ?? 0).toFixed(1)} s, max ${(times.at(-1) ?? 0).toFixed(1)} s; total ${seconds.toFixed(0)} s with the deployment`,
  );
  const failing = results.filter((r) => r.violations.length > 0);
  if (failing.length > 0) {
    lines.push(`violations by invariant: ${byInvariant(results)}`);
    lines.push(`failing seeds: ${failing.map((r) => r.seed).join(", ")}`);
    for (const r of failing) lines.push(`  replay: ${replayCommand(r.seed, "stack")}`);
  }
  const violations = results.reduce((n, r) => n + r.violations.length, 0);
  lines.push(`${results.length} schedules, ${violations} violations`);
  return lines.join("\n");
}

function faultTable(results: readonly StackScheduleResult[]): string[] {
  const byKind = new Map<string, Map<string, number>>();
  for (const r of results)
    for (const [key, n] of Object.entries(r.injected)) {
      const [kind = "", where = ""] = key.split(" ");
      const row = byKind.get(kind) ?? new Map<string, number>();
      const column = (WHERE as readonly string[]).includes(where) ? where : "runtime";
      row.set(column, (row.get(column) ?? 0) + n);
      byKind.set(kind, row);
    }
  const columns = [...WHERE, "runtime", "total"];
  const header = `  ${"fault".padEnd(20)}${columns.map((c) => c.padStart(12)).join("")}`;
  const rows = FAULT_KINDS.map((kind) => {
    const row = byKind.get(kind) ?? new Map<string, number>();
    const total = [...row.values()].reduce((a, b) => a + b, 0);
    const cells = [...WHERE, "runtime"].map((c) => String(row.get(c) ?? 0).padStart(12));
    const on = results.filter((r) => r.plan.rates[kind] > 0).length;
    return `  ${kind.padEnd(20)}${cells.join("")}${String(total).padStart(12)}   (on in ${on} plans)`;
  });
  return [header, ...rows];
}

function playedLines(results: readonly StackScheduleResult[]): string[] {
  const count = (values: string[]) => {
    const m = new Map<string, number>();
    for (const v of values) m.set(v, (m.get(v) ?? 0) + 1);
    return [...m].map(([v, n]) => `${n} × ${v}`).join(", ");
  };
  const tasks = results.map((r) => `${r.workload.task.steps} lifecycle events + feedback`);
  const messages = results.reduce((n, r) => n + r.workload.conversation.messages.length, 0);
  return [
    `  reference tasks: ${count(tasks)}`,
    `  content runs:    ${count(results.map((r) => r.outcome.run))}`,
    `  conversations:   ${results.length} (${messages} customer messages); newest reply ${count(results.map((r) => r.outcome.reply))}`,
    `  poison messages: ${results.length}`,
  ];
}

function byInvariant(results: readonly StackScheduleResult[]): string {
  const counts = new Map<string, number>();
  for (const r of results)
    for (const v of r.violations) counts.set(v.invariant, (counts.get(v.invariant) ?? 0) + 1);
  return [...counts].map(([invariant, n]) => `${invariant} ${n}`).join(", ");
}

/**
 * Batches whose invocation failed as a whole, by function: on AWS each waits out its visibility
 * timeout and holds back every entity in it (the runtime released them at once).
 */
function wholeBatchLines(results: readonly StackScheduleResult[]): string[] {
  const byFunction = new Map<string, number>();
  for (const r of results)
    for (const f of r.failedInvocations) {
      const fn = f.split(": ")[0] ?? f;
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + 1);
    }
  if (byFunction.size === 0) return ["batches failed as a whole: none", ""];
  return [
    "batches failed as a whole (each would wait out its visibility timeout on AWS):",
    ...[...byFunction].map(([fn, n]) => `  ${fn}  ${n}`),
    "",
  ];
}

/** The runtime's faults (crashes, lost acks, stalls) by the consumer group or function they hit. */
function runtimeFaultsByFunction(results: readonly StackScheduleResult[]): string {
  const byWhere = new Map<string, number>();
  for (const r of results)
    for (const [key, n] of Object.entries(r.injected)) {
      const [, where = ""] = key.split(" ");
      if ((WHERE as readonly string[]).includes(where)) continue;
      byWhere.set(where, (byWhere.get(where) ?? 0) + n);
    }
  return [...byWhere].map(([where, n]) => `${where} ${n}`).join(", ") || "none";
}
