import { MetricUnit } from "@aws-lambda-powertools/metrics";
import type { SQSRecord } from "aws-lambda";
import type { Envelope } from "../../schemas";
import type { AwsClient } from "../adapters/aws/client";
import { SendMessage } from "../adapters/aws/operations";
import { EventBridgePublisher } from "../adapters/eventbridge/publisher";
import { extendVisibility } from "../adapters/sqs/visibility";
import { buildHeartbeat } from "../core/emit";
import { describe } from "../core/errors";
import {
  HEARTBEAT_TARGETS_ENV,
  type HeartbeatSend,
  heartbeatSendsOf,
} from "../core/heartbeat-routes";
import type { ConsumerDeps } from "../core/ports";
import type { Role } from "../core/role";
import { containerAwsClient } from "./aws";
import { type ConsumerEnv, queueUrlBeside } from "./env";
import type { Observability } from "./observe";
import { receiveCountOf } from "./retry";

export interface HeartbeatWiring {
  readonly env: ConsumerEnv;
  readonly sqs: AwsClient;
  readonly eventbridge?: AwsClient;
  readonly deps: Pick<ConsumerDeps, "registry" | "ids" | "clock">;
  readonly observability: Observability;
}

/** Runs `work` for one record, with the heartbeat on while it runs (when configured). */
export type WithHeartbeat = <T>(
  record: SQSRecord,
  raw: unknown,
  work: () => Promise<T>,
) => Promise<T>;

/**
 * Heartbeat (`HEARTBEAT_SECONDS` > 0): when a record enters the pipeline, the role's
 * `heartbeat(event, receiveCount)` message (its `first` message when it has one), if it has one, is sent
 * at once (`deliveryOf`: straight to the queues of the groups that take it, and to the events bus
 * when a group fed by the bus takes it): the acknowledgement that the work has started (seed 001 §2: the
 * orchestrator's lease of the node runs from here, not from when the request was queued; a
 * content agent acknowledges with `node.started`). Then the timer ticks every that many seconds
 * and renews each of two things once half of what it last bought has passed, as a lease is renewed
 * at half its term (`renewalDue`):
 * - the message's visibility, set to `VISIBILITY_TIMEOUT_SECONDS` again once half of it has passed
 *   since the message was received (`receivedAt`) or last extended. The stack's queues keep a
 *   message at least six times the function's timeout, so a record received once is extended
 *   only when its invocation started long after the receive (a throttled function); one received
 *   again does not say when, so the first tick extends it;
 * - the role's heartbeat, sent again once half of its `leaseSeconds` has passed since the last
 *   one went out (the acknowledgement counts; a heartbeat without `leaseSeconds` goes at every
 *   tick). Each beat is a delivery the orchestrator receives and handles, so a beat per tick would
 *   cost a long model call one every 20 s.
 * A renewal that fails is logged, never fails the record, and is tried again at the next tick;
 * the timer stops when the record is settled.
 */
export function heartbeatFor<S>(role: Role<S>, wiring: HeartbeatWiring): WithHeartbeat {
  const { env } = wiring;
  if (!(env.HEARTBEAT_SECONDS > 0)) return (_record, _raw, work) => work();
  const beat = beater(role, wiring);
  return async (record, raw, work) => {
    // The lease counts as renewed once the acknowledgement went out: until then every tick tries.
    const renewed: Renewals = { visibility: receivedAt(record), beat: Number.NEGATIVE_INFINITY };
    let beating: Promise<void> | undefined = beat(record, raw, renewed, { first: true }).finally(
      () => {
        beating = undefined;
      },
    );
    const timer = setInterval(() => {
      if (beating) return;
      beating = beat(record, raw, renewed, { first: false }).finally(() => {
        beating = undefined;
      });
    }, env.HEARTBEAT_SECONDS * 1000);
    try {
      return await work();
    } finally {
      clearInterval(timer);
      await beating;
    }
  };
}

/** When a record's visibility and its heartbeat were last renewed, in ms since the epoch. */
interface Renewals {
  visibility: number;
  beat: number;
}

/**
 * When the message's current visibility started, in ms since the epoch: its receive, which SQS
 * stamps on the first receive only (`ApproximateFirstReceiveTimestamp`). A message received again
 * does not say when it was (-Infinity: extended at the first tick).
 */
export function receivedAt(record: SQSRecord): number {
  const first = Number(record.attributes.ApproximateFirstReceiveTimestamp);
  return receiveCountOf(record) === 1 && Number.isFinite(first) ? first : Number.NEGATIVE_INFINITY;
}

/**
 * Whether a renewal made at `renewedAt` that bought `termSeconds` is due again at `now` (ms):
 * once half of the term has passed. No term: at every tick.
 */
export function renewalDue(now: number, renewedAt: number, termSeconds: number | undefined) {
  return termSeconds === undefined || now - renewedAt >= termSeconds * 500;
}

/**
 * When a record's heartbeat renews a term of `termSeconds` while a piece of work of `workSeconds`
 * runs, in seconds from its start: the timer ticks every `tickSeconds` and renews as
 * `heartbeatFor` does (each renewal going out). What the bench prices long model calls' beats with.
 */
export function renewalTimes(
  workSeconds: number,
  tickSeconds: number,
  termSeconds: number | undefined,
): number[] {
  const times: number[] = [];
  let renewedAt = 0;
  for (let at = tickSeconds; at < workSeconds; at += tickSeconds) {
    if (!renewalDue(at * 1000, renewedAt * 1000, termSeconds)) continue;
    renewedAt = at;
    times.push(at);
  }
  return times;
}

/**
 * One tick: extend the record's visibility when it is due (not on the `first` tick, as the record
 * enters the pipeline) and deliver the role's heartbeat (`deliveryOf`) when it is due (always on
 * the first); never throws.
 */
function beater<S>(role: Role<S>, wiring: HeartbeatWiring) {
  const { env, sqs, deps } = wiring;
  const { logger, metrics } = wiring.observability;
  const deliver = role.heartbeat ? deliveryOf(wiring) : undefined;
  return async (
    record: SQSRecord,
    raw: unknown,
    renewed: Renewals,
    { first }: { first: boolean },
  ) => {
    if (!first && renewalDue(Date.now(), renewed.visibility, env.VISIBILITY_TIMEOUT_SECONDS))
      await extendVisibility(
        sqs,
        env.QUEUE_URL,
        record.receiptHandle,
        env.VISIBILITY_TIMEOUT_SECONDS,
      ).then(
        () => {
          renewed.visibility = Date.now();
        },
        (e: unknown) =>
          logger.warn("heartbeat: could not extend the message visibility", { error: describe(e) }),
      );
    if (!deliver || !role.heartbeat) return;
    try {
      const parsed = deps.registry.parse(raw);
      // The beats report on this processing attempt of the record: its receive count.
      const attempt = receiveCountOf(record);
      const beat = parsed.ok ? role.heartbeat(parsed.envelope, attempt) : undefined;
      const spec = first ? (beat?.first ?? beat) : beat;
      if (!parsed.ok || !spec) return;
      if (!first && !renewalDue(Date.now(), renewed.beat, spec.leaseSeconds)) return;
      const envelope = buildHeartbeat(spec, parsed.envelope, role.group, deps, attempt);
      const topic = deps.registry.get(envelope.event_type, envelope.schema_version)?.topic;
      if (topic !== "events") {
        logger.warn("heartbeat: not on the events topic", { event_type: envelope.event_type });
        return;
      }
      if (!(await deliver(envelope))) return;
      renewed.beat = Date.now();
      metrics.addMetric("Heartbeat", MetricUnit.Count, 1);
    } catch (e) {
      logger.warn("heartbeat: could not publish", { error: describe(e) });
    }
  };
}

/**
 * What delivers a heartbeat (../core/heartbeat-routes.ts): straight to the queue of each group of
 * `HEARTBEAT_TARGETS` whose rule takes it (one SendMessage each, the queues beside QUEUE_URL),
 * and onto `EVENTS_BUS_NAME` when the stack names it (a group fed by the bus takes heartbeats).
 * Whether it all went out; what failed is logged. None when neither is set.
 */
function deliveryOf(wiring: HeartbeatWiring) {
  const { env, sqs } = wiring;
  const { logger, tracer } = wiring.observability;
  const targets = env[HEARTBEAT_TARGETS_ENV] ?? [];
  const publisher = env.EVENTS_BUS_NAME
    ? new EventBridgePublisher({
        client: tracer.capture(wiring.eventbridge ?? containerAwsClient()),
        buses: { events: env.EVENTS_BUS_NAME },
      })
    : undefined;
  if (!publisher && targets.length === 0) {
    logger.warn(
      `HEARTBEAT_SECONDS is set but neither EVENTS_BUS_NAME nor ${HEARTBEAT_TARGETS_ENV} is: heartbeats extend the message visibility only`,
    );
    return undefined;
  }
  const send = async ({ target, message }: HeartbeatSend): Promise<boolean> => {
    try {
      await sqs.send(
        SendMessage({
          QueueUrl: queueUrlBeside(env.QUEUE_URL, target.queue),
          MessageBody: message.body,
          MessageGroupId: message.groupId,
          MessageDeduplicationId: message.deduplicationId,
        }),
      );
      return true;
    } catch (e) {
      logger.warn("heartbeat: not sent", { group: target.group, error: describe(e) });
      return false;
    }
  };
  return async (envelope: Envelope): Promise<boolean> => {
    const sent = await Promise.all(heartbeatSendsOf(targets, envelope).map(send));
    const failures = publisher ? await publisher.publish("events", [envelope]) : [];
    if (failures.length > 0)
      logger.warn("heartbeat: not published", { failures: failures.map((f) => f.code) });
    return failures.length === 0 && sent.every(Boolean);
  };
}
