import { createHash } from "node:crypto";
import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  ROOT_CONTEXT,
  TraceFlags,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";

/**
 * The W3C trace context a message carries (the envelope's `traceparent`), so that one trace id
 * covers a task across every hop: the commit, the relay, the bus, the queues, each consumer, a
 * redrive and a replay. The bus does not carry it for us (EventBridge drops the X-Ray header on
 * delivery and on an archive replay), so it travels inside the envelope, as every other lineage
 * field does.
 *
 * - The first message of a task starts it: from the caller's W3C `traceparent` when there is one
 *   (the front door's request header, the CLI's `TRACEPARENT` variable), else a new trace whose id
 *   is the message's own event id (a ULID is 128 bits: 32 hex digits).
 * - Everything a message causes continues it: the same trace id and flags, and as parent the span
 *   of the step that emitted it. That span is the active OpenTelemetry span when one is recorded
 *   in the same trace, else an id derived from the step (the cause, the group, the attempt), so
 *   the events and heartbeats of one step name one span and a redelivery is a new one.
 * - A message without a trace context (an older one, or one sent with `aws events put-events`)
 *   is continued as if it had started one: every group that consumes it derives the same trace id
 *   from its event id.
 */

const propagator = new W3CTraceContextPropagator();

/** The trace context of a message: trace id, the parent span id and the flags (sampled = 1). */
export interface TraceContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

/** The context a W3C `traceparent` names; undefined when it is not a valid one (all-zero ids). */
export function parseTraceparent(header: string | undefined): TraceContext | undefined {
  if (header === undefined || header === "") return undefined;
  const context = propagator.extract(ROOT_CONTEXT, { traceparent: header }, defaultTextMapGetter);
  const span = trace.getSpanContext(context);
  if (!span || !isSpanContextValid(span)) return undefined;
  return { traceId: span.traceId, spanId: span.spanId, traceFlags: span.traceFlags };
}

/** The `traceparent` of a context, version 00. */
export function formatTraceparent(context: TraceContext): string {
  const carrier: Record<string, string> = {};
  const span = { ...context, isRemote: false };
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  const header = carrier.traceparent;
  if (header === undefined)
    throw new Error(`not a valid trace context: ${JSON.stringify(context)}`);
  return header;
}

/** The trace id of a message's traceparent, or of the trace it starts when it carries none. */
export function traceIdOf(message: { event_id: string; traceparent?: string }): string {
  return parseTraceparent(message.traceparent)?.traceId ?? ulidHex(message.event_id);
}

/**
 * The `traceparent` of the first message of a task, `eventId`: the caller's context continued
 * when `incoming` is a valid one (the caller's span is the parent), else a new sampled trace
 * whose id is the event id.
 */
export function startTraceparent(eventId: string, incoming?: string): string {
  const caller = parseTraceparent(incoming);
  if (caller) return formatTraceparent(caller);
  return formatTraceparent({
    traceId: ulidHex(eventId),
    spanId: derivedSpanId(`start\u0000${eventId}`),
    traceFlags: TraceFlags.SAMPLED,
  });
}

/** Who emits, from which message: what names the step whose span parents what it emits. */
export interface EmittingStep {
  readonly cause: { readonly event_id: string; readonly traceparent?: string };
  readonly producer: string;
  readonly attempt: number;
}

/** The `traceparent` of what a step emits: the cause's trace, the step's span as parent. */
export function continueTraceparent(step: EmittingStep): string {
  const { cause, producer, attempt } = step;
  const parent = parseTraceparent(cause.traceparent);
  const traceId = parent?.traceId ?? ulidHex(cause.event_id);
  return formatTraceparent({
    traceId,
    spanId:
      activeSpanId(traceId) ?? derivedSpanId(`${cause.event_id}\u0000${producer}\u0000${attempt}`),
    traceFlags: parent?.traceFlags ?? TraceFlags.SAMPLED,
  });
}

/** The id of the OpenTelemetry span active now, if one is recorded in trace `traceId`. */
function activeSpanId(traceId: string): string | undefined {
  const span = trace.getActiveSpan()?.spanContext();
  return span && isSpanContextValid(span) && span.traceId === traceId ? span.spanId : undefined;
}

/** A span id (16 hex digits, never all zero) derived from `key`. */
function derivedSpanId(key: string): string {
  const hex = createHash("sha256").update(key).digest("hex").slice(0, 16);
  return /^0+$/.test(hex) ? "0000000000000001" : hex;
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/**
 * A ULID's 128 bits as 32 lowercase hex digits (a W3C trace id); never all zero (the one ULID
 * that is, 26 zeros, gives 1).
 */
export function ulidHex(ulid: string): string {
  let value = 0n;
  for (const char of ulid.toUpperCase()) {
    const digit = CROCKFORD.indexOf(char);
    if (digit < 0) throw new Error(`not a ULID: ${JSON.stringify(ulid)}`);
    value = (value << 5n) | BigInt(digit);
  }
  const hex = (value & ((1n << 128n) - 1n)).toString(16).padStart(32, "0");
  return /^0+$/.test(hex) ? `${"0".repeat(31)}1` : hex;
}
