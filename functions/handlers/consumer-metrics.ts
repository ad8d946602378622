import { type Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { Envelope } from "../../schemas";
import { CONTENT_ROLES, contentEventTypes } from "../../schemas/events/workflow";
import type { ModelCallSink } from "../adapters/model-calls";
import { MODEL_INVALID_OUTPUT } from "../core/agent-run";
import type { ConsumeResult } from "../core/role";
import type { AttentionSignal } from "../core/role-module";
import type { Observability } from "./observe";

/**
 * What a consumer publishes about its records (Powertools metrics, namespace `AgentBus`,
 * dimensions `service` and `consumer_group`, both the group name), from what the handler already
 * has: no AWS call of its own. The CDK constructs import these names for their dashboards and
 * alarms.
 */

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

/**
 * What a consumed record emitted that a person must act on, by signal, counted per emitted event
 * (published only when there is one):
 * - `unknown-side-effects`: `notification.failed` with outcome `unknown` (a send whose result
 *   could not be learnt);
 * - `held-replies`: `reply.held_for_review` (a reply waiting for a person's review);
 * - `failed-runs`: `workflow.failed` (a workflow run ended without any node completed);
 * - `partial-runs`: `workflow.partial` (a workflow run ended with some nodes completed);
 * - `needs-human`: a content agent's `<role>.failed` with code `model.invalid_output` (its run
 *   ended NEEDS_HUMAN), or a refund review handed to a person (`refund.review.needs_person`
 *   waiting for an answer); one waiting for an outcome that could not be learnt counts as an
 *   `unknown-side-effects`;
 * - `awaiting-approval`: what waits for a person's approval (functions/core/approval.ts): a refund
 *   review's tool call, a content agent's confirmation (`node.blocked`);
 * - `handed-off`: `support.step.failed` that sent the customer the hand-off message.
 */
export const ATTENTION_METRICS = {
  "unknown-side-effects": "UnknownSideEffectOutcome",
  "held-replies": "ReplyHeldForReview",
  "failed-runs": "WorkflowFailed",
  "partial-runs": "WorkflowPartial",
  "needs-human": "AgentRunNeedsHuman",
  "awaiting-approval": "ApprovalRequested",
  "handed-off": "SupportTurnHandedOff",
} as const satisfies Record<AttentionSignal, string>;
export type { AttentionSignal };
export type AttentionMetric = (typeof ATTENTION_METRICS)[AttentionSignal];
export const ATTENTION_SIGNALS = Object.keys(ATTENTION_METRICS) as AttentionSignal[];

/** Per model call: its latency (ms) and tokens in and out (count). */
export const MODEL_METRICS = {
  latency: "ModelLatency",
  inputTokens: "ModelInputTokens",
  outputTokens: "ModelOutputTokens",
} as const;

const AGENT_FAILED_TYPES: ReadonlySet<string> = new Set(
  CONTENT_ROLES.map((role) => contentEventTypes(role).failed),
);

/** What an agent run that waits for a person waits for, as the signal it raises. */
const PERSON_WAITS: Readonly<Record<string, AttentionMetric>> = {
  approval: ATTENTION_METRICS["awaiting-approval"],
  outcome: ATTENTION_METRICS["unknown-side-effects"],
  answer: ATTENTION_METRICS["needs-human"],
};

/** The attention metric an emitted event counts towards, if any. */
export function attentionOf(event: Envelope): AttentionMetric | undefined {
  const payload = event.payload as Record<string, unknown>;
  switch (event.event_type) {
    case "notification.failed":
      return payload.outcome === "unknown" ? ATTENTION_METRICS["unknown-side-effects"] : undefined;
    case "reply.held_for_review":
      return ATTENTION_METRICS["held-replies"];
    case "workflow.failed":
      return ATTENTION_METRICS["failed-runs"];
    case "workflow.partial":
      return ATTENTION_METRICS["partial-runs"];
    case "support.step.failed":
      return payload.handed_off === true ? ATTENTION_METRICS["handed-off"] : undefined;
    case "node.blocked":
      return ATTENTION_METRICS["awaiting-approval"];
    case "refund.review.needs_person":
      return PERSON_WAITS[String(payload.waiting)];
  }
  if (!AGENT_FAILED_TYPES.has(event.event_type)) return undefined;
  const code = (payload.error as { code?: unknown } | undefined)?.code;
  const needsHuman =
    typeof code === "string" &&
    (code === MODEL_INVALID_OUTPUT || code.startsWith(`${MODEL_INVALID_OUTPUT}.`));
  return needsHuman ? ATTENTION_METRICS["needs-human"] : undefined;
}

/** How many of the events a consumed record emitted count towards each attention metric. */
export function attentionCounts(result: ConsumeResult): Map<AttentionMetric, number> {
  const counts = new Map<AttentionMetric, number>();
  for (const step of result.steps) {
    for (const event of step.emitted) {
      const metric = attentionOf(event);
      if (metric) counts.set(metric, (counts.get(metric) ?? 0) + 1);
    }
  }
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
 * discard's reason, and what it emitted that a person must act on.
 */
export function recordConsumed(
  result: ConsumeResult,
  processingMs: number,
  { logger, metrics }: Observability,
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
      // A code (`expired`, a rejection's code): `reason` is a personal field, redacted in logs.
      reason_code: step.reason,
      repaired: step.repaired,
      emitted: step.emitted.map((e) => e.event_id),
    });
  }
  for (const [metric, count] of attentionCounts(result))
    metrics.addMetric(metric, MetricUnit.Count, count);
}

/** Where the model calls of a consumer's work are published: latency and tokens per call. */
export function modelCallMetrics(metrics: Metrics): ModelCallSink {
  return (call) => {
    metrics.addMetric(MODEL_METRICS.latency, MetricUnit.Milliseconds, call.latencyMs);
    metrics.addMetric(MODEL_METRICS.inputTokens, MetricUnit.Count, call.inputTokens);
    metrics.addMetric(MODEL_METRICS.outputTokens, MetricUnit.Count, call.outputTokens);
  };
}
