import { Command } from "commander";
import { recordAction } from "../../lib/operator/audit";
import {
  MAX_WINDOW_HOURS,
  type RepublishReport,
  republishFailures,
  republishWindow,
} from "../../lib/operator/republish";
import { withStack } from "./ops";
import { clientConfig, out, type Target, UsageError } from "./target";

/**
 * `agentbus republish`: put stored events on their buses again, read from the events table: those
 * of a time window (found in the events table's stream, which keeps 24 hours), or those of the
 * batches the relay gave up on (its failure queue holds the relay's records of their keys, and the
 * stream event source's records of their stream positions). Consumers deduplicate.
 */

interface RepublishCliOptions {
  readonly from?: string;
  readonly to?: string;
  readonly failures?: boolean;
  readonly dryRun?: boolean;
  readonly reason?: string;
}

function windowOf(options: RepublishCliOptions): { from: Date; to: Date } | undefined {
  if (options.failures) {
    if (options.from || options.to)
      throw new UsageError("give either --failures or --from/--to, not both");
    return undefined;
  }
  if (!options.from || !options.to)
    throw new UsageError("give --from and --to (ISO 8601 times), or --failures");
  const from = new Date(options.from);
  const to = new Date(options.to);
  if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()))
    throw new UsageError(`--from ${options.from} / --to ${options.to}: not ISO 8601 times`);
  if (to < from) throw new UsageError("--to is before --from");
  if (to.getTime() - from.getTime() > MAX_WINDOW_HOURS * 3_600_000)
    throw new UsageError(
      `the window is longer than ${MAX_WINDOW_HOURS} hours (what the events table's stream keeps); split it`,
    );
  if (options.reason !== undefined && options.reason.length > 1000)
    throw new UsageError(`--reason is ${options.reason.length} characters, at most 1000`);
  return { from, to };
}

function line(r: RepublishReport): string {
  const what = r.dryRun
    ? `${r.found} event(s) would be republished`
    : `${r.published} of ${r.found} event(s) republished`;
  const failed = r.failed.length ? `, ${r.failed.length} failed` : "";
  const why = r.found === 0 ? r.failed.map((f) => ` (${f.error})`).join("") : "";
  return `${r.what}: ${what}${failed}${why}`;
}

export function republishCommand(targetOf: (command: Command) => Target): Command {
  return new Command("republish")
    .option("--from <time>", "start of the window (ISO 8601, by occurred_at)")
    .option("--to <time>", "end of the window (ISO 8601)")
    .option("--failures", "the events of the relay's failure records (deleted once republished)")
    .option("--dry-run", "count what would be republished; put nothing")
    .option("--reason <text>", "why (kept in the audit trail, at most 1000 characters)")
    .action(async function (this: Command, options: RepublishCliOptions) {
      const window = windowOf(options);
      const t = targetOf(this);
      await withStack(t, async (stack) => {
        const config = clientConfig(t);
        const reports = window
          ? [await republishWindow(stack, config, { ...window, dryRun: Boolean(options.dryRun) })]
          : await republishFailures(stack, config, Boolean(options.dryRun));
        if (reports.length === 0) out("nothing to republish (the relay's failure queue is empty)");
        for (const r of reports) out(line(r));
        const published = reports.reduce((n, r) => n + r.published, 0);
        const failed = reports.flatMap((r) => r.failed);
        if (options.dryRun || published + failed.length === 0) return;
        const id = await recordAction(stack, config, {
          action: "events.republish",
          target: window
            ? `${window.from.toISOString()}..${window.to.toISOString()}`
            : "relay-failures",
          ...(options.reason ? { reason: options.reason } : {}),
          outcome: { count: published, event_ids: [], failed: failed.length },
        });
        out(`recorded in the audit trail as operator.action.recorded ${id}`);
        if (failed.length)
          throw new Error(`${failed.length} event(s) could not be put on their bus`);
      });
    });
}
