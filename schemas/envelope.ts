import { EventTypeName, OpaqueId, TenantId, Ulid } from "./ids";
import * as z from "./zod";

/**
 * Largest serialized envelope that travels on a bus or a queue (EventBridge's per-entry limit,
 * SQS's per-message limit). A larger one on a stream travels by claim check (`claim_check`).
 */
export const MAX_ENVELOPE_BYTES = 256 * 1024;

/**
 * Largest serialized envelope a stream holds: its item in the events table (the envelope deflated
 * where that is smaller, and its keys and attributes) stays under DynamoDB's 400 KB item limit.
 * A producer that emits a larger one fails at once, permanently (functions/core/emit.ts).
 */
export const MAX_STORED_ENVELOPE_BYTES = 350_000;

/**
 * What an envelope too large for a bus carries instead of its payload
 * (functions/core/claim-check.ts): its payload's SHA-256 (of its JSON) and size. The event is in
 * its stream, at the envelope's aggregate and version; the consumer reads it from there and checks
 * the hash.
 */
export const ClaimCheck = z.object({
  sha256: z.string().check(z.regex(/^[0-9a-f]{64}$/, { message: "must be a hex SHA-256" })),
  bytes: z.int().check(z.minimum(0), z.maximum(MAX_STORED_ENVELOPE_BYTES)),
});
export type ClaimCheck = z.infer<typeof ClaimCheck>;

/**
 * The highest position an event can have in its stream (and the highest input version): 2^31 - 1.
 * A bound on a number a message carries keeps everything sized by it (a version gap) bounded too.
 */
export const MAX_STREAM_VERSION = 2 ** 31 - 1;

export const AggregateRef = z.object({
  type: z
    .string()
    .check(z.regex(/^[a-z][a-z0-9_]{0,47}$/, { message: "must be snake_case, max 48" })),
  id: OpaqueId,
});
export type AggregateRef = z.infer<typeof AggregateRef>;

/**
 * `version` is the position of the event in its aggregate's stream (1, 2, ...), written by a
 * conditional put so each version exists once. Version 0 marks an *unsequenced* message that does
 * not come from an event stream (for example a client's message sent with `aws events put-events`):
 * consumers de-duplicate it by event id only and do not gate it on order.
 */
export const AggregatePosition = z.extend(AggregateRef, {
  version: z.int().check(z.minimum(0), z.maximum(MAX_STREAM_VERSION)),
});
export type AggregatePosition = z.infer<typeof AggregatePosition>;

/**
 * A state a message must wait for (seed 000 §5.3, the version threshold): the aggregate whose
 * stored state must have reached `version` (its stream head, 1 or more) before a consumer applies
 * the message. It names the state as `aggregate` names the message's own place: type, id, version.
 */
export const RequiredVersion = z.extend(AggregateRef, {
  version: z.int().check(z.minimum(1), z.maximum(MAX_STREAM_VERSION)),
});
export type RequiredVersion = z.infer<typeof RequiredVersion>;

/**
 * A W3C trace context header, version 00: `00-<32 hex trace id>-<16 hex parent span id>-<2 hex
 * flags>`, lowercase; a trace id or span id of all zeros is invalid (W3C Trace Context, level 1).
 */
export const Traceparent = z.string().check(
  z.regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/, {
    message: "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>",
  }),
  z.refine((value) => !/^00-0{32}-|-0{16}-[0-9a-f]{2}$/.test(value), {
    message: "must not have an all-zero trace id or span id (W3C traceparent)",
  }),
);

/** An ISO 8601 instant; at most 40 characters (nanoseconds and an offset fit). */
export const IsoTime = z.iso.datetime({ offset: true }).check(z.maxLength(40));

/** The envelope fields every message carries; `payload` is typed per event type by the registry. */
export const EnvelopeBase = z.object({
  event_id: Ulid,
  event_type: EventTypeName,
  schema_version: z.int().check(z.minimum(1)),
  occurred_at: IsoTime,
  correlation_id: OpaqueId,
  /** The event that directly caused this one; null for the first event of a chain. */
  causation_id: z.nullable(Ulid),
  task_id: OpaqueId,
  conversation_id: z.optional(OpaqueId),
  /**
   * The tenant the task belongs to (seed 000 §1.1): set by the front door from the caller's token
   * and carried by everything the message causes. Absent on events from before tenants and on the
   * CLI's: they belong to DEFAULT_TENANT (`tenantOf`).
   */
  tenant_id: z.optional(TenantId),
  /** The person who sent the message, where one did (`user_<token>`, from the caller's token). */
  user_id: z.optional(OpaqueId),
  aggregate: AggregatePosition,
  /** FIFO message group: what must be processed in order. Defaults to the aggregate id. */
  order_key: z.optional(
    z.string().check(
      z.regex(/^[\x21-\x7e]{1,128}$/, {
        message: "must be 1-128 printable ASCII characters (an SQS message group id)",
      }),
    ),
  ),
  producer: z
    .string()
    .check(z.regex(/^[a-z][a-z0-9-]{0,63}$/, { message: "must be kebab-case, max 64" })),
  /**
   * The processing attempt that produced this message (seed 000 §4.1 `attempt`): for what a
   * consumer emits, the receive count of the message it was processing (a redelivery's is 2, 3,
   * ...); 1 for a first send. Absent on old messages, which read as 1.
   */
  attempt: z._default(z.int().check(z.minimum(1)), 1),
  /**
   * The agent run that produced this message (seed 000 §4.1 `run_id`): new for each run of an
   * agent and each resumed run, so a retry, a redelivery that runs the agent again and a resume
   * after BLOCKED each have their own. It is neither the DAG run a workflow payload's `run_id`
   * names nor the stable agent run key (the `agent_run` aggregate id, which is the same for every
   * run of one node at one generation). Absent on what no agent run produced, and on messages
   * stored before it was carried.
   */
  run_id: z.optional(OpaqueId),
  /**
   * The agent run `run_id` continues, on what a run resumed after waiting (for a person's approval
   * or a confirmation) emits as it resumes: the two runs of one agent run, linked. Set by the agent
   * on the resumed run's first messages only; not carried further.
   */
  resumed_from: z.optional(OpaqueId),
  /**
   * The workflow run that started the child run this message belongs to: set by the orchestrator
   * on every event of a child run (its steps' requests included) and carried by everything those
   * cause (the steps' answers), so a child run's work names its parent run everywhere.
   */
  parent_run_id: z.optional(OpaqueId),
  /**
   * The W3C trace context (`00-<trace id>-<parent span id>-<flags>`): set on the first message of
   * a task (from the caller's `traceparent`, else new) and continued by everything it causes, with
   * the emitting step's span as parent, so one trace id covers the task across every hop
   * (functions/core/trace-context.ts).
   */
  traceparent: z.optional(Traceparent),
  /** After this instant the message has no value: consumers discard it as `expired`. */
  expires_at: z.optional(IsoTime),
  /** The conversation/input version the message was produced from (superseded checks). */
  input_version: z.optional(z.int().check(z.minimum(0), z.maximum(MAX_STREAM_VERSION))),
  /**
   * Apply this message only once the named state has reached the version (./RequiredVersion):
   * until then a consumer holds it, and gives up on it after its queue's last receive
   * (functions/core/required-version.ts).
   */
  required_version: z.optional(RequiredVersion),
  /** Set on an envelope that travels without its payload (null): where to read it from. */
  claim_check: z.optional(ClaimCheck),
  payload: z.unknown(),
});

export type EnvelopeInput = z.input<typeof EnvelopeBase>;

/** A validated envelope: `order_key` and `attempt` are always filled in. */
export type Envelope<P = unknown> = Omit<z.output<typeof EnvelopeBase>, "payload" | "order_key"> & {
  order_key: string;
  payload: P;
};

const encoder = new TextEncoder();

/** The UTF-8 size of a text. */
export function utf8Bytes(text: string): number {
  return encoder.encode(text).length;
}

export function envelopeBytes(value: unknown): number {
  return utf8Bytes(JSON.stringify(value));
}
