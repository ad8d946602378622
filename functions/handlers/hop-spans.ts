import {
  type Attributes,
  INVALID_SPAN_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type { Envelope, Topic } from "../../schemas";
import { agentbusTracer, errorTypeOf, GENAI, inSpan } from "../core/genai-spans";
import type { EventPublisher, FifoSender, PublishFailure } from "../core/ports";
import { formatTraceparent, parseTraceparent } from "../core/trace-context";
import { parentContext, traceParentOf, tracerRegistered } from "./telemetry";

/**
 * The spans of the hops between a commit and a consumer, so one trace covers a message from the
 * request that started it to the group that processed it (messaging and HTTP semantic conventions
 * of `@opentelemetry/semantic-conventions`; test/handlers/hop-spans.test.ts checks the names):
 *
 * - `publish <event type>` (producer, `messaging.operation.type` `publish`, `messaging.system`
 *   `aws.eventbridge`, the bus as `messaging.destination.name`): one per event the relay or the
 *   sweeper puts on a bus, a child of the span its `traceparent` names;
 * - `send <event type>` (producer, `send`, `aws_sqs`, the group's FIFO queue): one per message the
 *   dispatcher moves from a group's buffer queue to its FIFO queue, a child of the publish span,
 *   or the relay sends straight to it (`delivery: "relay"`), a child of the commit's span;
 * - `<method> <route>` (server): one per front door request, a child of the caller's `traceparent`
 *   header, and the parent of the messages it accepts.
 *
 * Each hop puts its own span in the `traceparent` it passes on, so the next hop's span is its
 * child: the consumer's `process` span (./telemetry.ts) is the dispatcher's child, which is the
 * relay's. Only a recorded span does: with no exporter and no layer (the default), no tracer
 * provider is registered, no span is made, no traceparent read, and every message goes on
 * exactly as it came.
 */

/** `messaging.system` of each transport (EventBridge has no value of the conventions' own). */
export const MESSAGING_SYSTEMS = { eventbridge: "aws.eventbridge", sqs: "aws_sqs" } as const;

/** The conventions' attribute names used here. */
export const HOP_ATTRIBUTES = {
  system: "messaging.system",
  operationType: "messaging.operation.type",
  operationName: "messaging.operation.name",
  destination: "messaging.destination.name",
  consumerGroup: "messaging.consumer.group.name",
  messageId: "messaging.message.id",
  conversationId: "messaging.message.conversation_id",
  method: "http.request.method",
  route: "http.route",
  path: "url.path",
  scheme: "url.scheme",
  status: "http.response.status_code",
} as const;

/** A message as a hop sees it: the envelope's fields its span reads, all optional (unchecked). */
type MessageFields = Partial<
  Pick<Envelope, "event_id" | "event_type" | "correlation_id" | "task_id" | "traceparent">
> & { readonly aggregate?: { readonly id?: string; readonly version?: number } };

/** Where a message goes and how: what its hop's span is named and attributed by. */
export interface Hop {
  readonly operation: "publish" | "send";
  readonly system: (typeof MESSAGING_SYSTEMS)[keyof typeof MESSAGING_SYSTEMS];
  readonly destination: string;
  /** The consumer group the message is for (the dispatcher's). */
  readonly group?: string;
}

/** The span of a hop when no tracer provider is registered: nothing is read or made. */
const NOT_RECORDED = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * Starts the span of one message's hop (not made active: a call carries several), a child of the
 * span its `traceparent` names, else of the active one.
 */
export function startHopSpan(message: unknown, hop: Hop): Span {
  if (!tracerRegistered()) return NOT_RECORDED;
  const fields = (typeof message === "object" && message !== null ? message : {}) as MessageFields;
  const parent = parentContext(traceParentOf(message));
  const name = `${hop.operation} ${fields.event_type ?? "message"}`;
  const span = agentbusTracer().startSpan(name, { kind: SpanKind.PRODUCER }, parent);
  if (span.isRecording()) span.setAttributes(hopAttributes(fields, hop));
  return span;
}

function hopAttributes(fields: MessageFields, hop: Hop): Attributes {
  const ids: Record<string, string | number | undefined> = {
    "agentbus.event_id": fields.event_id,
    "agentbus.event_type": fields.event_type,
    "agentbus.correlation_id": fields.correlation_id,
    "agentbus.task_id": fields.task_id,
    "agentbus.aggregate_id": fields.aggregate?.id,
    "agentbus.aggregate_version": fields.aggregate?.version,
    [HOP_ATTRIBUTES.messageId]: fields.event_id,
    [HOP_ATTRIBUTES.conversationId]: fields.correlation_id,
    [HOP_ATTRIBUTES.consumerGroup]: hop.group,
  };
  return {
    [HOP_ATTRIBUTES.system]: hop.system,
    [HOP_ATTRIBUTES.operationType]: hop.operation,
    [HOP_ATTRIBUTES.operationName]: hop.operation,
    [HOP_ATTRIBUTES.destination]: hop.destination,
    ...Object.fromEntries(Object.entries(ids).filter(([, value]) => value !== undefined)),
  } as Attributes;
}

/**
 * The message with `span` as the parent its `traceparent` names, when the span is recorded and
 * the message is an object whose traceparent is absent or valid (an invalid one is left for the
 * envelope's validation to refuse); else the message itself.
 */
export function continuedBy<T>(message: T, span: Span): T {
  if (!span.isRecording() || typeof message !== "object" || message === null) return message;
  const own = traceParentOf(message);
  if ((message as { traceparent?: unknown }).traceparent !== undefined && !parseTraceparent(own))
    return message;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { ...message, traceparent: formatTraceparent({ traceId, spanId, traceFlags }) };
}

/** Ends a hop's span: with status error and the failure's code when the message did not go. */
export function endHopSpan(span: Span, failure?: { readonly code: string }): void {
  if (failure) {
    span.setAttribute(GENAI.errorType, failure.code);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/**
 * A publisher whose every event goes in a `publish` span (see top), its `traceparent` continued by
 * that span; `busOf` names a topic's bus (`messaging.destination.name`).
 */
export function tracedPublisher(
  publisher: EventPublisher,
  busOf: (topic: Topic) => string | undefined,
): EventPublisher {
  return {
    async publish(topic, envelopes) {
      if (!tracerRegistered()) return publisher.publish(topic, envelopes);
      const hop: Hop = {
        operation: "publish",
        system: MESSAGING_SYSTEMS.eventbridge,
        destination: busOf(topic) ?? topic,
      };
      const spans = envelopes.map((envelope) => startHopSpan(envelope, hop));
      let failures: PublishFailure[];
      try {
        failures = await publisher.publish(
          topic,
          envelopes.map((envelope, i) => continuedBy(envelope, spans[i] as Span)),
        );
      } catch (error) {
        for (const span of spans) endHopSpan(span, { code: errorTypeOf(error) });
        throw error;
      }
      const failed = new Map(failures.map((f) => [f.eventId, f]));
      envelopes.forEach((envelope, i) => {
        endHopSpan(spans[i] as Span, failed.get(envelope.event_id));
      });
      return failures;
    },
  };
}

/**
 * A FIFO sender whose every message goes in a `send` span (see top), the envelope of its body
 * continued by that span: the relay's sends to the groups it delivers (`delivery: "relay"`), the
 * same hop as the dispatcher's.
 */
export function tracedFifoSender(sender: FifoSender, hop: Hop): FifoSender {
  return {
    async send(messages) {
      if (!tracerRegistered()) return sender.send(messages);
      const envelopes = messages.map((m) => JSON.parse(m.body) as unknown);
      const spans = envelopes.map((envelope) => startHopSpan(envelope, hop));
      let failures: Awaited<ReturnType<FifoSender["send"]>>;
      try {
        failures = await sender.send(
          messages.map((m, i) => ({
            ...m,
            body: JSON.stringify(continuedBy(envelopes[i], spans[i] as Span)),
          })),
        );
      } catch (error) {
        for (const span of spans) endHopSpan(span, { code: errorTypeOf(error) });
        throw error;
      }
      const failed = new Map(failures.map((f) => [f.id, f]));
      messages.forEach((m, i) => {
        endHopSpan(spans[i] as Span, failed.get(m.id));
      });
      return failures;
    },
  };
}

/** What a server span reads of a request and its answer. */
export interface ServedRequest {
  readonly method: string;
  readonly path: string;
  /** The route's template (`/v1/tasks/{task_id}`), when the request names one. */
  readonly route?: string;
  readonly traceparent?: string;
}

/**
 * Answers a request inside a `<method> <route>` server span (HTTP conventions: method, route,
 * path, scheme, status code; status error on a 5xx or a throw), a child of the caller's
 * `traceparent`. `work` is given the `traceparent` the request's messages start from: the server
 * span's when it is recorded, else the caller's.
 */
export function inServerSpan<R extends { readonly statusCode?: number }>(
  request: ServedRequest,
  work: (traceparent: string | undefined) => Promise<R>,
): Promise<R> {
  if (!tracerRegistered()) return work(request.traceparent);
  const name = request.route ? `${request.method} ${request.route}` : request.method;
  const parent = parentContext(request.traceparent);
  return inSpan(name, { kind: SpanKind.SERVER, attributes: {}, parent }, async (span) => {
    const recorded = span.isRecording();
    if (recorded)
      span.setAttributes({
        [HOP_ATTRIBUTES.method]: request.method,
        [HOP_ATTRIBUTES.path]: request.path,
        [HOP_ATTRIBUTES.scheme]: "https",
        ...(request.route ? { [HOP_ATTRIBUTES.route]: request.route } : {}),
      });
    const response = await work(
      recorded ? formatTraceparent(span.spanContext()) : request.traceparent,
    );
    const status = response.statusCode ?? 200;
    span.setAttribute(HOP_ATTRIBUTES.status, status);
    if (status >= 500) {
      span.setAttribute(GENAI.errorType, String(status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    return response;
  });
}
