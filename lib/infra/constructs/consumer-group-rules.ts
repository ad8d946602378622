import { Duration } from "aws-cdk-lib";

/**
 * Defaults and limits of a consumer group, as pure data and pure functions: the topology
 * declaration (`lib/infra/topology.ts`) and the `ConsumerGroup` construct apply the same defaults and
 * report the same problems, and tests check them without synthesizing anything.
 */

/**
 * How a group's events are ordered.
 * - `fifo`: per order key. The group reads a FIFO queue keyed by the envelope's order key and
 *   de-duplicated by event id; a buffer queue and a delivery hop sit between rule and FIFO queue.
 * - `none`: no order needed (e.g. audit). A standard queue and a standard DLQ; the rule targets the
 *   group's queue directly.
 */
export const ORDERINGS = ["fifo", "none"] as const;
export type Ordering = (typeof ORDERINGS)[number];

/**
 * How events get from the buffer queue into a FIFO group's queue.
 * - `dispatch-function`: a dispatch Lambda sets the message group from each envelope. Runs on
 *   LocalStack's free image and on the local runtime.
 * - `pipe`: an EventBridge Pipe with a dynamic `MessageGroupId` (`$.body.detail.order_key`); no
 *   function to run or pay for, but neither moto nor LocalStack's free image runs Pipes. Every
 *   envelope on the topic must carry `order_key` (the relay always sets it).
 * - `subscriber`: no buffer and no hop. The relay also publishes the topic's events to the topic's
 *   new EventBridge bus (`AWS::EventsV2::EventBus`) with `EventGroupId` = order key, and a FIFO
 *   subscriber per topic sends them to the group's FIFO queue with the group id as
 *   `MessageGroupId`. Not verified in an account yet, and no emulator has it (the local runtime
 *   emulates it from the template).
 * - `relay`: the relay sends each stored event it reads from the events table's stream straight to
 *   the group's FIFO queue (MessageGroupId = order key, or the tenant's lane with
 *   `tenantConcurrency`, as the dispatch function computes it; MessageDeduplicationId = event id),
 *   when the group's rule takes it: no bus event, buffer queue or dispatch function per stored
 *   event. What is not stored (a client's, the CLI's or the front door's PutEvents, the sweeper,
 *   heartbeats, `agentbus republish`, an archive replay) still takes the rule, buffer and dispatch
 *   function, whose rule leaves out the relay's own source. Not with a `deliveryBatchingWindow`,
 *   which only a dispatch function or a pipe applies.
 * - `stream`: no bus, no rule, no buffer and no FIFO queue. The consumer reads the events table's
 *   stream itself, in batches, through an event source mapping that lets through only the INSERTs of
 *   the subscribed types (Lambda event filtering: what it drops is not billed). For groups that emit
 *   nothing (projections): their order comes from the stream (per item) and the version gate (gap
 *   repair from the event store), their dedup from the inbox and checkpoints as on every path. The
 *   group keeps a standard queue, fed only by a redrive of its dead letters.
 */
export const DELIVERIES = ["dispatch-function", "pipe", "subscriber", "relay", "stream"] as const;
export type Delivery = (typeof DELIVERIES)[number];

/** Envelope fields a group may be ordered by (its FIFO message group). */
export const ORDER_KEYS = ["order_key"] as const;
export type OrderKey = (typeof ORDER_KEYS)[number];

/**
 * Longest group name. With a stage of up to 16 characters `agentbus-<stage>-<group>-buffer-dlq`
 * fits SQS's 80 characters; with a longer stage the consumer group checks its queue names.
 */
export const GROUP_NAME_MAX_LENGTH = 40;

/** Longest deployment stage (`-c stage=...`), part of every physical name. */
export const STAGE_MAX_LENGTH = 20;

/** SQS queue names (with `.fifo`) are at most 80 characters. */
export const MAX_QUEUE_NAME_LENGTH = 80;

/** Largest SQS batch a Lambda event source takes, per queue type. */
export const MAX_BATCH_SIZE: Readonly<Record<Ordering, number>> = { fifo: 10, none: 10_000 };

/** Largest batch of stream records a Lambda event source takes (DynamoDB Streams). */
export const MAX_STREAM_BATCH_SIZE = 10_000;

/** SQS cannot keep a message invisible for 12 hours or more. */
export const MAX_QUEUE_VISIBILITY_SECONDS = 12 * 60 * 60;

/** The settings every group has once defaults are applied. */
export interface GroupSettings {
  readonly ordering: Ordering;
  readonly delivery: Delivery;
  readonly orderKey: OrderKey;
  readonly batchSize: number;
  readonly maxConcurrency: number;
  readonly maxReceiveCount: number;
  readonly functionTimeout: Duration;
  readonly visibilityTimeout: Duration;
  /**
   * Most consumer invocations one tenant's events may hold at once (1 to `maxConcurrency - 1`):
   * the dispatch function keys the FIFO queue by tenant lane instead of by order key (`messageGroupOf`
   * in functions/core/dispatch.ts). Unset: one message group per order key, no per-tenant bound.
   */
  readonly tenantConcurrency?: number;
}

/** The group settings that `source` (a group declaration, say) sets, and nothing else of it. */
export function pickGroupSettings(source: Partial<GroupSettings>): Partial<GroupSettings> {
  return {
    ordering: source.ordering,
    delivery: source.delivery,
    orderKey: source.orderKey,
    batchSize: source.batchSize,
    maxConcurrency: source.maxConcurrency,
    maxReceiveCount: source.maxReceiveCount,
    functionTimeout: source.functionTimeout,
    visibilityTimeout: source.visibilityTimeout,
    tenantConcurrency: source.tenantConcurrency,
  };
}

/** Defaults of every group setting; `visibilityTimeout` follows `functionTimeout`. */
export function groupDefaults(functionTimeout = Duration.seconds(30)): GroupSettings {
  return {
    ordering: "fifo",
    delivery: "dispatch-function",
    orderKey: "order_key",
    batchSize: 10,
    maxConcurrency: 2,
    maxReceiveCount: 5,
    functionTimeout,
    visibilityTimeout: Duration.seconds(functionTimeout.toSeconds() * 6),
  };
}

/** `overrides` (undefined values ignored) merged over the defaults. */
export function withGroupDefaults(overrides: Partial<GroupSettings>): GroupSettings {
  const defined = Object.fromEntries(
    Object.entries(overrides).filter(([, value]) => value !== undefined),
  ) as Partial<GroupSettings>;
  return { ...groupDefaults(defined.functionTimeout), ...defined };
}

const KEBAB = /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/;

/** Why `value` is not a kebab-case name of at most `maxLength` characters, if it is not. */
export function kebabCaseProblem(what: string, value: unknown, maxLength: number) {
  if (typeof value === "string" && KEBAB.test(value) && value.length <= maxLength) return undefined;
  return `${what} ${JSON.stringify(value)} must be kebab-case (a-z, 0-9, single hyphens, starting with a letter) and at most ${maxLength} characters`;
}

/**
 * Why `value` is not a usable deployment stage, if it is not: kebab-case (lower-case letters,
 * digits and single hyphens, starting with a letter), at most `STAGE_MAX_LENGTH` characters.
 */
export function stageProblem(value: unknown, what = "stage") {
  return kebabCaseProblem(what, value, STAGE_MAX_LENGTH);
}

/** Why `value` is not an integer from `min` to `max`, if it is not. */
export function integerProblem(what: string, value: number, min: number, max: number, hint = "") {
  if (Number.isInteger(value) && value >= min && value <= max) return undefined;
  return `${what} is ${value}, must be an integer from ${min} to ${max}${hint}`;
}

/** Why `value` is not one of `allowed`, if it is not. */
export function oneOfProblem(what: string, value: unknown, allowed: readonly string[]) {
  if (typeof value === "string" && allowed.includes(value)) return undefined;
  return `${what} ${JSON.stringify(value)} is not supported (supported: ${allowed.map((a) => JSON.stringify(a)).join(", ")})`;
}

/**
 * Everything wrong with a group's settings, each problem naming the bad value (and, for
 * relations between settings, both values). Empty when the settings are fine.
 */
export function groupSettingsProblems(settings: GroupSettings): string[] {
  const problems: (string | undefined)[] = [
    oneOfProblem("ordering", settings.ordering, ORDERINGS),
    oneOfProblem("delivery", settings.delivery, DELIVERIES),
    oneOfProblem("orderKey", settings.orderKey, ORDER_KEYS),
  ];
  if (settings.ordering === "none" && settings.delivery !== "dispatch-function") {
    problems.push(
      `delivery ${JSON.stringify(settings.delivery)} needs ordering "fifo" (ordering "none" delivers from the rule straight to the group's standard queue)`,
    );
  }
  const ordering: Ordering = settings.ordering === "none" ? "none" : "fifo";
  const stream = settings.delivery === "stream";
  const maxBatch = stream ? MAX_STREAM_BATCH_SIZE : MAX_BATCH_SIZE[ordering];
  problems.push(
    integerProblem(
      "batchSize",
      settings.batchSize,
      1,
      maxBatch,
      stream
        ? " (stream records per invocation)"
        : ordering === "fifo"
          ? " (FIFO queues deliver at most 10)"
          : " (standard queues)",
    ),
    integerProblem("maxConcurrency", settings.maxConcurrency, 2, 1000),
    integerProblem("maxReceiveCount", settings.maxReceiveCount, 1, 1000),
  );
  const timeoutSeconds = settings.functionTimeout.toSeconds();
  const timeoutProblem = integerProblem("functionTimeout (seconds)", timeoutSeconds, 1, 900);
  problems.push(timeoutProblem);
  const visibilitySeconds = settings.visibilityTimeout.toSeconds();
  if (!timeoutProblem && visibilitySeconds < timeoutSeconds * 6) {
    problems.push(
      `visibilityTimeout ${visibilitySeconds}s is under 6x functionTimeout ${timeoutSeconds}s (at least ${timeoutSeconds * 6}s)`,
    );
  }
  problems.push(
    integerProblem(
      "visibilityTimeout (seconds)",
      visibilitySeconds,
      0,
      MAX_QUEUE_VISIBILITY_SECONDS,
    ),
  );
  problems.push(...tenantConcurrencyProblems(settings));
  return problems.filter((p): p is string => p !== undefined);
}

/**
 * `tenantConcurrency` needs a FIFO group delivered by the dispatch function or the relay, which
 * both compute the lane (`messageGroupOf`; a Pipe or a subscriber can only copy a field into the
 * message group), and must leave at least one of the group's
 * invocations to the other tenants.
 */
function tenantConcurrencyProblems(settings: GroupSettings): (string | undefined)[] {
  const lanes = settings.tenantConcurrency;
  if (lanes === undefined) return [];
  if (settings.ordering !== "fifo")
    return [
      `tenantConcurrency ${lanes} needs ordering "fifo" (it bounds a tenant's message groups)`,
    ];
  if (settings.delivery !== "dispatch-function" && settings.delivery !== "relay")
    return [
      `tenantConcurrency ${lanes} needs delivery "dispatch-function" or "relay" (a ${settings.delivery} copies the order key into the message group and cannot compute a tenant's lane)`,
    ];
  return [
    integerProblem(
      "tenantConcurrency",
      lanes,
      1,
      settings.maxConcurrency - 1,
      ` (below maxConcurrency ${settings.maxConcurrency}, so one tenant never holds every invocation)`,
    ),
  ];
}
