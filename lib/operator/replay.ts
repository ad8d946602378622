import {
  DescribeArchiveCommand,
  DescribeReplayCommand,
  type DescribeReplayCommandOutput,
  DescribeRuleCommand,
  type EventBridgeClient,
  StartReplayCommand,
} from "@aws-sdk/client-eventbridge";
import { type AwsClient, operation } from "../../functions/adapters/aws/client";
import { EventAttr } from "../../functions/adapters/dynamodb/tables";
import {
  archiveNameOf,
  leavesOutRelay,
  patternTypes,
  type ReplayPlan,
  ReplayRefused,
  type ReplayWindow,
  retentionProblem,
  ruleOfArn,
  type SubscriberReplayPlan,
} from "./replay-plan";
import {
  type PointInTimeSubscriberRequest,
  pointInTimeReplay,
  type SubscriberDescription,
} from "./replay-subscriber";
import type { OpsStack } from "./stack";
import { keysInStreamWindow, STREAM_RETENTION_HOURS, storedEventItems } from "./stream-reads";

/**
 * EventBridge archive replay (`agentbus replay`): the calls that read the archives, estimate what a
 * window holds, start each planned replay once (a replay's name is derived from what it is, so a
 * repeated command finds the replay it started) and follow the replays to their end. The plan
 * itself is pure (./replay-plan.ts).
 */

/** Replay states after which nothing more happens. */
const ENDED = new Set(["COMPLETED", "FAILED", "CANCELLED"]);

/** Refuse a window older than what any of the plans' archives keeps. */
export async function checkRetention(
  client: EventBridgeClient,
  plans: readonly ReplayPlan[],
  window: ReplayWindow,
  now: Date,
): Promise<void> {
  const problems: string[] = [];
  for (const plan of plans) {
    const name = archiveNameOf(plan.archiveArn);
    const archive = await client.send(new DescribeArchiveCommand({ ArchiveName: name }));
    const problem = retentionProblem(
      window,
      { name, retentionDays: archive.RetentionDays ?? 0 },
      now,
    );
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) throw new ReplayRefused(problems.join("; "));
}

/**
 * How many stored events of the window each plan's rules select (their `detail-type`), counted in
 * the events table's stream: of the window's last 24 hours only, which is what the stream keeps.
 */
export async function estimate(
  stack: OpsStack,
  client: EventBridgeClient,
  plans: readonly ReplayPlan[],
  window: ReplayWindow,
  now = new Date(),
): Promise<Map<string, number>> {
  const kept = new Date(now.getTime() - STREAM_RETENTION_HOURS * 3_600_000);
  const from = window.from < kept ? kept : window.from;
  const keys = from <= window.to ? await keysInStreamWindow(stack, from, window.to) : [];
  const types = await eventTypesOf(stack, keys);
  const counts = new Map<string, number>();
  for (const plan of plans) {
    const selected = new Set<string>();
    let everything = false;
    for (const arn of plan.ruleArns) {
      const { name, bus } = ruleOfArn(arn);
      const rule = await client.send(new DescribeRuleCommand({ Name: name, EventBusName: bus }));
      // The stored events of a relay-delivered group are not replayed to it: none to count.
      if (leavesOutRelay(rule.EventPattern)) continue;
      const ruleTypes = patternTypes(rule.EventPattern);
      if (ruleTypes) for (const t of ruleTypes) selected.add(t);
      else everything = true;
    }
    counts.set(plan.name, types.filter((t) => everything || selected.has(t)).length);
  }
  return counts;
}

/** The event type of each key that finds a stored event (that attribute only). */
async function eventTypesOf(
  stack: OpsStack,
  keys: readonly { pk: string; version: number }[],
): Promise<string[]> {
  const items = await storedEventItems(stack, keys, [EventAttr.eventType]);
  return items.map((item) => String(item[EventAttr.eventType]));
}

export interface ReplayStart {
  readonly plan: ReplayPlan;
  /** `started` now, or `existing`: a replay of that name was started before. */
  readonly outcome: "started" | "existing";
  readonly state: string;
}

/** The replay of that name, or undefined when there is none. */
export async function describeReplay(
  client: EventBridgeClient,
  name: string,
): Promise<DescribeReplayCommandOutput | undefined> {
  try {
    return await client.send(new DescribeReplayCommand({ ReplayName: name }));
  } catch (error) {
    if ((error as Error).name === "ResourceNotFoundException") return undefined;
    throw error;
  }
}

/**
 * Start the planned replay unless one of its name exists (then report that one): a command run
 * again never starts a second replay of the same window to the same groups.
 */
export async function startOnce(
  client: EventBridgeClient,
  plan: ReplayPlan,
  window: ReplayWindow,
  reason?: string,
): Promise<ReplayStart> {
  const found = await describeReplay(client, plan.name);
  if (found) return { plan, outcome: "existing", state: found.State ?? "?" };
  try {
    const started = await client.send(
      new StartReplayCommand({
        ReplayName: plan.name,
        Description:
          `agentbus replay to ${plan.groups.join(", ")}${reason ? `: ${reason}` : ""}`.slice(
            0,
            512,
          ),
        EventSourceArn: plan.archiveArn,
        EventStartTime: window.from,
        EventEndTime: window.to,
        Destination: { Arn: plan.busArn, FilterArns: [...plan.ruleArns] },
      }),
    );
    return { plan, outcome: "started", state: started.State ?? "STARTING" };
  } catch (error) {
    // Started by someone else between the two calls: that one is the replay.
    if ((error as Error).name !== "ResourceAlreadyExistsException") throw error;
    const existing = await describeReplay(client, plan.name);
    return { plan, outcome: "existing", state: existing?.State ?? "?" };
  }
}

export interface ReplayProgress {
  readonly name: string;
  readonly state: string;
  readonly lastReplayed?: Date;
  readonly reason?: string;
}

/**
 * Follow replays until each has ended (COMPLETED, FAILED or CANCELLED), telling `onProgress`
 * whenever one's state or last replayed event time changes; the final progress of each.
 */
export async function waitForReplays(
  client: EventBridgeClient,
  names: readonly string[],
  onProgress: (progress: ReplayProgress) => void,
  options: { readonly intervalMs?: number; readonly timeoutMs?: number } = {},
): Promise<ReplayProgress[]> {
  const deadline = Date.now() + (options.timeoutMs ?? 6 * 3_600_000);
  const seen = new Map<string, string>();
  const last = new Map<string, ReplayProgress>();
  for (;;) {
    for (const name of names.filter((n) => !ENDED.has(last.get(n)?.state ?? ""))) {
      const d = await describeReplay(client, name);
      const progress: ReplayProgress = {
        name,
        state: d?.State ?? "MISSING",
        ...(d?.EventLastReplayedTime ? { lastReplayed: d.EventLastReplayedTime } : {}),
        ...(d?.StateReason ? { reason: d.StateReason } : {}),
      };
      const key = `${progress.state}|${progress.lastReplayed?.toISOString() ?? ""}`;
      if (seen.get(name) !== key) onProgress(progress);
      seen.set(name, key);
      last.set(name, d ? progress : { ...progress, state: "FAILED", reason: "the replay is gone" });
    }
    if (names.every((n) => ENDED.has(last.get(n)?.state ?? ""))) return [...last.values()];
    if (Date.now() > deadline) throw new Error(`replays still running: ${names.join(", ")}`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 2000));
  }
}

/**
 * The `eventbridgev2` calls of a replay to a group delivered by a subscriber of a new bus. The AWS
 * SDK for JavaScript has no client for that API: they go through
 * functions/adapters/aws/eventbridge-v2.ts, which speaks its RPC v2 CBOR on an SDK EventBridge
 * client's credential chain. Members as the AWS SDK for Ruby's model names them
 * (aws/aws-sdk-ruby, gems/aws-sdk-eventbridgev2 client_api.rb). IAM:
 * `events:DescribeSubscriber` and `events:ListSubscribers`; `events:CreateSubscriber` on the bus
 * and on the new subscriber's ARN, and `iam:PassRole` on its delivery role
 * (aws/agent-toolkit-for-aws, amazon-eventbridge-event-bus/references/authorization.md).
 */
export const DescribeSubscriber = operation<
  { readonly SubscriberArn: string },
  SubscriberDescription & { readonly SubscriberArn?: string; readonly State?: string }
>("eventsv2", "DescribeSubscriber");

interface SubscriberSummary {
  readonly SubscriberArn?: string;
  readonly Name?: string;
  readonly State?: string;
}

export const DescribeEventBus = operation<
  { readonly EventBusArn: string },
  {
    readonly Name?: string;
    readonly StorageConfiguration?: {
      readonly RetentionPeriodInDays?: number;
      /** The earliest point a subscriber can read from: a young bus's is its creation. */
      readonly RetentionWindowStartTime?: Date;
    };
  }
>("eventsv2", "DescribeEventBus");

export const ListSubscribers = operation<
  { readonly EventBusArn: string; readonly NamePrefix?: string; readonly NextToken?: string },
  { readonly Subscribers?: readonly SubscriberSummary[]; readonly NextToken?: string }
>("eventsv2", "ListSubscribers");

/** `CreateSubscriber` takes the window as timestamps (`Timestamp` shapes): dates on the wire. */
type CreateSubscriberInput = Omit<PointInTimeSubscriberRequest, "PointInTimeConfiguration"> & {
  readonly PointInTimeConfiguration: {
    readonly PointType: "TIMESTAMP";
    readonly StartingPoint: Date;
    readonly EndPoint: Date;
  };
};

export const CreateSubscriber = operation<CreateSubscriberInput, SubscriberSummary>(
  "eventsv2",
  "CreateSubscriber",
);

export interface SubscriberReplayStart {
  readonly plan: SubscriberReplayPlan;
  /** `started` now, or `existing`: a subscriber of that name was created before. */
  readonly outcome: "started" | "existing";
  readonly subscriberArn: string;
  readonly state: string;
  /** Where a subscriber started now reads from: the window's start, or the bus's retention window's. */
  readonly startingPoint?: Date;
}

/** The members of a subscriber's description that a replay copies. */
function copiedMembers(live: SubscriberDescription): SubscriberDescription {
  const { Name, EventBusArn, Type, FilterConfiguration, InvokeConfiguration } = live;
  const { OnFailureConfiguration, RetryPolicy } = live;
  return {
    Name,
    EventBusArn,
    InvokeConfiguration,
    ...(Type ? { Type } : {}),
    ...(FilterConfiguration ? { FilterConfiguration } : {}),
    ...(OnFailureConfiguration ? { OnFailureConfiguration } : {}),
    ...(RetryPolicy ? { RetryPolicy } : {}),
  };
}

/** The subscriber of that name on the bus, if there is one. */
async function subscriberNamed(
  client: AwsClient,
  busArn: string,
  name: string,
): Promise<SubscriberSummary | undefined> {
  let NextToken: string | undefined;
  do {
    const page = await client.send(
      ListSubscribers({
        EventBusArn: busArn,
        NamePrefix: name,
        ...(NextToken ? { NextToken } : {}),
      }),
    );
    const found = page.Subscribers?.find((s) => s.Name === name);
    if (found) return found;
    NextToken = page.NextToken;
  } while (NextToken);
  return undefined;
}

/**
 * Create the planned point-in-time subscriber unless one of its name exists on the bus (then
 * report that one): describe the live subscriber, copy it over the window (pointInTimeReplay) and
 * create it. Its `ClientToken` (from the name) makes a create that races another one the same.
 * The subscriber starts no earlier than the bus's `RetentionWindowStartTime`, which the service
 * refuses a starting point before: on a bus younger than the window, its creation, before which
 * it holds nothing (a window older than the retention period was refused by
 * checkSubscriberRetention).
 */
export async function startSubscriberReplay(
  client: AwsClient,
  plan: SubscriberReplayPlan,
  window: ReplayWindow,
): Promise<SubscriberReplayStart> {
  const live = await client.send(DescribeSubscriber({ SubscriberArn: plan.subscriberArn }));
  const existing = await subscriberNamed(client, live.EventBusArn, plan.name);
  if (existing)
    return {
      plan,
      outcome: "existing",
      subscriberArn: existing.SubscriberArn ?? "?",
      state: existing.State ?? "?",
    };
  const request = pointInTimeReplay(copiedMembers(live), plan.name, window);
  const { StartingPoint, EndPoint } = request.PointInTimeConfiguration;
  const bus = await client.send(DescribeEventBus({ EventBusArn: live.EventBusArn }));
  const kept = bus.StorageConfiguration?.RetentionWindowStartTime?.getTime() ?? 0;
  const startingPoint = new Date(Math.max(StartingPoint * 1000, kept));
  const made = await client.send(
    CreateSubscriber({
      ...request,
      PointInTimeConfiguration: {
        PointType: "TIMESTAMP",
        StartingPoint: startingPoint,
        EndPoint: new Date(EndPoint * 1000),
      },
    }),
  );
  return {
    plan,
    outcome: "started",
    subscriberArn: made.SubscriberArn ?? "?",
    state: made.State ?? "?",
    startingPoint,
  };
}

/**
 * Refuse a window older than what the new buses of the plans keep (their `RetentionPeriodInDays`),
 * as checkRetention refuses one older than an archive keeps: nothing is created when this throws.
 */
export async function checkSubscriberRetention(
  client: AwsClient,
  plans: readonly SubscriberReplayPlan[],
  window: ReplayWindow,
  now: Date,
): Promise<void> {
  const problems: string[] = [];
  const buses = new Set<string>();
  for (const plan of plans) {
    const live = await client.send(DescribeSubscriber({ SubscriberArn: plan.subscriberArn }));
    if (buses.has(live.EventBusArn)) continue;
    buses.add(live.EventBusArn);
    const bus = await client.send(DescribeEventBus({ EventBusArn: live.EventBusArn }));
    const retentionDays = bus.StorageConfiguration?.RetentionPeriodInDays ?? 0;
    const name = bus.Name ?? live.EventBusArn;
    const problem = retentionProblem(window, { name, retentionDays, kind: "new bus" }, now);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) throw new ReplayRefused(problems.join("; "));
}
