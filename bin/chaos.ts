import { Command, InvalidArgumentError } from "commander";
import { runStackChaos } from "../lib/dev/chaos/run";
import { describePlan, replayCommand } from "../lib/dev/faults/schedule";
import {
  playA2aSchedule,
  playMcpSchedule,
  playSchedule,
  type ScheduleResult,
} from "../lib/dev/sim/schedule";

/**
 * `npm run chaos -- [--schedules N] [--seed S]`: plays N simulated schedules (seeds S, S+1, ...)
 * of the task projection, the audit group, the content workflow, a headline scoring workflow (a
 * map node and a loop over step roles written with the kit, now and then as a child run) and the
 * support conversation over the in-memory adapters, each under a fault plan drawn from its seed
 * (throttled loads and commits, commits whose answer is lost, relay batches published twice,
 * crashes after a commit, consumers that stall past their visibility timeout, a failing reply
 * channel, payment stand-in and judge, a poison message, one redrive), and checks the
 * invariants after each (lib/dev/faults/invariants.ts). Prints what was injected and done, then
 * `N schedules, M violations`; a schedule that breaks an invariant prints its plan, what it broke
 * and the command that plays it alone (`--seed S --schedules 1`), and the run exits 1.
 *
 * `--stack` plays full-stack schedules instead (lib/dev/chaos): the stack deployed once to moto_server
 * with its handlers on the local runtime, each schedule a reference task, a content run, a support
 * conversation and a poison message under a fault plan injected at the AWS boundary (SDK
 * middleware) and in the runtime (crashes, lost acks, stalled model calls); 20 schedules by
 * default. Same summary line, same exit code.
 *
 * `--mcp-only` plays only the MCP write tools' part of each simulated schedule (an agent whose
 * writes are an MCP server's tools, lib/dev/sim/mcp-desk.ts), with the same seeds and plans;
 * `--a2a-only` the A2A write tools' part (an agent whose write is a message to another system's
 * A2A agent, lib/dev/sim/a2a-billing.ts).
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
  .option("--mcp-only", "play only the MCP write tools' part of each simulated schedule")
  .option("--a2a-only", "play only the A2A write tools' part of each simulated schedule")
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
  mcpOnly?: boolean;
  a2aOnly?: boolean;
  endpoint?: string;
  reset?: boolean;
}>();
if (options.mcpOnly && options.a2aOnly) program.error("--mcp-only and --a2a-only: choose one");
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
  const injected: Record<string, number> = {};
  const counts: Record<string, number> = {};
  const plans: Record<string, number> = {};
  const failing: ScheduleResult[] = [];
  let violations = 0;
  for (let s = seed; s < seed + schedules; s++) {
    const result = await play(s);
    add(injected, result.injected);
    add(counts, result.counts);
    for (const [name, rate] of Object.entries<number>(result.plan.rates))
      if (rate > 0) add(plans, { [name]: 1 });
    if (result.violations.length > 0) {
      violations += result.violations.length;
      failing.push(result);
      out(`${describePlan(result.plan)} | ${result.violations.length} violations`);
      for (const v of result.violations.slice(0, 5)) out(`  ${v.invariant}: ${v.detail}`);
      out(`  replay: ${replayCommand(s, "memory")}`);
    }
    if ((s - seed + 1) % 1000 === 0)
      out(
        `  ${s - seed + 1} schedules played, ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
  }
  const seconds = (performance.now() - started) / 1000;
  out();
  table("faults injected (totals, by kind and where):", injected);
  table("what the schedules did (totals):", counts);
  table("schedules whose plan had each fault on:", plans, false);
  out(
    `${schedules} schedules in ${seconds.toFixed(1)} s (${((seconds * 1000) / schedules).toFixed(1)} ms each), seeds ${seed}-${seed + schedules - 1}`,
  );
  if (failing.length > 0) out(`failing seeds: ${failing.map((f) => f.seed).join(", ")}`);
  out(`${schedules} schedules, ${violations} violations`);
  return failing.length > 0 ? 1 : 0;
}

/** One schedule: all of it, or only its MCP or A2A part. */
function play(seed: number): Promise<ScheduleResult> {
  if (options.mcpOnly) return playMcpSchedule(seed);
  if (options.a2aOnly) return playA2aSchedule(seed);
  return playSchedule(seed);
}

function add(into: Record<string, number>, counts: Readonly<Record<string, number>>): void {
  for (const [kind, n] of Object.entries(counts)) into[kind] = (into[kind] ?? 0) + n;
}

/** A titled list of counts, the largest first unless the order is kept. */
function table(title: string, counts: Record<string, number>, sorted = true): void {
  out(title);
  const rows = Object.entries(counts);
  if (sorted) rows.sort((a, b) => b[1] - a[1]);
  const width = Math.max(26, ...rows.map(([kind]) => kind.length));
  for (const [kind, n] of rows) out(`  ${kind.padEnd(width)}  ${String(n).padStart(9)}`);
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
