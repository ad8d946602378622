import { describePlan, replayCommand } from "../faults/schedule";
import { type LocalEnvironment, startLocal } from "../local/environment";
import { writeDiagnosis } from "./diagnose";
import { FaultInjector } from "./injector";
import { TRACE_SHOWS_OUTCOME } from "./invariants";
import { renderSummary } from "./report";
import { playStackSchedule, type StackScheduleResult } from "./schedule";

export interface StackChaosOptions {
  readonly schedules: number;
  readonly seed: number;
  /** A running emulator to deploy to (default: start moto_server on 127.0.0.1). */
  readonly endpoint?: string;
  /** Wipe `endpoint` first; without it, an emulator that has stage chaos already is refused. */
  readonly reset?: boolean;
  readonly out?: (line: string) => void;
}

/**
 * `npm run chaos -- --stack`: deploys the stack once (moto_server and the local runtime, with the
 * fault injector on the functions' clients), plays schedules seed, seed+1, ... on it, each under
 * its own fault plan and fresh ids, and checks each. Prints a line per schedule (with a diagnosis
 * file for one that breaks an invariant other than the trace's) and the summary; returns the
 * results (the caller decides the exit code).
 */
export async function runStackChaos(options: StackChaosOptions): Promise<StackScheduleResult[]> {
  const out = options.out ?? (() => {});
  const injector = new FaultInjector();
  const started = performance.now();
  const env = await startLocal({
    stage: "chaos",
    faultInjection: injector,
    ...(options.endpoint ? { endpoint: options.endpoint, reset: Boolean(options.reset) } : {}),
  });
  out(`stack deployed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  const results: StackScheduleResult[] = [];
  try {
    for (let s = options.seed; s < options.seed + options.schedules; s++)
      results.push(await playOne(env, injector, s, out));
  } finally {
    await env.stop();
  }
  out(renderSummary(results, (performance.now() - started) / 1000));
  return results;
}

async function playOne(
  env: LocalEnvironment,
  injector: FaultInjector,
  seed: number,
  out: (line: string) => void,
): Promise<StackScheduleResult> {
  const result = await playStackSchedule(env, injector, seed);
  const faults = Object.values(result.injected).reduce((a, b) => a + b, 0);
  out(
    `${describePlan(result.plan)} | ${faults} faults | run ${result.outcome.run}, reply ${result.outcome.reply} | ${(result.ms / 1000).toFixed(1)} s | ${result.violations.length} violations`,
  );
  // The trace's misses after a retry are many and alike: every other kind is shown first.
  const shown = [...result.violations].sort(
    (a, b) =>
      Number(a.invariant === TRACE_SHOWS_OUTCOME) - Number(b.invariant === TRACE_SHOWS_OUTCOME),
  );
  for (const v of shown.slice(0, 8)) out(`  ${v.invariant}: ${v.detail}`);
  for (const f of result.failedInvocations.slice(0, 3))
    out(`  failed invocation: ${f.slice(0, 300)}`);
  if (result.violations.some((v) => v.invariant !== TRACE_SHOWS_OUTCOME))
    out(`  faults and traces: ${await writeDiagnosis(env, result)}`);
  if (result.violations.length > 0) out(`  replay: ${replayCommand(seed, "stack")}`);
  return result;
}
