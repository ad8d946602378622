import {
  type AggregateRef,
  type Envelope,
  type EventTypeDefinition,
  MAX_ENVELOPE_BYTES,
  MAX_STORED_ENVELOPE_BYTES,
  type RequiredVersion,
} from "../../schemas";
import { PermanentError } from "./errors";
import { isoTime } from "./iso-time";
import type { ConsumerDeps } from "./ports";
import { retentionSeconds } from "./retention";
import { continueTraceparent, startTraceparent } from "./trace-context";

/** An event or command a role asks to append to its aggregate's stream. */
export interface EmitSpec {
  readonly type: string;
  readonly payload: unknown;
  /** Defaults to the newest registered schema version of `type`. */
  readonly schemaVersion?: number;
  readonly expiresAt?: string;
  readonly orderKey?: string;
  readonly inputVersion?: number;
  readonly conversationId?: string;
  readonly taskId?: string;
  /**
   * The message it follows from, when that is not the event being decided on (one the role held
   * and applies now): its id is the causation, its correlation the chain. Default: the event's.
   */
  readonly cause?: { readonly eventId: string; readonly correlationId: string };
  /** The agent run that produces the message (the envelope's `run_id`); none by default. */
  readonly runId?: string;
  /** The run this message's run resumed (the envelope's `resumed_from`); none by default. */
  readonly resumedFrom?: string;
  /**
   * The parent run of the child run the message belongs to (the envelope's `parent_run_id`): by
   * default the cause's; null for a message of a run that has no parent (a parent run deciding on
   * its child's end).
   */
  readonly parentRunId?: string | null;
  /**
   * The state the message waits for (the envelope's `required_version`): its consumers apply it
   * only once that aggregate's stored state has reached the version (./required-version.ts).
   */
  readonly requiredVersion?: RequiredVersion;
}

/** Who emits, when, and on which processing attempt. */
export interface EmitOrigin {
  readonly producer: string;
  readonly now: Date;
  /**
   * The processing attempt that emits (the envelope's `attempt`): a consumer's is the receive
   * count of the message it processes; a producer that sends for the first time passes 1.
   */
  readonly attempt: number;
  /**
   * The chain a message without a cause starts; `traceparent` the caller's W3C trace context,
   * which the chain continues (a new trace without one: ./trace-context.ts).
   */
  readonly root?: {
    correlationId: string;
    taskId: string;
    conversationId?: string;
    traceparent?: string;
  };
}

/**
 * An unsequenced message a role publishes straight to the bus while it is still working on an
 * event (a heartbeat): not appended to any stream, addressed to `aggregate` at version 0.
 */
export interface HeartbeatSpec extends Omit<EmitSpec, "requiredVersion"> {
  readonly aggregate: AggregateRef;
  /**
   * What the first beat publishes instead, when the work on the event starts: the acknowledgement
   * (e.g. `node.started`). Later beats publish this spec.
   */
  readonly first?: Omit<HeartbeatSpec, "first">;
  /**
   * How long each beat keeps the work alive where it is reported (the lease it renews, e.g. a
   * `node.heartbeat`'s `lease_seconds`): the consumer sends the next beat once half of it has
   * passed since the last one went out. Absent, a beat goes at every tick of the heartbeat.
   */
  readonly leaseSeconds?: number;
}

/** What an emitted message takes over from the message that caused it. */
export type EmitCause = Pick<
  Envelope,
  | "event_id"
  | "correlation_id"
  | "task_id"
  | "conversation_id"
  | "tenant_id"
  | "user_id"
  | "parent_run_id"
  | "traceparent"
>;

/**
 * Turn emit specs into validated envelopes at the next versions of `stream`. What a message causes
 * keeps its lineage: its correlation, task, conversation, tenant, user and parent run, and its
 * trace (continued with the emitting step's span as parent: ./trace-context.ts).
 */
export function buildEmitted(
  specs: readonly EmitSpec[],
  cause: EmitCause | null,
  stream: AggregateRef,
  headVersion: number,
  origin: EmitOrigin,
  deps: Pick<ConsumerDeps, "registry" | "ids">,
): Envelope[] {
  const { producer, now, attempt, root } = origin;
  let traceparent = cause ? continueTraceparent({ cause, producer, attempt }) : undefined;
  return specs.map((spec, index) => {
    const definition = pickDefinition(spec, deps);
    const correlationId = spec.cause?.correlationId ?? cause?.correlation_id ?? root?.correlationId;
    // The id of a stored event carries its correlation's digest: a trace by the id finds it.
    const eventId = deps.ids.next(correlationId);
    // A chain without a cause starts its trace at its first message.
    traceparent ??= startTraceparent(eventId, root?.traceparent);
    const candidate: Record<string, unknown> = {
      event_id: eventId,
      event_type: definition.type,
      schema_version: definition.schemaVersion,
      occurred_at: isoTime(now),
      correlation_id: correlationId,
      causation_id: spec.cause?.eventId ?? cause?.event_id ?? null,
      task_id: spec.taskId ?? cause?.task_id ?? root?.taskId,
      aggregate: { type: stream.type, id: stream.id, version: headVersion + index + 1 },
      order_key: spec.orderKey ?? stream.id,
      producer,
      attempt,
      payload: spec.payload,
    };
    // Optional fields are left out rather than set to undefined, as a JSON round trip would.
    if (spec.runId !== undefined) candidate.run_id = spec.runId;
    if (spec.resumedFrom !== undefined) candidate.resumed_from = spec.resumedFrom;
    const parentRunId = spec.parentRunId === undefined ? cause?.parent_run_id : spec.parentRunId;
    if (parentRunId != null) candidate.parent_run_id = parentRunId;
    candidate.traceparent = traceparent;
    const conversationId = spec.conversationId ?? cause?.conversation_id ?? root?.conversationId;
    if (conversationId !== undefined) candidate.conversation_id = conversationId;
    // What a tenant's (and a user's) message causes belongs to that tenant (and user).
    if (cause?.tenant_id !== undefined) candidate.tenant_id = cause.tenant_id;
    if (cause?.user_id !== undefined) candidate.user_id = cause.user_id;
    if (spec.expiresAt !== undefined) candidate.expires_at = spec.expiresAt;
    if (spec.inputVersion !== undefined) candidate.input_version = spec.inputVersion;
    if (spec.requiredVersion !== undefined) candidate.required_version = spec.requiredVersion;
    // What a stream holds may be larger than what travels: it travels by claim check.
    const parsed = deps.registry.parse(candidate, { maxBytes: MAX_STORED_ENVELOPE_BYTES });
    if (!parsed.ok) throw emitRefused(producer, spec.type, parsed);
    return parsed.envelope;
  });
}

/**
 * Why an emitted message is refused: too large for any store (`emit.too_large`: a payload a
 * claim check cannot carry either), or invalid. Permanent: the same decision emits it again.
 */
function emitRefused(
  producer: string,
  type: string,
  parsed: { readonly code: string; readonly message: string },
): PermanentError {
  if (parsed.code === "envelope.too_large")
    return new PermanentError(
      "emit.too_large",
      `${producer} emitted a ${type} too large to be stored (${parsed.message}; a message over ${MAX_ENVELOPE_BYTES} bytes travels by claim check, but its stream holds at most ${MAX_STORED_ENVELOPE_BYTES}): nothing was stored`,
      { details: { producer, event_type: type } },
    );
  return new PermanentError(
    "emit.invalid",
    `${producer} emitted an invalid ${type}: ${parsed.message}`,
  );
}

/**
 * The unsequenced envelope of a heartbeat spec (not appended to any stream: version 0), caused by
 * the event being worked on, on `attempt`: that event's receive count (a beat belongs to the
 * processing attempt it reports on). Its type must be a registered heartbeat type (unsequenced).
 * It expires a day after it is sent at most (the `heartbeats` retention of ./retention), or at
 * the spec's `expiresAt` when that comes first: the audit group keeps it no longer.
 */
export function buildHeartbeat(
  spec: HeartbeatSpec,
  cause: Envelope,
  producer: string,
  deps: Pick<ConsumerDeps, "registry" | "ids" | "clock">,
  attempt: number,
): Envelope {
  const definition = newestOrNamed(spec, deps);
  if (!definition?.heartbeat)
    throw new PermanentError(
      "heartbeat.invalid_type",
      `a heartbeat must be a registered heartbeat type (EventTypeDefinition.heartbeat), not ${spec.type}`,
    );
  const now = deps.clock.now();
  const parsed = deps.registry.parse({
    event_id: deps.ids.next(),
    event_type: definition.type,
    schema_version: definition.schemaVersion,
    occurred_at: isoTime(now),
    correlation_id: cause.correlation_id,
    causation_id: cause.event_id,
    task_id: spec.taskId ?? cause.task_id,
    conversation_id: spec.conversationId ?? cause.conversation_id,
    tenant_id: cause.tenant_id,
    user_id: cause.user_id,
    parent_run_id:
      spec.parentRunId === undefined ? cause.parent_run_id : (spec.parentRunId ?? undefined),
    // A beat belongs to the step it reports on: its span is the step's.
    traceparent: continueTraceparent({ cause, producer, attempt }),
    aggregate: { ...spec.aggregate, version: 0 },
    order_key: spec.orderKey ?? spec.aggregate.id,
    producer,
    attempt,
    run_id: spec.runId,
    resumed_from: spec.resumedFrom,
    expires_at: heartbeatExpiry(spec, now),
    payload: spec.payload,
  });
  if (!parsed.ok)
    throw new PermanentError("heartbeat.invalid", `invalid ${spec.type}: ${parsed.message}`);
  return parsed.envelope;
}

/** When a heartbeat sent `now` expires: the spec's `expiresAt`, at most a day from now. */
function heartbeatExpiry(spec: HeartbeatSpec, now: Date): string {
  const latest = new Date(now.getTime() + retentionSeconds("heartbeats") * 1000);
  // A spec's time that does not parse is kept, for the registry to refuse it by name.
  if (spec.expiresAt !== undefined && !(Date.parse(spec.expiresAt) >= latest.getTime()))
    return spec.expiresAt;
  return isoTime(latest);
}

/** The definition a spec names: its schema version, or the newest registered one. */
function newestOrNamed(
  spec: EmitSpec,
  deps: Pick<ConsumerDeps, "registry">,
): EventTypeDefinition | undefined {
  return deps.registry.find(spec.type, spec.schemaVersion);
}

function pickDefinition(spec: EmitSpec, deps: Pick<ConsumerDeps, "registry">): EventTypeDefinition {
  const definition = newestOrNamed(spec, deps);
  if (!definition) {
    throw new PermanentError(
      "emit.unknown_type",
      `cannot emit unregistered ${spec.type}@${spec.schemaVersion ?? "latest"}`,
    );
  }
  if (!definition.sequenced) {
    throw new PermanentError(
      "emit.unsequenced_type",
      `${spec.type} is unsequenced and cannot be appended to a stream`,
    );
  }
  return definition;
}
