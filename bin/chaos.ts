import { Command, InvalidArgumentError } from "commander";
import { runStackChaos } from "../lib/dev/chaos/run";
import { playSchedule, type ScheduleResult } from "../lib/dev/sim/schedule";

/**
 * `npm run chaos -- [--schedules N] [--seed S]`: plays N simulated schedules (seeds S, S+1, ...)
 * of the task projection, the audit group, the content workflow and the support conversation over
 * the in-memory adapters, each under a fault plan drawn from its seed (throttled loads and
 * commits, commits whose answer is lost, relay batches published twice, crashes after a commit,
 * consumers that stall past their visibility timeout, a failing reply channel, a poison message,
 * one redrive), and checks the
 * invariants after each (lib/dev/sim/invariants.ts). Prints what was injected and done, then
 * `N schedules, M violations`; a schedule that breaks an invariant prints its seed (play it alone
 * with `--seed S --schedules 1`) and the run exits 1.
 *
 * `--stack` plays full-stack schedules instead (lib/dev/chaos): the stack deployed once to moto_server
 * with its handlers on the local runtime, each schedule a reference task, a content run, a support
 * conversation and a poison message under a fault plan injected at the AWS boundary (SDK
 * middleware) and in the runtime (crashes, lost acks, stalled model calls); 20 schedules by
 * default. Same summary line, same exit code.
 */

const positive = (name: string) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`${name} must be a positive integer`);
  return n;
};

const program = new Command()
  .name("npm run chaos --")
  .description("Simulated schedules under random faults, checked against the invariants.")
  .option(
    "--schedules <n>",
    "how many schedules to play (default: 10000 simulated, 20 on the stack)",
    positive("--schedules"),
  )
  .option("--seed <s>", "the first schedule's seed", positive("--seed"), 1)
  .option("--stack", "play full-stack schedules on moto and the local runtime")
  .option(
    "--endpoint <url>",
    "with --stack: deploy stage chaos to this running emulator (refused if it is there already)",
  )
  .option("--reset", "with --endpoint: wipe that emulator (moto_server) first")
  .parse();

const options = program.opts<{
  schedules?: number;
  seed: number;
  stack?: boolean;
  endpoint?: string;
  reset?: boolean;
}>();
const { seed } = options;
const schedules = options.schedules ?? (options.stack ? 20 : 10_000);
const out = (line = "") => process.stdout.write(`${line}\n`);

async function stack(): Promise<number> {
  const results = await runStackChaos({
    schedules,
    seed,
    endpoint: options.endpoint,
    reset: options.reset,
    out,
  });
  return results.some((r) => r.violations.length > 0) ? 1 : 0;
}

async function main(): Promise<number> {
  const started = performance.now();
  const totals: Record<string, number> = {};
  const withFault: Record<string, number> = {};
  const failing: ScheduleResult[] = [];
  let violations = 0;
  for (let s = seed; s < seed + schedules; s++) {
    const result = await playSchedule(s);
    for (const [kind, n] of Object.entries(result.counts)) totals[kind] = (totals[kind] ?? 0) + n;
    for (const [fault, rate] of Object.entries(result.faults))
      if (rate > 0) withFault[fault] = (withFault[fault] ?? 0) + 1;
    if (result.violations.length > 0) {
      violations += result.violations.length;
      failing.push(result);
      out(`seed ${s}: ${result.violations.length} violation(s)`);
      for (const v of result.violations.slice(0, 5)) out(`  ${v.invariant}: ${v.detail}`);
    }
    if ((s - seed + 1) % 1000 === 0)
      out(
        `  ${s - seed + 1} schedules played, ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
  }
  const seconds = (performance.now() - started) / 1000;
  out();
  out("what the schedules did (totals):");
  const width = Math.max(...Object.keys(totals).map((k) => k.length));
  for (const [kind, n] of Object.entries(totals).sort((a, b) => b[1] - a[1]))
    out(`  ${kind.padEnd(width)}  ${String(n).padStart(9)}`);
  out("schedules whose plan had each fault on:");
  for (const [fault, n] of Object.entries(withFault))
    out(`  ${fault.padEnd(width)}  ${String(n).padStart(9)}`);
  out(
    `${schedules} schedules in ${seconds.toFixed(1)} s (${((seconds * 1000) / schedules).toFixed(1)} ms each), seeds ${seed}-${seed + schedules - 1}`,
  );
  if (failing.length > 0) out(`failing seeds: ${failing.map((f) => f.seed).join(", ")}`);
  out(`${schedules} schedules, ${violations} violations`);
  return failing.length > 0 ? 1 : 0;
}

(options.stack ? stack() : main()).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `chaos failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
