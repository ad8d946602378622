import { RELAY_EVENT_SOURCE } from "../../functions/adapters/eventbridge/publisher";
import { outputId } from "../infra/output-ids";
import { replayName } from "../infra/replay-names";

/**
 * What `agentbus replay` will do, decided before any call that changes something: the window, the
 * archives to replay from and, per archive, the rules of the chosen groups (a replay's
 * `Destination.FilterArns`), each replay under a name derived from what it is. Pure: it reads the
 * stack's outputs, never AWS.
 */

/** Input an operator must fix: the command refuses it (exit code 2) and changes nothing. */
export class ReplayRefused extends Error {}

export interface ReplayWindow {
  readonly from: Date;
  readonly to: Date;
}

/** One topic's replay target, from the stack's outputs. */
export interface TopicReplayTarget {
  readonly topic: string;
  readonly busArn?: string;
  readonly archiveArn?: string;
  /** The rule ARN of each group subscribed to the topic. */
  readonly rules: Readonly<Record<string, string>>;
  /** The subscriber ARN of each group delivered by a subscriber of the topic's new bus. */
  readonly subscribers: Readonly<Record<string, string>>;
}

/** One replay to start: an archive, the bus it replays to and the rules it delivers to. */
export interface ReplayPlan {
  readonly topic: string;
  readonly name: string;
  readonly archiveArn: string;
  readonly busArn: string;
  readonly groups: readonly string[];
  readonly ruleArns: readonly string[];
}

/** ISO 8601: a date (midnight UTC), or a date and time with `Z` or an offset. */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/i;

function parseTime(option: string, text: string | undefined): Date {
  if (text === undefined) throw new ReplayRefused(`${option} is required (an ISO 8601 time)`);
  const at = new Date(text);
  if (!ISO_8601.test(text) || Number.isNaN(at.getTime()))
    throw new ReplayRefused(
      `${option} ${JSON.stringify(text)} is not an ISO 8601 time (2026-11-30T10:00:00Z, with Z or an offset)`,
    );
  return at;
}

/** The window `[from, to)`: both times ISO 8601, `from` before `to`, `to` not in the future. */
export function replayWindow(
  options: { readonly from?: string; readonly to?: string },
  now: Date,
): ReplayWindow {
  const from = parseTime("--from", options.from);
  const to = parseTime("--to", options.to);
  if (from.getTime() >= to.getTime())
    throw new ReplayRefused(`--from ${options.from} is not before --to ${options.to}`);
  if (to.getTime() > now.getTime())
    throw new ReplayRefused(
      `--to ${options.to} is in the future (now is ${now.toISOString()}): only what the archive already holds can be replayed`,
    );
  return { from, to };
}

/**
 * Why the window is outside what an archive (or a new bus) keeps, if it is: it keeps events
 * `retentionDays` (0 = for ever), so `from` must be within that many days of now.
 */
export function retentionProblem(
  window: ReplayWindow,
  archive: {
    readonly name: string;
    readonly retentionDays: number;
    /** What keeps them. @default "archive" */
    readonly kind?: "archive" | "new bus";
  },
  now: Date,
): string | undefined {
  if (archive.retentionDays <= 0) return undefined;
  const oldest = new Date(now.getTime() - archive.retentionDays * 86_400_000);
  if (window.from.getTime() >= oldest.getTime()) return undefined;
  return `--from ${window.from.toISOString()} is outside the retention of ${archive.kind ?? "archive"} ${archive.name} (${archive.retentionDays} days: nothing before ${oldest.toISOString()} is kept)`;
}

/**
 * Each topic's bus and archive ARNs and its groups' rule ARNs, from the outputs the stack declares
 * (`<Topic>BusArn`, `<Topic>ArchiveArn`, `<Group><Topic>RuleArn`; lib/infra/stack-outputs.ts).
 */
export function replayTargets(
  outputs: Readonly<Record<string, string>>,
  topics: readonly string[],
  groups: readonly string[],
): TopicReplayTarget[] {
  return topics.map((topic) => {
    const id = outputId(topic);
    const rules: Record<string, string> = {};
    const subscribers: Record<string, string> = {};
    for (const group of groups) {
      const arn = outputs[`${outputId(group)}${id}RuleArn`];
      if (arn) rules[group] = arn;
      const subscriber = outputs[`${outputId(group)}${id}SubscriberArn`];
      if (subscriber) subscribers[group] = subscriber;
    }
    return {
      topic,
      busArn: outputs[`${id}BusArn`],
      archiveArn: outputs[`${id}ArchiveArn`],
      rules,
      subscribers,
    };
  });
}

/**
 * The groups asked for, each known; every group with a rule or a subscriber when none is asked
 * for.
 */
export function chosenGroups(
  asked: readonly string[],
  known: readonly string[],
  targets: readonly TopicReplayTarget[],
): string[] {
  const unknown = asked.filter((g) => !known.includes(g));
  if (unknown.length > 0)
    throw new ReplayRefused(
      `no consumer group ${unknown.join(", ")} (groups: ${[...known].sort().join(", ")})`,
    );
  if (asked.length > 0) return [...new Set(asked)];
  return known.filter((g) =>
    targets.some((t) => t.rules[g] !== undefined || t.subscribers[g] !== undefined),
  );
}

/**
 * A replay to a group delivered by a subscriber of a topic's new bus, which has no archive: a
 * point-in-time subscriber copied from the group's live one (./replay-subscriber.ts), named as an
 * archive replay of that topic, window and group would be.
 */
export interface SubscriberReplayPlan {
  readonly topic: string;
  readonly group: string;
  readonly name: string;
  /** The group's live subscriber, which the replay copies. */
  readonly subscriberArn: string;
}

/** One point-in-time subscriber per chosen group and topic whose new bus delivers to it. */
export function planSubscriberReplays(
  stage: string,
  targets: readonly TopicReplayTarget[],
  groups: readonly string[],
  window: ReplayWindow,
): SubscriberReplayPlan[] {
  return targets.flatMap((target) =>
    [...groups].sort().flatMap((group) => {
      const subscriberArn = target.subscribers[group];
      if (!subscriberArn) return [];
      const name = replayName({ stage, topic: target.topic, ...window, groups: [group] });
      return [{ topic: target.topic, group, name, subscriberArn }];
    }),
  );
}

/**
 * One replay per topic whose bus feeds a chosen group: from the topic's archive to its bus,
 * delivered to the chosen groups' rules only, named after the stage, topic, window and groups.
 */
export function planReplays(
  stage: string,
  targets: readonly TopicReplayTarget[],
  groups: readonly string[],
  window: ReplayWindow,
): ReplayPlan[] {
  const plans: ReplayPlan[] = [];
  const missing: string[] = [];
  for (const target of targets) {
    const fed = groups.filter((g) => target.rules[g] !== undefined).sort();
    if (fed.length === 0) continue;
    if (!target.archiveArn || !target.busArn) {
      missing.push(target.topic);
      continue;
    }
    plans.push({
      topic: target.topic,
      name: replayName({ stage, topic: target.topic, ...window, groups: fed }),
      archiveArn: target.archiveArn,
      busArn: target.busArn,
      groups: fed,
      ruleArns: fed.map((g) => target.rules[g] as string),
    });
  }
  if (missing.length > 0)
    throw new ReplayRefused(
      `the stack has no archive (or no bus ARN) among its outputs for topic ${missing.join(", ")}: deploy it with archives (not for LocalStack's free image)`,
    );
  const bySubscriber = groups.some((g) => targets.some((t) => t.subscribers[g] !== undefined));
  if (plans.length === 0 && !bySubscriber)
    throw new ReplayRefused(
      `no rule or subscriber of ${groups.join(", ") || "any group"} among the stack's outputs (<Group><Topic>RuleArn, <Group><Topic>SubscriberArn): deploy the current version of the stack`,
    );
  return plans;
}

/** The archive's name (the last part of its ARN), as DescribeArchive takes it. */
export function archiveNameOf(archiveArn: string): string {
  return archiveArn.slice(archiveArn.lastIndexOf("/") + 1);
}

/** A rule's name and bus from its ARN (`...:rule/<bus>/<name>`, or `rule/<name>` on the default bus). */
export function ruleOfArn(ruleArn: string): { readonly name: string; readonly bus: string } {
  const parts = ruleArn.slice(ruleArn.indexOf(":rule/") + ":rule/".length).split("/");
  return parts.length > 1
    ? { bus: parts[0] as string, name: parts.slice(1).join("/") }
    : { bus: "default", name: parts[0] as string };
}

/**
 * The event types a rule's pattern selects (`detail-type`), or undefined when it selects by
 * something else (then every type counts in an estimate).
 */
export function patternTypes(pattern: string | undefined): readonly string[] | undefined {
  try {
    const types = (JSON.parse(pattern ?? "") as { "detail-type"?: unknown })["detail-type"];
    return Array.isArray(types) && types.every((t) => typeof t === "string") ? types : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a rule's pattern leaves out the relay's events (a `delivery: "relay"` group's rule: the
 * relay sends that group its stored events itself), so an archive replay brings it none of them.
 */
export function leavesOutRelay(pattern: string | undefined): boolean {
  try {
    const source = (JSON.parse(pattern ?? "") as { source?: unknown }).source;
    return (
      Array.isArray(source) &&
      source.some((s) => {
        const but = (s as { "anything-but"?: unknown } | null)?.["anything-but"];
        return (
          but === RELAY_EVENT_SOURCE || (Array.isArray(but) && but.includes(RELAY_EVENT_SOURCE))
        );
      })
    );
  } catch {
    return false;
  }
}
