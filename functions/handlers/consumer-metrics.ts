import { type Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { ModelCallSink } from "../adapters/model-calls";
import { stepIdsOf } from "../core/agent/agent-role";
import { type AttentionRule, signalsRaisedBy } from "../core/attention";
import { guardRecordOf } from "../core/output-guard";
import type { ConsumeResult } from "../core/role";
import type { Observability } from "./observe";

/**
 * What a consumer publishes about its records (Powertools metrics, namespace `AgentBus`,
 * dimensions `service` and `consumer_group`, both the group name), from what the handler already
 * has: no AWS call of its own. The CDK constructs import these names for their dashboards and
 * alarms; the metrics of what a person must act on are those of the signals the group's module
 * declares (functions/core/attention.ts).
 */

/**
 * One count per delivery of a record (every attempt): the denominator of the retry and expiry
 * rates the stack alarms on (`Retried` / `Received`, `DiscardedByReason` `expired` / `Received`).
 */
export const RECEIVED_METRIC = "Received";

/** Counts one delivery of a record. */
export function recordReceived(metrics: Metrics): void {
  metrics.addMetric(RECEIVED_METRIC, MetricUnit.Count, 1);
}

/** One count per step of a consumed record, by its status. */
export const STEP_METRICS: Readonly<Record<ConsumeResult["status"], string>> = {
  applied: "Applied",
  duplicate: "Duplicate",
  discarded: "Discarded",
  rejected: "Rejected",
};

/** Timings of a record, in milliseconds. */
export const TIMING_METRICS = {
  /** From the delivered event's `occurred_at` to the start of its processing (every attempt). */
  lag: "ConsumerLag",
  /** From the start of a record's processing to its end, for records the pipeline consumed. */
  processingTime: "ProcessingTime",
} as const;

/** Per model call: its latency (ms) and tokens in and out (count). */
export const MODEL_METRICS = {
  latency: "ModelLatency",
  inputTokens: "ModelInputTokens",
  outputTokens: "ModelOutputTokens",
} as const;

/**
 * The output guard's verdicts and findings the events a consumed record emitted carry
 * (functions/core/output-guard.ts): one `OutputGuardVerdict` per guarded text, by `verdict`, and
 * one `OutputGuardFinding` per finding, by `kind`.
 */
export const OUTPUT_GUARD_METRICS = {
  verdict: "OutputGuardVerdict",
  finding: "OutputGuardFinding",
} as const;

/** The counts of guard verdicts and finding kinds in what a record emitted (`verdict:pass`, `kind:secret`). */
export function guardCounts(result: ConsumeResult): Map<string, number> {
  const counts = new Map<string, number>();
  const add = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  for (const step of result.steps)
    for (const event of step.emitted) {
      const record = guardRecordOf(event);
      if (!record) continue;
      add(`verdict:${record.verdict}`);
      for (const finding of record.findings) add(`kind:${finding.kind}`);
    }
  return counts;
}

function recordGuardCounts(result: ConsumeResult, metrics: Metrics): void {
  for (const [key, count] of guardCounts(result)) {
    const [dimension = "", value = ""] = key.split(":");
    const single = metrics.singleMetric();
    single.addDimension(dimension, value);
    const name =
      dimension === "verdict" ? OUTPUT_GUARD_METRICS.verdict : OUTPUT_GUARD_METRICS.finding;
    single.addMetric(name, MetricUnit.Count, count);
  }
}

/**
 * How many of the events a consumed record emitted raise each signal of `rules` (the group's
 * module's `deployment.attention`), by the signal's metric: each event counts once per signal it
 * raises. Published only where there is one.
 */
export function attentionCounts(
  result: ConsumeResult,
  rules: readonly AttentionRule[],
): Map<string, number> {
  const counts = new Map<string, number>();
  if (rules.length === 0) return counts;
  for (const step of result.steps)
    for (const event of step.emitted)
      for (const { metric } of signalsRaisedBy(event, rules))
        counts.set(metric, (counts.get(metric) ?? 0) + 1);
  return counts;
}

/**
 * Milliseconds from the envelope's `occurred_at` to `startedAt` (at least 0: a producer's clock
 * may run ahead); undefined when the record carries no readable `occurred_at`.
 */
export function lagMs(raw: unknown, startedAt: Date): number | undefined {
  const occurredAt = (raw as { occurred_at?: unknown } | null | undefined)?.occurred_at;
  if (typeof occurredAt !== "string") return undefined;
  const at = Date.parse(occurredAt);
  return Number.isNaN(at) ? undefined : Math.max(0, startedAt.getTime() - at);
}

/** Publishes the consumer lag of a record whose processing starts at `startedAt`. */
export function recordLag(metrics: Metrics, raw: unknown, startedAt: Date): void {
  const lag = lagMs(raw, startedAt);
  if (lag !== undefined) metrics.addMetric(TIMING_METRICS.lag, MetricUnit.Milliseconds, lag);
}

/**
 * What a consumed record became: its processing time, a count and a log line per step, a
 * discard's reason, and what it emitted that a person must act on (by the group's `attention`
 * rules).
 */
export function recordConsumed(
  result: ConsumeResult,
  processingMs: number,
  { logger, metrics }: Observability,
  attention: readonly AttentionRule[] = [],
): void {
  metrics.addMetric(TIMING_METRICS.processingTime, MetricUnit.Milliseconds, processingMs);
  for (const step of result.steps) {
    metrics.addMetric(STEP_METRICS[step.status], MetricUnit.Count, 1);
    if (step.repaired) metrics.addMetric("GapRepaired", MetricUnit.Count, 1);
    if (step.status === "discarded") {
      const single = metrics.singleMetric();
      single.addDimension("reason", step.reason ?? "unknown");
      single.addMetric("DiscardedByReason", MetricUnit.Count, 1);
    }
    logger.info(`${step.status} ${step.eventType} v${step.version}`, {
      step_event_id: step.eventId,
      status: step.status,
      latency_ms: processingMs,
      ...Object.assign({}, ...step.emitted.map(stepIdsOf)),
      // A code (`expired`, a rejection's code): `reason` is a personal field, redacted in logs.
      reason_code: step.reason,
      repaired: step.repaired,
      emitted: step.emitted.map((e) => e.event_id),
    });
  }
  for (const [metric, count] of attentionCounts(result, attention))
    metrics.addMetric(metric, MetricUnit.Count, count);
  recordGuardCounts(result, metrics);
}

/** Where the model calls of a consumer's work are published: latency and tokens per call. */
export function modelCallMetrics(metrics: Metrics): ModelCallSink {
  return (call) => {
    metrics.addMetric(MODEL_METRICS.latency, MetricUnit.Milliseconds, call.latencyMs);
    metrics.addMetric(MODEL_METRICS.inputTokens, MetricUnit.Count, call.inputTokens);
    metrics.addMetric(MODEL_METRICS.outputTokens, MetricUnit.Count, call.outputTokens);
  };
}
