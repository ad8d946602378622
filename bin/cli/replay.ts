import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { Command } from "commander";
import { recordAction } from "../../lib/operator/audit";
import {
  checkRetention,
  estimate,
  type ReplayProgress,
  type ReplayStart,
  startOnce,
  waitForReplays,
} from "../../lib/operator/replay";
import {
  chosenGroups,
  planReplays,
  type ReplayPlan,
  ReplayRefused,
  type ReplayWindow,
  replayTargets,
  replayWindow,
  subscriberGroups,
} from "../../lib/operator/replay-plan";
import type { OpsStack } from "../../lib/operator/stack";
import { withStack } from "./ops";
import { clientConfig, out, type Target, UsageError } from "./target";

/**
 * `agentbus replay --from T1 --to T2 [--group G]... [--dry-run] [--no-wait] [--reason R]`: replay
 * a window of each topic's EventBridge archive to the chosen consumer groups only (every group
 * when none is chosen). Consumers de-duplicate what they already applied (the version gate for
 * stream events, the recorded ids for unsequenced messages); a replayed unsequenced message older than
 * the group's inbox time to live is discarded as expired, never applied twice.
 */

interface ReplayCliOptions {
  readonly from?: string;
  readonly to?: string;
  readonly group: string[];
  readonly dryRun?: boolean;
  readonly wait: boolean;
  readonly reason?: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** Refused input as a usage error: exit code 2, nothing started. */
async function refusing<T>(work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ReplayRefused) throw new UsageError(error.message);
    throw error;
  }
}

function planLines(plans: readonly ReplayPlan[], window: ReplayWindow): string[] {
  return [
    `window ${window.from.toISOString()} .. ${window.to.toISOString()} (event time, end excluded)`,
    ...plans.flatMap((p) => [
      `${p.topic}: replay ${p.name}`,
      `  archive ${p.archiveArn}`,
      `  to bus ${p.busArn}, groups ${p.groups.join(", ")}`,
      ...p.ruleArns.map((arn) => `  rule ${arn}`),
    ]),
  ];
}

function progressLine(p: ReplayProgress): string {
  const at = p.lastReplayed ? `, replayed up to ${p.lastReplayed.toISOString()}` : "";
  return `${p.name}: ${p.state}${at}${p.reason ? ` (${p.reason})` : ""}`;
}

function startLine(s: ReplayStart): string {
  return s.outcome === "started"
    ? `started ${s.plan.name} (${s.state})`
    : `already started: ${s.plan.name} (${s.state}); nothing new started`;
}

/** Validate everything, then plan: nothing has changed when this throws. */
async function planned(
  stack: OpsStack,
  t: Target,
  options: ReplayCliOptions,
  client: EventBridgeClient,
) {
  const now = new Date();
  return refusing(async () => {
    const window = replayWindow(options, now);
    const targets = replayTargets(stack.outputs, Object.keys(stack.names.buses), stack.groups);
    const groups = chosenGroups(options.group, stack.groups, targets);
    const plans = planReplays(t.stage, targets, groups, window);
    await checkRetention(client, plans, window, now);
    return { window, groups, plans, notReplayed: subscriberGroups(targets) };
  });
}

async function run(stack: OpsStack, t: Target, options: ReplayCliOptions): Promise<void> {
  const client = new EventBridgeClient(clientConfig(t));
  try {
    const { window, groups, plans, notReplayed } = await planned(stack, t, options, client);
    for (const line of planLines(plans, window)) out(line);
    if (notReplayed.length > 0)
      out(
        `not replayed: ${notReplayed.join(", ")} (delivered by a subscriber of a new bus, which has no archive; see lib/operator/README.md)`,
      );
    if (options.dryRun) {
      const counts = await estimate(stack, client, plans, window);
      for (const p of plans)
        out(`${p.name}: about ${counts.get(p.name) ?? 0} stored event(s) of the groups' types`);
      out(
        "(an estimate from the events table's stream, of the window's last 24 hours: the stream keeps no more; unsequenced messages are not in it) dry run: nothing started",
      );
      return;
    }
    const starts: ReplayStart[] = [];
    for (const plan of plans) starts.push(await startOnce(client, plan, window, options.reason));
    for (const s of starts) out(startLine(s));
    await audit(stack, t, options, window, groups, starts);
    if (!options.wait) return;
    const ended = await waitForReplays(
      client,
      plans.map((p) => p.name),
      (p) => out(progressLine(p)),
    );
    const failed = ended.filter((p) => p.state !== "COMPLETED");
    if (failed.length > 0)
      throw new Error(`replay ${failed.map((p) => `${p.name} ${p.state}`).join(", ")}`);
  } finally {
    client.destroy();
  }
}

/** The audit record of the replays this run started (none started: nothing to record). */
async function audit(
  stack: OpsStack,
  t: Target,
  options: ReplayCliOptions,
  window: ReplayWindow,
  groups: readonly string[],
  starts: readonly ReplayStart[],
): Promise<void> {
  const started = starts.filter((s) => s.outcome === "started");
  if (started.length === 0) return;
  const id = await recordAction(stack, clientConfig(t), {
    action: "events.replay",
    target: `${window.from.toISOString()}..${window.to.toISOString()} to ${groups.join(",")}`.slice(
      0,
      256,
    ),
    ...(options.reason ? { reason: options.reason } : {}),
    outcome: { count: started.length, event_ids: [], failed: 0 },
  });
  out(`recorded in the audit trail as operator.action.recorded ${id}`);
}

export function replayCommand(targetOf: (command: Command) => Target): Command {
  return new Command("replay")
    .requiredOption("--from <time>", "start of the window (ISO 8601, by event time)")
    .requiredOption("--to <time>", "end of the window, excluded (ISO 8601, not in the future)")
    .option(
      "--group <group>",
      "deliver to this group only (repeat for more; default: every group)",
      collect,
      [],
    )
    .option("--dry-run", "show the archives, rules and an estimate of the events; start nothing")
    .option("--no-wait", "start the replays and return without following them")
    .option("--reason <text>", "why (kept in the audit trail, at most 1000 characters)")
    .action(async function (this: Command, options: ReplayCliOptions) {
      if (options.reason !== undefined && options.reason.length > 1000)
        throw new UsageError(`--reason is ${options.reason.length} characters, at most 1000`);
      const t = targetOf(this);
      await refusing(() => replayWindow(options, new Date()));
      await withStack(t, (stack) => run(stack, t, options));
    });
}
