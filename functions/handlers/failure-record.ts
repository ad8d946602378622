import * as z from "../../schemas/zod";
import type { ErrorInfo } from "../core/errors";
import type { Clock, DeadLetterSink, FailureLog, FailureRecord } from "../core/ports";
import { decodeRecord } from "./consumer-record";

/** Longest error message kept on a failure record (characters). */
const MAX_MESSAGE_CHARS = 1000;

const Text = z.string().check(z.minLength(1), z.maxLength(256));

/**
 * The ids a failure record needs, read leniently: a message that failed may be invalid, so only
 * these fields are checked (bounded strings); a body without them gets no record (it is still in
 * the dead-letter queue with its error, for `agentbus dlq list`).
 */
const TraceFields = z.object({
  event_id: Text,
  event_type: Text,
  aggregate: z.object({
    type: Text,
    id: Text,
    version: z.optional(z.int().check(z.nonnegative())),
  }),
  correlation_id: Text,
  task_id: Text,
  causation_id: z.nullish(Text),
  producer: z.optional(Text),
  occurred_at: z.optional(Text),
});

export interface FailureContext {
  readonly group: string;
  readonly error: ErrorInfo;
  readonly attempts: number;
  readonly outcome: FailureRecord["outcome"];
  readonly now: Date;
  readonly ttlSeconds: number;
}

/** The failure record of a record body, or undefined when the body lacks the ids a trace needs. */
export function failureRecordOf(body: string, context: FailureContext): FailureRecord | undefined {
  let raw: unknown;
  try {
    raw = decodeRecord({ body });
  } catch {
    return undefined;
  }
  const parsed = TraceFields.safeParse(raw);
  if (!parsed.success) return undefined;
  const e = parsed.data;
  const recordedAt = context.now.toISOString();
  return {
    group: context.group,
    eventId: e.event_id,
    eventType: e.event_type,
    outcome: context.outcome,
    aggregate: { type: e.aggregate.type, id: e.aggregate.id },
    version: e.aggregate.version ?? 0,
    correlationId: e.correlation_id,
    taskId: e.task_id,
    ...(e.causation_id ? { causationId: e.causation_id } : {}),
    producer: e.producer ?? "",
    occurredAt: e.occurred_at ?? recordedAt,
    recordedAt,
    expiresAt: Math.floor(context.now.getTime() / 1000) + context.ttlSeconds,
    error: {
      code: context.error.code,
      message: context.error.message.slice(0, MAX_MESSAGE_CHARS),
    },
    attempts: context.attempts,
  };
}

export interface FailureRecording {
  readonly failures: FailureLog;
  readonly group: string;
  readonly ttlSeconds: number;
  readonly clock: Clock;
  /** Told when a record cannot be written (the message is in the dead-letter queue anyway). */
  readonly onRecordFailed: (error: unknown) => void;
}

/**
 * A dead-letter sink that also records each dead letter for tracing (best effort: a record that
 * cannot be written is logged; the message is in the dead-letter queue either way).
 */
export function recordingDeadLetters(
  sink: DeadLetterSink,
  recording: FailureRecording | undefined,
): DeadLetterSink {
  if (!recording) return sink;
  return {
    async send(message) {
      await sink.send(message);
      const record = failureRecordOf(message.body, {
        group: recording.group,
        error: { code: message.code, message: message.reason, errorClass: "permanent" },
        attempts: message.receiveCount ?? 1,
        outcome: "dead-lettered",
        now: recording.clock.now(),
        ttlSeconds: recording.ttlSeconds,
      });
      if (!record) return;
      await recording.failures.record(record).catch(recording.onRecordFailed);
    },
  };
}
