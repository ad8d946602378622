import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { Command } from "commander";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { eventBridgeV2Client } from "../../functions/adapters/aws/eventbridge-v2";
import { recordAction } from "../../lib/operator/audit";
import {
  checkRetention,
  checkSubscriberRetention,
  estimate,
  type ReplayProgress,
  type ReplayStart,
  type SubscriberReplayStart,
  startOnce,
  startSubscriberReplay,
  waitForReplays,
} from "../../lib/operator/replay";
import {
  chosenGroups,
  planReplays,
  planSubscriberReplays,
  type ReplayPlan,
  ReplayRefused,
  type ReplayWindow,
  replayTargets,
  replayWindow,
  type SubscriberReplayPlan,
} from "../../lib/operator/replay-plan";
import {
  planStreamReplays,
  replayFromStream,
  type StreamReplayPlan,
} from "../../lib/operator/replay-stream";
import { LOCAL_EVENTBRIDGEV2_ENDPOINT, type OpsStack } from "../../lib/operator/stack";
import { withStack } from "./ops";
import { clientConfig, NotFoundError, out, type Target, UsageError } from "./target";

/**
 * `agentbus replay --from T1 --to T2 [--group G]... [--dry-run] [--no-wait] [--reason R]`: replay
 * a window of each topic's EventBridge archive to the chosen consumer groups only (every group
 * when none is chosen); to a group delivered by a subscriber of a topic's new bus, which has no
 * archive, create a point-in-time subscriber over what the bus retains; to a group that reads the
 * events table's stream, send the window's stored events of its types (the stream keeps 24
 * hours) to its queue (lib/operator/replay-stream.ts). Consumers de-duplicate what they already applied (the version gate for
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

function startLine(s: ReplayStart | SubscriberReplayStart): string {
  return s.outcome === "started"
    ? `started ${s.plan.name} (${s.state})`
    : `already started: ${s.plan.name} (${s.state}); nothing new started`;
}

function subscriberPlanLines(plans: readonly SubscriberReplayPlan[]): string[] {
  return plans.flatMap((p) => [
    `${p.topic}: point-in-time subscriber ${p.name} on the topic's new bus`,
    `  a copy of ${p.subscriberArn}, to group ${p.group}`,
  ]);
}

/** What agentbus does not follow: a point-in-time subscriber delivers on its own. */
function subscriberLine(s: SubscriberReplayStart): string {
  const from = s.startingPoint ? ` from ${s.startingPoint.toISOString()}` : "";
  return `${s.plan.name}: subscriber ${s.subscriberArn} delivers the window${from} to ${s.plan.group}; agentbus does not follow it (delete it once delivered: aws eventbridgev2 delete-subscriber --subscriber-arn ${s.subscriberArn})`;
}

/**
 * The client of the new buses' API (`eventbridgev2`), which no SDK client speaks, on the SDK
 * EventBridge client's credentials and region; locally, the endpoint the local stack serves it on.
 */
function newBusesClient(stack: OpsStack, t: Target, sdk: EventBridgeClient): AwsClient {
  if (!t.endpoint) return eventBridgeV2Client(sdk);
  const endpoint = stack.outputs[LOCAL_EVENTBRIDGEV2_ENDPOINT];
  if (!endpoint)
    throw new NotFoundError(
      `the stack at ${t.endpoint} serves no eventbridgev2 endpoint (no ${LOCAL_EVENTBRIDGEV2_ENDPOINT} among its outputs): is it the local stack, still running?`,
    );
  return eventBridgeV2Client(sdk, { endpoint });
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
    // A group that reads the events table's stream has no rule: its replay is from the stream.
    const streamPlans = planStreamReplays(t.stage, stack.outputs, groups, window, now);
    const streamed = new Set(streamPlans.map((p) => p.group));
    const busGroups = groups.filter((g) => !streamed.has(g));
    const plans =
      busGroups.length > 0 || streamed.size === 0
        ? planReplays(t.stage, targets, busGroups, window)
        : [];
    const subscriberPlans = planSubscriberReplays(t.stage, targets, groups, window);
    await checkRetention(client, plans, window, now);
    if (subscriberPlans.length > 0)
      await checkSubscriberRetention(
        newBusesClient(stack, t, client),
        subscriberPlans,
        window,
        now,
      );
    return { window, groups, plans, subscriberPlans, streamPlans };
  });
}

async function run(stack: OpsStack, t: Target, options: ReplayCliOptions): Promise<void> {
  const client = new EventBridgeClient(clientConfig(t));
  try {
    const { window, groups, plans, subscriberPlans, streamPlans } = await planned(
      stack,
      t,
      options,
      client,
    );
    for (const line of planLines(plans, window)) out(line);
    for (const line of subscriberPlanLines(subscriberPlans)) out(line);
    for (const p of streamPlans)
      out(`stream: replay ${p.name} from the events table's stream to ${p.group}'s queue`);
    if (options.dryRun) return await dryRun(stack, client, plans, window);
    const streamedNow = await replayStreams(stack, streamPlans, window);
    const starts: ReplayStart[] = [];
    for (const plan of plans) starts.push(await startOnce(client, plan, window, options.reason));
    const subscribed: SubscriberReplayStart[] = [];
    if (subscriberPlans.length > 0) {
      const v2 = newBusesClient(stack, t, client);
      for (const plan of subscriberPlans)
        subscribed.push(await startSubscriberReplay(v2, plan, window));
    }
    for (const s of [...starts, ...subscribed]) out(startLine(s));
    const started = [...starts, ...subscribed].filter((s) => s.outcome === "started").length;
    await audit(stack, t, options, window, groups, started + streamedNow);
    for (const s of subscribed.filter((x) => x.outcome === "started")) out(subscriberLine(s));
    if (!options.wait || plans.length === 0) return;
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

/** Each stream group's replay, sent at once (nothing to follow): the count it sent. */
async function replayStreams(
  stack: OpsStack,
  plans: readonly StreamReplayPlan[],
  window: ReplayWindow,
): Promise<number> {
  for (const plan of plans) {
    const sent = await replayFromStream(stack, plan, window);
    out(`${plan.name}: ${sent} stored event(s) sent to ${plan.group}'s queue`);
  }
  return plans.length;
}

async function dryRun(
  stack: OpsStack,
  client: EventBridgeClient,
  plans: readonly ReplayPlan[],
  window: ReplayWindow,
): Promise<void> {
  if (plans.length === 0) {
    out("dry run: nothing started");
    return;
  }
  const counts = await estimate(stack, client, plans, window);
  for (const p of plans)
    out(`${p.name}: about ${counts.get(p.name) ?? 0} stored event(s) of the groups' types`);
  out(
    "(an estimate from the events table's stream, of the window's last 24 hours: the stream keeps no more; unsequenced messages are not in it) dry run: nothing started",
  );
}

/** The audit record of the replays this run started (none started: nothing to record). */
async function audit(
  stack: OpsStack,
  t: Target,
  options: ReplayCliOptions,
  window: ReplayWindow,
  groups: readonly string[],
  started: number,
): Promise<void> {
  if (started === 0) return;
  const id = await recordAction(stack, clientConfig(t), {
    action: "events.replay",
    target: `${window.from.toISOString()}..${window.to.toISOString()} to ${groups.join(",")}`.slice(
      0,
      256,
    ),
    ...(options.reason ? { reason: options.reason } : {}),
    outcome: { count: started, event_ids: [], failed: 0 },
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
