import { MetricUnit } from "@aws-lambda-powertools/metrics";
import { SpanKind } from "@opentelemetry/api";
import type { Context } from "aws-lambda";
import {
  registry as defaultRegistry,
  type Envelope,
  type EventRegistry,
  type Topic,
} from "../../schemas";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { DynamoDueIndex } from "../adapters/dynamodb/due";
import { EventBridgePublisher, MAX_PUT_EVENTS_ENTRIES } from "../adapters/eventbridge/publisher";
import { AGENT_RUN_AGGREGATE } from "../core/agent/agent-role";
import { TransientError } from "../core/errors";
import { inSpan } from "../core/genai-spans";
import { parseEnv } from "../core/parse-env";
import type { Clock, DueReader, EventPublisher, StateReader } from "../core/ports";
import { systemClock } from "../core/runtime";
import {
  APPROVAL_DEADLINE_NEAR_METRIC,
  DAG_RUN_AGGREGATE,
  DEFAULT_SWEEP_RATE_SECONDS,
  deadlinesNear,
  LEASE_EXPIRED_METRIC,
  planSweep,
  SWEEPER_PRODUCER,
  SWEPT_AGGREGATES,
  type SweepPlan,
} from "../core/sweeper";
import { containerAwsClient } from "./aws";
import { tracedPublisher } from "./hop-spans";
import { lambdaEntry } from "./lambda-entry";
import { type Observability, observability } from "./observe";

/** How long before its deadline a wait for a person counts as near, unless told otherwise. */
export const DEFAULT_APPROVAL_WARNING_SECONDS = 600;

/** The lease sweeper: the state table (and its by-due index) and the buses it reports on. */
export const SweeperEnv = z
  .object({
    STATE_TABLE: z.string().check(z.minLength(1)),
    BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_EVENTS: z.optional(z.string().check(z.minLength(1))),
    /** Most due aggregates handled per invocation. */
    SWEEP_LIMIT: z._default(z.coerce.number().check(z.int(), z.minimum(1), z.maximum(1000)), 100),
    /** Seconds between two scheduled sweeps: what a report's `attempt` is counted in. */
    SWEEP_RATE_SECONDS: z._default(
      z.coerce.number().check(z.int(), z.minimum(1)),
      DEFAULT_SWEEP_RATE_SECONDS,
    ),
    /** Seconds before an approval's or confirmation's deadline at which it counts as near. */
    APPROVAL_WARNING_SECONDS: z._default(
      z.coerce.number().check(z.int(), z.minimum(0)),
      DEFAULT_APPROVAL_WARNING_SECONDS,
    ),
  })
  .check(
    z.refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS, {
      message: "at least one BUS_<TOPIC> must be set",
    }),
  );
export type SweeperEnv = z.output<typeof SweeperEnv>;

export interface SweepReport {
  /** Aggregates the due index listed. */
  readonly due: number;
  /** States read: the due DAG runs, agent runs and conversations. */
  readonly loaded: number;
  readonly leaseExpired: number;
  readonly releaseRequested: number;
  readonly confirmExpired: number;
  readonly dependencyExpired: number;
  /** Wait nodes whose time came. */
  readonly waitExpired: number;
  /** Agent runs BLOCKED past an approval's deadline, sent their `deadline` decision. */
  readonly approvalExpired: number;
  /** Approvals and confirmations whose deadline is within `APPROVAL_WARNING_SECONDS`. */
  readonly deadlineNear: number;
  readonly published: number;
  readonly failed: number;
}

export interface SweeperOptions {
  readonly env?: Record<string, string | undefined>;
  readonly dynamodb?: AwsClient;
  readonly eventbridge?: AwsClient;
  readonly clock?: Clock;
  readonly registry?: EventRegistry;
  readonly observability?: Observability;
  /** Replaces the DynamoDB due index (tests). */
  readonly index?: DueReader & StateReader;
  /** Replaces the EventBridge publisher (tests). */
  readonly publisher?: EventPublisher;
  readonly onReport?: (report: SweepReport) => void;
}

export type SweeperHandler = (event?: unknown, context?: Context) => Promise<SweepReport>;

/**
 * The scheduled lease sweeper (an EventBridge schedule invokes it every minute): reads the state
 * table's by-due index, loads the due states it acts on (`SWEPT_AGGREGATES`: DAG runs, agent runs,
 * conversations), plans with functions/core/sweeper.ts and puts `node.lease.expired`,
 * `node.confirm.expired`, `node.dependency.expired`, `node.wait.expired`, an agent run's approval
 * deadline, `conversation.hold.expired` (events bus) and `workflow.release.requested` (commands
 * bus) on the bus the registry puts each type on. The ids are deterministic, so a retried or overlapping sweep
 * is de-duplicated by the orchestrator's inbox. Entries that could not be published fail the
 * invocation (after the rest went out), so the schedule's retry tries again.
 */
export function createSweeperHandler(options: SweeperOptions = {}): SweeperHandler {
  const env = parseEnv(SweeperEnv, options.env ?? process.env, "sweeper");
  const { logger, metrics, tracer, telemetry } =
    options.observability ?? observability(SWEEPER_PRODUCER);
  const clock = options.clock ?? systemClock;
  const registry = options.registry ?? defaultRegistry;
  const index =
    options.index ??
    new DynamoDueIndex({
      client: tracer.capture(options.dynamodb ?? containerAwsClient()),
      stateTable: env.STATE_TABLE,
    });
  const publisher = sweepPublisher(env, options, tracer);

  const sweep = async () => {
    try {
      const now = clock.now();
      const due = await index.due(now, env.SWEEP_LIMIT);
      const swept = due.filter((ref) => SWEPT_AGGREGATES.has(ref.type));
      const states = swept.length > 0 ? await index.loadStates(swept) : [];
      const plan = planSweep(states, now, registry, env.SWEEP_RATE_SECONDS);
      const { published, failures } = await publishPlan(publisher, plan);
      const near = await countDeadlinesNear(index, now, env);
      const report = {
        ...sweepReport(due.length, states.length, plan, published, failures.length),
        deadlineNear: near,
      };
      addSweepMetrics(metrics, report);
      if (report.published || report.failed) logger.info("swept", { ...report });
      options.onReport?.(report);
      if (failures.length > 0)
        throw new TransientError(
          "sweeper.publish_failed",
          `${failures.length} sweeper messages were not published: ${failures
            .map((f) => `${f.eventId} ${f.code}`)
            .join(", ")}`,
        );
      return report;
    } finally {
      metrics.publishStoredMetrics();
    }
  };
  return async () => {
    await telemetry.ready;
    try {
      return await inSpan("sweep", { kind: SpanKind.INTERNAL, attributes: {} }, sweep);
    } finally {
      await telemetry.flush();
    }
  };
}

/**
 * The sweeper's publisher (the one given, else EventBridge's), each message in its `publish` span
 * (./hop-spans.ts), a child of the sweep's.
 */
function sweepPublisher(
  env: SweeperEnv,
  options: SweeperOptions,
  tracer: Observability["tracer"],
): EventPublisher {
  const buses: Partial<Record<Topic, string>> = {
    commands: env.BUS_COMMANDS,
    events: env.BUS_EVENTS,
  };
  const publisher =
    options.publisher ??
    new EventBridgePublisher({
      client: tracer.capture(options.eventbridge ?? containerAwsClient()),
      buses,
    });
  return tracedPublisher(publisher, (topic) => buses[topic]);
}

function addSweepMetrics(metrics: Observability["metrics"], report: SweepReport): void {
  metrics.addMetric(LEASE_EXPIRED_METRIC, MetricUnit.Count, report.leaseExpired);
  metrics.addMetric("ReleaseRequested", MetricUnit.Count, report.releaseRequested);
  metrics.addMetric("ConfirmExpired", MetricUnit.Count, report.confirmExpired);
  metrics.addMetric("DependencyExpired", MetricUnit.Count, report.dependencyExpired);
  metrics.addMetric("WaitExpired", MetricUnit.Count, report.waitExpired);
  metrics.addMetric("ApprovalExpired", MetricUnit.Count, report.approvalExpired);
  metrics.addMetric(APPROVAL_DEADLINE_NEAR_METRIC, MetricUnit.Count, report.deadlineNear);
}

/**
 * Waits for a person whose deadline comes within the warning window: the DAG runs and agent runs
 * due by then but not yet (the due index lists them by their earliest deadline), loaded and
 * counted by deadlinesNear. 0 when the window is 0.
 */
async function countDeadlinesNear(
  index: DueReader & StateReader,
  now: Date,
  env: SweeperEnv,
): Promise<number> {
  if (env.APPROVAL_WARNING_SECONDS === 0) return 0;
  const windowMs = env.APPROVAL_WARNING_SECONDS * 1000;
  const soon = await index.due(new Date(now.getTime() + windowMs), env.SWEEP_LIMIT);
  const runs = soon.filter(
    (ref) => ref.type === DAG_RUN_AGGREGATE || ref.type === AGENT_RUN_AGGREGATE,
  );
  if (runs.length === 0) return 0;
  return deadlinesNear(await index.loadStates(runs), now, windowMs);
}

/** What one sweep found and sent, by kind. */
function sweepReport(
  due: number,
  loaded: number,
  plan: SweepPlan,
  published: number,
  failed: number,
): Omit<SweepReport, "deadlineNear"> {
  const count = (type: string) =>
    plan.messages.filter((m) => m.envelope.event_type === type).length;
  return {
    due,
    loaded,
    leaseExpired: count("node.lease.expired"),
    releaseRequested: count("workflow.release.requested"),
    confirmExpired: count("node.confirm.expired"),
    dependencyExpired: count("node.dependency.expired"),
    waitExpired: count("node.wait.expired"),
    approvalExpired: plan.messages.filter((m) => m.envelope.aggregate.type === AGENT_RUN_AGGREGATE)
      .length,
    published,
    failed,
  };
}

/** Put the plan's messages on their buses, 10 per PutEvents call; what failed is returned. */
async function publishPlan(
  publisher: EventPublisher,
  plan: ReturnType<typeof planSweep>,
): Promise<{ published: number; failures: { eventId: string; code: string; message: string }[] }> {
  const byTopic = new Map<Topic, Envelope[]>();
  for (const { topic, envelope } of plan.messages)
    byTopic.set(topic, [...(byTopic.get(topic) ?? []), envelope]);
  let published = 0;
  const failures: { eventId: string; code: string; message: string }[] = [];
  for (const [topic, envelopes] of byTopic) {
    for (let i = 0; i < envelopes.length; i += MAX_PUT_EVENTS_ENTRIES) {
      const chunk = envelopes.slice(i, i + MAX_PUT_EVENTS_ENTRIES);
      const failed = await publisher.publish(topic, chunk);
      failures.push(...failed);
      published += chunk.length - failed.length;
    }
  }
  return { published, failures };
}

export const { create, handler } = lambdaEntry(createSweeperHandler);
