import { Command } from "commander";
import { stopMessage } from "../../functions/core/model-guard";
import { resumeWork, type StopTarget, stopTargetProblem, stopWork } from "../../lib/operator/stops";
import { withStack } from "./ops";
import { out, type Target, UsageError } from "./target";

/**
 * `agentbus stop --tenant <id> | --run <id> [--reason <text>]` and `agentbus resume` with the same
 * target: the kill switch (lib/operator/stops.ts). Exit 0 when stopped (or stopped already) and
 * resumed (or not stopped); 2 for a bad target (nothing recorded).
 */

type TargetOf = (command: Command) => Target;

interface StopOptions {
  readonly tenant?: string;
  readonly run?: string;
  readonly reason?: string;
  readonly json?: boolean;
}

function targetOfOptions(options: StopOptions): StopTarget {
  if ((options.tenant === undefined) === (options.run === undefined))
    throw new UsageError("name what to act on: --tenant <id> or --run <id> (one of them)");
  const target: StopTarget =
    options.tenant !== undefined
      ? { scope: "tenant", id: options.tenant }
      : { scope: "run", id: options.run ?? "" };
  const problem = stopTargetProblem(target);
  if (problem) throw new UsageError(`${problem}; nothing recorded`);
  if (options.reason !== undefined && options.reason.length > 1000)
    throw new UsageError("--reason takes at most 1000 characters; nothing recorded");
  return target;
}

function withTargetOptions(command: Command): Command {
  return command
    .option("--tenant <id>", "every run of this tenant")
    .option("--run <id>", "this run only (an agent run's id, or a workflow run's)")
    .option("--reason <text>", "why, in your words (kept in the audit record)")
    .option("--json", "print the report as JSON");
}

export function stopCommand(targetOf: TargetOf): Command {
  return withTargetOptions(new Command("stop")).action(async function (
    this: Command,
    options: StopOptions,
  ) {
    const target = targetOfOptions(options);
    const report = await withStack(targetOf(this), (stack) =>
      stopWork(stack, target, { via: "cli", ...reasonOf(options) }),
    );
    if (options.json) {
      out(JSON.stringify(report));
      return;
    }
    out(
      report.recorded
        ? `stopped: ${stopMessage(report.stop)}`
        : `already stopped: ${stopMessage(report.stop)}`,
    );
    out(`  workflow runs cancelled  ${report.runsCancelled.join(", ") || "none in flight"}`);
    for (const { runId, problem } of report.runsNotCancelled)
      out(`  not cancelled           ${runId}: ${problem}`);
    out(`  recorded in the audit trail as operator.stopped ${report.auditId}`);
  });
}

export function resumeCommand(targetOf: TargetOf): Command {
  return withTargetOptions(new Command("resume")).action(async function (
    this: Command,
    options: StopOptions,
  ) {
    const target = targetOfOptions(options);
    const report = await withStack(targetOf(this), (stack) =>
      resumeWork(stack, target, { via: "cli", ...reasonOf(options) }),
    );
    if (options.json) {
      out(JSON.stringify(report));
      return;
    }
    const { lifted } = report;
    out(
      lifted
        ? `resumed: ${target.scope} ${target.id} (stopped by ${lifted.by} at ${lifted.at}); new work runs again`
        : `${target.scope} ${target.id} was not stopped; nothing lifted`,
    );
    out(`  recorded in the audit trail as operator.resumed ${report.auditId}`);
  });
}

function reasonOf(options: StopOptions): { readonly reason?: string } {
  return options.reason === undefined ? {} : { reason: options.reason };
}
