import type { InboxRecord, RecordedOutcome } from "../../functions/core/ports";
import { ulidSource } from "../../functions/core/runtime";
import { type Envelope, registry } from "../../schemas";

const ids = ulidSource();

/** A fresh ULID (monotonic within the test process). */
export const newUlid = (): string => ids.next();
export const newTaskId = (): string => `task_${ids.next()}`;
export const newCorrelationId = (): string => `corr_${ids.next()}`;

export type SequencedTaskEvent =
  | "task.accepted"
  | "plan.created"
  | "answer.generated"
  | "notification.sent";

/** The task lifecycle in stream order: version n gets LIFECYCLE[(n - 1) % 4]. */
export const LIFECYCLE: readonly SequencedTaskEvent[] = [
  "task.accepted",
  "plan.created",
  "answer.generated",
  "notification.sent",
];

const PAYLOADS: Record<SequencedTaskEvent | "task.feedback.received", unknown> = {
  "task.accepted": { title: "Summarise the quarterly report" },
  "plan.created": { steps: ["outline", "draft", "review"] },
  "answer.generated": { answer_ref: "answers/summary-1" },
  "notification.sent": { channel: "email" },
  "task.feedback.received": { rating: 5, comment: "great, thanks ✓" },
};

export interface EnvelopeOptions {
  readonly taskId?: string;
  readonly correlationId?: string;
  readonly causationId?: string | null;
  readonly occurredAt?: Date;
  readonly payload?: unknown;
  readonly eventId?: string;
  readonly producer?: string;
  readonly expiresAt?: Date;
}

/** Validate through the real registry: a factory that builds invalid envelopes is useless. */
function parsed(candidate: unknown): Envelope {
  const result = registry.parse(candidate);
  if (!result.ok) throw new Error(`factory built an invalid envelope: ${result.message}`);
  return result.envelope;
}

/** A sequenced event of a task stream (aggregate task/<taskId>, version >= 1). */
export function taskEvent(
  version: number,
  options: EnvelopeOptions & { readonly type?: SequencedTaskEvent } = {},
): Envelope {
  const type = options.type ?? LIFECYCLE[(version - 1) % LIFECYCLE.length] ?? "task.accepted";
  const taskId = options.taskId ?? newTaskId();
  return parsed({
    event_id: options.eventId ?? newUlid(),
    event_type: type,
    schema_version: 1,
    occurred_at: (options.occurredAt ?? new Date()).toISOString(),
    correlation_id: options.correlationId ?? newCorrelationId(),
    causation_id: options.causationId ?? null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version },
    producer: options.producer ?? "test-producer",
    ...(options.expiresAt ? { expires_at: options.expiresAt.toISOString() } : {}),
    payload: options.payload ?? PAYLOADS[type],
  });
}

/** Versions from..to of one task's stream, chained by causation, sharing one correlation id. */
export function taskStream(from: number, to: number, options: EnvelopeOptions = {}): Envelope[] {
  const taskId = options.taskId ?? newTaskId();
  const correlationId = options.correlationId ?? newCorrelationId();
  const out: Envelope[] = [];
  for (let v = from; v <= to; v++) {
    out.push(
      taskEvent(v, {
        ...options,
        taskId,
        correlationId,
        causationId: out.at(-1)?.event_id ?? options.causationId ?? null,
      }),
    );
  }
  return out;
}

/** An unsequenced client message (version 0): de-duplicated by event id only. */
export function feedbackEvent(options: EnvelopeOptions & { readonly rating?: number } = {}) {
  const taskId = options.taskId ?? newTaskId();
  return parsed({
    event_id: options.eventId ?? newUlid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: (options.occurredAt ?? new Date()).toISOString(),
    correlation_id: options.correlationId ?? newCorrelationId(),
    causation_id: options.causationId ?? null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    producer: options.producer ?? "test-client",
    payload:
      options.payload ??
      (options.rating !== undefined
        ? { rating: options.rating }
        : PAYLOADS["task.feedback.received"]),
  });
}

/**
 * An envelope as a role would get it, built without the registry: for tests of what a role does
 * with a payload the registry never let through (a wrong type, fields it would refuse).
 */
export function unvalidatedEnvelope(
  event_type: string,
  payload: unknown,
  aggregate: Envelope["aggregate"] = { type: "delivery", id: "task_1", version: 0 },
): Envelope {
  return {
    event_id: "01JBZ6Y3KQ4G8Z6W9X2V5T7R1M",
    event_type,
    schema_version: 1,
    occurred_at: "2026-09-01T10:00:00.000Z",
    correlation_id: "corr_1",
    causation_id: null,
    task_id: "task_1",
    aggregate,
    order_key: aggregate.id,
    producer: "test",
    attempt: 1,
    payload,
  };
}

/** The inbox row a group records for `e`: its outcome (and reason), when, kept until 2033. */
export function inboxRecordOf(
  group: string,
  e: Envelope,
  outcome: RecordedOutcome = "applied",
  reason?: string,
  recordedAt = "2026-11-30T12:00:00.000Z",
): InboxRecord {
  return {
    group,
    eventId: e.event_id,
    eventType: e.event_type,
    outcome,
    ...(reason ? { reason } : {}),
    aggregate: { type: e.aggregate.type, id: e.aggregate.id },
    version: e.aggregate.version,
    correlationId: e.correlation_id,
    taskId: e.task_id,
    ...(e.causation_id ? { causationId: e.causation_id } : {}),
    producer: e.producer,
    occurredAt: e.occurred_at,
    recordedAt,
    expiresAt: 2_000_000_000,
  };
}
