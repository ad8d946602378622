import type { AggregateRef, Envelope, EventTypeDefinition } from "../../schemas";
import {
  BusinessRejection,
  DuplicateCommitError,
  PermanentError,
  TransientError,
  VersionConflictError,
} from "./errors";
import type { CommitRequest, ConsumerDeps, DiscardReason, Loaded, StoredState } from "./ports";

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
}

/** A role's answer to one event: the next state of its aggregate and what to emit. */
export interface Decision<S> {
  /** The next state; leave out to keep the current one. */
  readonly state?: S;
  readonly emit?: readonly EmitSpec[];
  /**
   * When the aggregate next needs a sweeper's attention (ISO 8601), written with the state; null
   * or left out = not due (any earlier due time is cleared). Only used when the state is written.
   */
  readonly dueAt?: string | null;
}

/**
 * An unsequenced message a role publishes straight to the bus while it is still working on an
 * event (a heartbeat): not appended to any stream, addressed to `aggregate` at version 0.
 */
export interface HeartbeatSpec extends EmitSpec {
  readonly aggregate: AggregateRef;
}

export interface DecideContext<S> {
  readonly now: Date;
  /** How many times the queue has handed this message out (1 on first delivery). */
  readonly receiveCount: number;
  readonly stored: StoredState<S> | undefined;
  /** True when the event was read from the event store to fill a version gap. */
  readonly repaired: boolean;
}

/**
 * A consumer group's behaviour. `decide` is the only place with business logic: it gets the
 * current state and one event and returns a decision. It may call models or tools (never inside a
 * transaction: the commit happens after it returns), and must not write anything itself.
 */
export interface Role<S> {
  readonly group: string;
  readonly subscriptions: readonly string[];
  /** The aggregate this role reads and writes for an event; defaults to the event's aggregate. */
  stateOf?(event: Envelope): AggregateRef;
  /**
   * A reason to drop the event unprocessed (superseded, cancelled, ...); checked after expiry and
   * before `decide`. It may read (for example another aggregate's version) but must not write.
   */
  discard?(
    state: S | undefined,
    event: Envelope,
    now: Date,
  ): DiscardReason | undefined | Promise<DiscardReason | undefined>;
  decide(
    state: S | undefined,
    event: Envelope,
    context: DecideContext<S>,
  ): Decision<S> | Promise<Decision<S>>;
  /**
   * What to publish periodically while `decide` works on `event` (the consumer handler sends it
   * when its heartbeat is on); undefined = nothing.
   */
  heartbeat?(event: Envelope): HeartbeatSpec | undefined;
}

export type StepStatus = "applied" | "duplicate" | "discarded" | "rejected";

export interface Step {
  readonly eventId: string;
  readonly eventType: string;
  readonly version: number;
  readonly status: StepStatus;
  readonly reason?: string;
  /** True when the event came from the event store to repair a version gap. */
  readonly repaired: boolean;
  readonly emitted: readonly Envelope[];
}

export interface ConsumeResult {
  /** The delivered event. */
  readonly event: Envelope;
  /** What happened to the delivered event. */
  readonly status: StepStatus;
  readonly reason?: string;
  /** Every event handled for this delivery, gap repairs first, in order. */
  readonly steps: readonly Step[];
}

export interface ConsumeOptions {
  readonly receiveCount?: number;
  /** How long inbox rows are kept; at least twice the longest redelivery window. */
  readonly inboxTtlSeconds?: number;
  /** Reload-and-decide-again rounds after a version conflict before giving up (transiently). */
  readonly maxConflictRetries?: number;
}

const DEFAULT_INBOX_TTL_SECONDS = 7 * 24 * 3600;
const DEFAULT_MAX_CONFLICT_RETRIES = 3;

/**
 * The consumer pipeline every role uses:
 * 1. validate the envelope (permanent error if invalid, unknown or not subscribed);
 * 2. dedup (inbox for unsequenced messages) and version gate (checkpoint for sequenced ones):
 *    older or equal versions are duplicates; a gap is filled from the event store, in order;
 * 3. for each event to apply: discard when expired or when the role says so (recorded with the
 *    reason); else run the role's decision;
 * 4. commit inbox row, checkpoint, state and appended events in one atomic write; on a version
 *    conflict reload and decide again (bounded); on an inbox conflict it is a duplicate.
 * Throws AgentBusError subclasses; the caller maps their class to retry / DLQ.
 */
export async function consume<S>(
  raw: unknown,
  role: Role<S>,
  deps: ConsumerDeps,
  options: ConsumeOptions = {},
): Promise<ConsumeResult> {
  const parsed = deps.registry.parse(raw);
  if (!parsed.ok) {
    throw new PermanentError(parsed.code, parsed.message, { details: { eventId: parsed.eventId } });
  }
  const { envelope: event, definition } = parsed;
  if (!role.subscriptions.includes(event.event_type)) {
    throw new PermanentError(
      "routing.unsubscribed",
      `consumer group ${role.group} does not subscribe to ${event.event_type}`,
    );
  }
  const stateRef = role.stateOf?.(event) ?? refOf(event);
  const stream = definition.sequenced ? refOf(event) : undefined;
  const maxRounds = (options.maxConflictRetries ?? DEFAULT_MAX_CONFLICT_RETRIES) + 1;
  const steps: Step[] = [];

  for (let round = 0; round < maxRounds; round++) {
    const loaded = await deps.store.load({
      inbox: stream ? undefined : { group: role.group, eventId: event.event_id },
      checkpoint: stream ? { group: role.group, stream } : undefined,
      state: stateRef,
    });
    const queue = await eventsToApply(event, stream, loaded, deps);
    if (queue.length === 0) {
      const step = duplicateStep(event);
      return { event, status: "duplicate", steps: [...steps, step] };
    }
    try {
      await applyInOrder(queue, event, loaded, stateRef, stream, role, deps, options, steps);
      const last = steps.at(-1);
      if (!last || last.eventId !== event.event_id)
        throw new Error("pipeline did not reach the delivered event");
      return { event, status: last.status, reason: last.reason, steps };
    } catch (error) {
      if (error instanceof VersionConflictError || error instanceof DuplicateCommitError) continue;
      throw error;
    }
  }
  throw new TransientError(
    "commit.contention",
    `gave up after ${maxRounds} conflicting commits on ${stateRef.type}#${stateRef.id}`,
  );
}

function refOf(event: Envelope): AggregateRef {
  return { type: event.aggregate.type, id: event.aggregate.id };
}

function duplicateStep(event: Envelope): Step {
  return {
    eventId: event.event_id,
    eventType: event.event_type,
    version: event.aggregate.version,
    status: "duplicate",
    repaired: false,
    emitted: [],
  };
}

/** Dedup and version gate: the events to apply, in order, ending with `event`; [] = duplicate. */
async function eventsToApply(
  event: Envelope,
  stream: AggregateRef | undefined,
  loaded: Loaded,
  deps: ConsumerDeps,
): Promise<Envelope[]> {
  if (!stream) return loaded.inboxHit ? [] : [event];
  const version = event.aggregate.version;
  const last = loaded.checkpoint;
  if (version <= last) return [];
  if (version === last + 1) return [event];
  const gap = await deps.store.readStream(stream, last + 1, version - 1);
  const present = new Set(gap.map((e) => e.aggregate.version));
  const missing: number[] = [];
  for (let v = last + 1; v < version; v++) if (!present.has(v)) missing.push(v);
  if (missing.length > 0) {
    throw new TransientError(
      "gate.gap_unrepairable",
      `${stream.type}#${stream.id}: version ${version} arrived after ${last}, and versions ${missing.join(", ")} are not in the event store`,
      { details: { stream, last, version, missing } },
    );
  }
  return [...gap, event];
}

async function applyInOrder<S>(
  queue: readonly Envelope[],
  delivered: Envelope,
  loaded: Loaded,
  stateRef: AggregateRef,
  stream: AggregateRef | undefined,
  role: Role<S>,
  deps: ConsumerDeps,
  options: ConsumeOptions,
  steps: Step[],
): Promise<void> {
  let state = loaded.state as StoredState<S> | undefined;
  let checkpoint = loaded.checkpoint;
  for (const event of queue) {
    const repaired = event.event_id !== delivered.event_id;
    // A gap may hold event types this group does not subscribe to: they only move the checkpoint.
    if (repaired && !role.subscriptions.includes(event.event_type)) continue;
    const now = deps.clock.now();
    const base = {
      group: role.group,
      event,
      now,
      ttl: options.inboxTtlSeconds ?? DEFAULT_INBOX_TTL_SECONDS,
      checkpoint: stream
        ? { group: role.group, stream, from: checkpoint, to: event.aggregate.version }
        : undefined,
    };
    const discard = isExpired(event, now)
      ? "expired"
      : await role.discard?.(state?.data, event, now);
    let commit: CommitRequest;
    let step: Step;
    if (discard) {
      commit = { inbox: inboxRow(base, "discarded", discard), checkpoint: base.checkpoint };
      step = { ...duplicateStep(event), status: "discarded", reason: discard, repaired };
    } else {
      let decision: Decision<S>;
      let status: StepStatus = "applied";
      let reason: string | undefined;
      try {
        decision = await role.decide(state?.data, event, {
          now,
          receiveCount: options.receiveCount ?? 1,
          stored: state,
          repaired,
        });
      } catch (error) {
        if (!(error instanceof BusinessRejection)) throw error;
        decision = { emit: [{ type: error.failure.type, payload: error.failure.payload }] };
        status = "rejected";
        reason = error.code;
      }
      const emitted = buildEmitted(
        decision.emit ?? [],
        event,
        stateRef,
        state?.version ?? 0,
        role.group,
        deps,
        now,
      );
      const writesState = decision.state !== undefined || emitted.length > 0;
      commit = {
        inbox: inboxRow(base, status, reason),
        checkpoint: base.checkpoint,
        state: writesState
          ? {
              aggregate: stateRef,
              expectedRevision: state?.revision ?? 0,
              next: decision.state !== undefined ? decision.state : (state?.data ?? null),
              version: (state?.version ?? 0) + emitted.length,
              dueAt: decision.dueAt ?? null,
            }
          : undefined,
        append: emitted.length > 0 ? emitted : undefined,
      };
      step = { ...duplicateStep(event), status, reason, repaired, emitted };
      if (commit.state) {
        state = {
          aggregate: stateRef,
          revision: (state?.revision ?? 0) + 1,
          version: commit.state.version,
          data: commit.state.next as S,
        };
      }
    }
    await deps.store.commit(commit);
    if (stream) checkpoint = event.aggregate.version;
    steps.push(step);
  }
}

function isExpired(event: Envelope, now: Date): boolean {
  return event.expires_at !== undefined && now.getTime() > Date.parse(event.expires_at);
}

function inboxRow(
  base: { group: string; event: Envelope; now: Date; ttl: number },
  outcome: "applied" | "discarded" | "rejected",
  reason: string | undefined,
) {
  return {
    group: base.group,
    eventId: base.event.event_id,
    eventType: base.event.event_type,
    outcome,
    ...(reason ? { reason } : {}),
    aggregate: refOf(base.event),
    version: base.event.aggregate.version,
    correlationId: base.event.correlation_id,
    taskId: base.event.task_id,
    recordedAt: base.now.toISOString(),
    expiresAt: Math.floor(base.now.getTime() / 1000) + base.ttl,
  };
}

/** Turn emit specs into validated envelopes at the next versions of `stream`. */
export function buildEmitted(
  specs: readonly EmitSpec[],
  cause: Pick<Envelope, "event_id" | "correlation_id" | "task_id" | "conversation_id"> | null,
  stream: AggregateRef,
  headVersion: number,
  producer: string,
  deps: Pick<ConsumerDeps, "registry" | "ids">,
  now: Date,
  root?: { correlationId: string; taskId: string; conversationId?: string },
): Envelope[] {
  return specs.map((spec, index) => {
    const definition = pickDefinition(spec, deps);
    const candidate = {
      event_id: deps.ids.next(),
      event_type: definition.type,
      schema_version: definition.schemaVersion,
      occurred_at: now.toISOString(),
      correlation_id: cause?.correlation_id ?? root?.correlationId,
      causation_id: cause?.event_id ?? null,
      task_id: spec.taskId ?? cause?.task_id ?? root?.taskId,
      conversation_id: spec.conversationId ?? cause?.conversation_id ?? root?.conversationId,
      aggregate: { ...stream, version: headVersion + index + 1 },
      order_key: spec.orderKey ?? stream.id,
      producer,
      attempt: 1,
      expires_at: spec.expiresAt,
      input_version: spec.inputVersion,
      payload: spec.payload,
    };
    const parsed = deps.registry.parse(JSON.parse(JSON.stringify(candidate)));
    if (!parsed.ok) {
      throw new PermanentError(
        "emit.invalid",
        `${producer} emitted an invalid ${spec.type}: ${parsed.message}`,
      );
    }
    return parsed.envelope;
  });
}

function pickDefinition(spec: EmitSpec, deps: Pick<ConsumerDeps, "registry">): EventTypeDefinition {
  const candidates = deps.registry.definitions().filter((d) => d.type === spec.type);
  const definition =
    spec.schemaVersion === undefined
      ? candidates.sort((a, b) => b.schemaVersion - a.schemaVersion)[0]
      : candidates.find((d) => d.schemaVersion === spec.schemaVersion);
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
