import type { AggregateRef, Envelope } from "../../schemas";
import { tenantOf } from "../../schemas/ids";
import {
  type CommitBase,
  decided,
  discarded,
  type Handled,
  kept,
  keptUntil,
  refOf,
} from "./commit";
import { buildEmitted } from "./emit";
import {
  AgentBusError,
  BusinessRejection,
  DuplicateCommitError,
  describe,
  PermanentError,
  VersionConflictError,
} from "./errors";
import { storedFor } from "./personal-data/delivery";
import type { ConsumerDeps, DiscardReason, Loaded, RecordedOutcome, StoredState } from "./ports";
import { pastDedupHorizon } from "./replay";
import { awaitRequiredVersion } from "./required-version";
import { retentionSeconds } from "./retention";
import type { ConsumeOptions, DecideContext, Decision, Role, Step } from "./role";

/**
 * How the pipeline applies the events the gate let through: each discarded or decided, and
 * committed atomically (what a commit holds: ./commit).
 */

/**
 * The states a delivery reads and writes, by aggregate: loaded once each, then kept current. The
 * home state (the delivered event's) comes with the delivery's load.
 */
class StateCache<S> {
  private readonly states = new Map<string, StoredState<S> | undefined>();
  constructor(
    home: AggregateRef,
    homeState: StoredState<S> | undefined,
    private readonly deps: Pick<ConsumerDeps, "store">,
  ) {
    this.states.set(refKey(home), homeState);
  }
  async get(ref: AggregateRef): Promise<StoredState<S> | undefined> {
    const k = refKey(ref);
    if (!this.states.has(k)) {
      const loaded = await this.deps.store.load({ state: ref });
      this.states.set(k, loaded.state as StoredState<S> | undefined);
    }
    return this.states.get(k);
  }
  set(ref: AggregateRef, state: StoredState<S> | undefined): void {
    this.states.set(refKey(ref), state);
  }
}

function refKey(ref: AggregateRef): string {
  return `${ref.type}#${ref.id}`;
}

function sameRef(a: AggregateRef, b: AggregateRef): boolean {
  return a.type === b.type && a.id === b.id;
}

/**
 * True when the group keeps this message whole in its inbox row (Role.keepsMessages): an
 * unsequenced one (version 0, as the registry requires of unsequenced types).
 */
export function keepsMessage(role: Pick<Role<unknown>, "keepsMessages">, event: Envelope): boolean {
  return role.keepsMessages === true && event.aggregate.version === 0;
}

/** True when the role's events of this stream go to several of its states (Role.sharedStreams). */
export function sharedStream(role: Pick<Role<unknown>, "sharedStreams">, stream?: AggregateRef) {
  return stream !== undefined && (role.sharedStreams?.includes(stream.type) ?? false);
}

/** A delivery as the pipeline handles it, whatever the loads and rounds of its commit. */
export interface Delivery<S> {
  /** The delivered event, validated. */
  readonly event: Envelope;
  /** The delivered event's state (`stateRefOf(role, event)`), which each load reads. */
  readonly home: AggregateRef;
  /** The stream whose version gate the event passes; undefined for an unsequenced one. */
  readonly stream: AggregateRef | undefined;
  readonly role: Role<S>;
  readonly deps: ConsumerDeps;
  readonly options: ConsumeOptions;
}

/**
 * Apply the gate's events in order, committing each on its own. A stream's checkpoint is kept
 * on the state its events go to (./gate-records): an event of the gap that belongs to another
 * aggregate is left to that aggregate, whose own delivery or gap repair applies it in its order.
 * A shared stream (Role.sharedStreams) keeps the group's checkpoint row instead, and each event
 * of its gap is applied to its own state (`role.stateOf`), as the row says where the group is.
 */
export async function applyInOrder<S>(
  queue: readonly Envelope[],
  delivery: Delivery<S>,
  loaded: Loaded,
  steps: Step[],
): Promise<void> {
  const { event: delivered, home, stream, role, deps } = delivery;
  const shared = sharedStream(role, stream);
  const states = new StateCache<S>(home, loaded.state as StoredState<S> | undefined, deps);
  let checkpoint = loaded.checkpoint;
  for (const queued of queue) {
    const repaired = queued.event_id !== delivered.event_id;
    // A gap may hold event types this group does not subscribe to: they only move the checkpoint.
    if (repaired && !role.subscriptions.includes(queued.event_type)) continue;
    // A gap's events come from the event store sealed: opened as the delivered one was.
    const event = repaired
      ? await storedFor(queued, role, deps.registry, deps.personalData)
      : queued;
    const stateRef = repaired ? stateRefOf(role, event) : home;
    if (!shared && !sameRef(stateRef, home)) continue;
    const state = await states.get(stateRef);
    const at = { stateRef, state, checkpoint, repaired, states };
    const one = oneOf(delivery, event, at);
    const handled = repaired
      ? await atEvent(event, () => handleAndCommit(one))
      : await handleAndCommit(one);
    states.set(stateRef, handled.state);
    if (shared) checkpoint = event.aggregate.version;
    steps.push(handled.step);
  }
}

/**
 * One event and what handling it needs, at its state: `checkpoint` is the shared stream's, when it
 * is one; `states` reads any other state the event names (its required version's).
 */
function oneOf<S>(
  delivery: Delivery<S>,
  event: Envelope,
  at: {
    stateRef: AggregateRef;
    state: StoredState<S> | undefined;
    checkpoint: number;
    repaired: boolean;
    states: StateCache<S>;
  },
): One<S> {
  const { stateRef, state, checkpoint, repaired, states } = at;
  const { stream, role, deps, options } = delivery;
  const shared = sharedStream(role, stream);
  const now = deps.clock.now();
  const keeps = keepsMessage(role, event);
  const base: CommitBase = {
    group: role.group,
    event,
    now,
    ttl: options.inboxTtlSeconds ?? retentionSeconds("inboxRows"),
    stream: shared ? undefined : stream,
    row:
      shared && stream
        ? { group: role.group, stream, from: checkpoint, to: event.aggregate.version }
        : undefined,
    keepsMessage: keeps ? true : undefined,
    repeatable: role.repeatableTypes?.includes(event.event_type) ? true : undefined,
    keptUntil: keeps
      ? keptUntil(now, isHeartbeat(event, deps), options.keptMessageTtlSeconds)
      : undefined,
  };
  const readState = (ref: AggregateRef) => states.get(ref);
  return { base, state, stateRef, repaired, role, deps, options, readState };
}

/** True when the event's type is a heartbeat (EventTypeDefinition.heartbeat). */
function isHeartbeat(event: Envelope, deps: Pick<ConsumerDeps, "registry">): boolean {
  return deps.registry.get(event.event_type, event.schema_version)?.heartbeat === true;
}

/** The event handled, then its commit written. */
async function handleAndCommit<S>(one: One<S>): Promise<Handled<S>> {
  const handled = await handleOne(one);
  await one.deps.store.commit(handled.commit);
  return handled;
}

/**
 * Run one event's step; a failure while applying an event read from the store to fill a gap names
 * that event (the failure is settled on the delivered message, whose dead letter would otherwise
 * not say which event failed). Commit conflicts pass through as they are: consume() retries them.
 */
async function atEvent<T>(event: Envelope, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof VersionConflictError || error instanceof DuplicateCommitError) throw error;
    const info = describe(error);
    const at = `${event.event_type} v${event.aggregate.version} (${event.event_id})`;
    throw new AgentBusError(
      info.errorClass,
      info.code,
      `while repairing a gap with ${at}: ${info.message}`,
      {
        cause: error,
        details: {
          ...(error instanceof AgentBusError ? error.details : {}),
          repaired_event_id: event.event_id,
        },
      },
    );
  }
}

export function stateRefOf(role: Pick<Role<unknown>, "stateOf">, event: Envelope): AggregateRef {
  return role.stateOf?.(event) ?? refOf(event);
}

/**
 * One event: discard it (expired, or the role's reason) unless the role has unfinished work for
 * it, else decide. Expiry and supersession stop new work, never the resolution of work started.
 * A replayed unsequenced message older than the inbox's time to live is discarded as expired in
 * any case (./replay.ts): the group cannot know whether it applied it. Before the role is asked,
 * a message that waits for another state's version is held until that state reaches it
 * (./required-version.ts), unless it expired or the role needs no order (`unordered`).
 */
async function handleOne<S>(one: One<S>): Promise<Handled<S>> {
  const { base, state, stateRef, repaired, role, options } = one;
  const { event, now } = base;
  refuseOtherTenant(role, state, stateRef, event);
  // Checked before the role is asked anything: past the horizon, nothing may start or resume.
  if (pastDedupHorizon(event, repaired ? undefined : options.replay, now, base.ttl))
    return discarded(base, state, stateRef, "expired", repaired, true);
  const expired = isExpired(event, now);
  if (!expired && !role.unordered)
    await awaitRequiredVersion(event, one.readState, options.lastAttempt === true);
  const discard = expired ? "expired" : await role.discard?.(state?.data, event, now);
  if (!discard) return decideOne(one, undefined);
  // A discarded event is still decided when the role has unfinished work for it.
  const unfinished = await role.unfinished?.(state?.data, event);
  return unfinished ? decideOne(one, discard) : discardOne(one, discard);
}

/** The event discarded: with the facts the role records of the discard (Role.discarded), if any. */
async function discardOne<S>(one: One<S>, reason: DiscardReason): Promise<Handled<S>> {
  const { base, state, stateRef, repaired, role } = one;
  const facts = await role.discarded?.(state?.data, base.event, reason, contextOf(one, undefined));
  if (!facts) return discarded(base, state, stateRef, reason, repaired);
  const decision = { ...facts, discarded: reason };
  return stepOf(one, { decision, status: "discarded", reason });
}

/**
 * A message from outside any stream (version 0) to a state of another tenant, or naming no
 * tenant for a tenant's state, is refused before anything else (Role.tenantOfState): a command
 * is obeyed only in the tenant of what it acts on, so that nothing it causes leaves that tenant.
 * A state that does not know its tenant (stored before its role recorded one) is not checked.
 */
function refuseOtherTenant<S>(
  role: Pick<Role<S>, "tenantOfState">,
  state: StoredState<S> | undefined,
  stateRef: AggregateRef,
  event: Envelope,
): void {
  // A state with no data (a refused start's) belongs to nobody yet.
  if (!role.tenantOfState || state?.data == null || event.aggregate.version !== 0) return;
  const owner = role.tenantOfState(state.data);
  // Unknown is not the default tenant: taking it for one would refuse its own tenant's commands.
  if (owner === undefined) return;
  const sender = tenantOf(event);
  if (owner === sender) return;
  throw new PermanentError(
    `${stateRef.type}.tenant_mismatch`,
    `${event.event_type} of tenant ${sender} refused: ${stateRef.type} ${stateRef.id} belongs to tenant ${owner}`,
    {
      details: {
        event_id: event.event_id,
        aggregate: `${stateRef.type}/${stateRef.id}`,
        tenant: owner,
        message_tenant: sender,
      },
    },
  );
}

/** One event and what handling it needs. */
interface One<S> {
  readonly base: CommitBase;
  readonly state: StoredState<S> | undefined;
  readonly stateRef: AggregateRef;
  readonly repaired: boolean;
  readonly role: Role<S>;
  readonly deps: ConsumerDeps;
  readonly options: ConsumeOptions;
  /** Reads a state by its aggregate, once per delivery (the home state without a read). */
  readonly readState: (ref: AggregateRef) => Promise<StoredState | undefined>;
}

/** The role's decision on the event (resolving `discard` when set), as a commit. */
async function decideOne<S>(one: One<S>, discard: DiscardReason | undefined): Promise<Handled<S>> {
  const { base, state, repaired, role, options } = one;
  if (base.keepsMessage) return kept(base);
  const context = contextOf(one, discard);
  const lastAttempt = !repaired && options.lastAttempt === true;
  return stepOf(one, await decideOrReject(role, state, base.event, context, lastAttempt));
}

/** What the role is told of the event it decides on (`resolving` the discard it finishes). */
function contextOf<S>(one: One<S>, resolving: DiscardReason | undefined): DecideContext<S> {
  return {
    now: one.base.now,
    receiveCount: attemptOf(one),
    stored: one.state,
    repaired: one.repaired,
    resolving,
  };
}

/**
 * The processing attempt of an event: the queue's receive count of the delivered message (1 when
 * the caller gave none). The count belongs to the delivered message; an event read from the store
 * to fill a gap is processed here for the first time.
 */
function attemptOf(one: Pick<One<unknown>, "repaired" | "options">): number {
  return one.repaired ? 1 : (one.options.receiveCount ?? 1);
}

function stepOf<S>(one: One<S>, { decision, status, reason }: Decided<S>): Handled<S> {
  const { base, state, stateRef, repaired, role, deps } = one;
  const { event } = base;
  // What a decision emits is stamped with the processing attempt it was decided on (the same
  // count `decide` was given).
  const origin = { producer: role.group, now: base.now, attempt: attemptOf(one) };
  const specs = decision.emit ?? [];
  const emitted = buildEmitted(specs, event, stateRef, state?.version ?? 0, origin, deps);
  const step = {
    eventId: event.event_id,
    eventType: event.event_type,
    version: event.aggregate.version,
    status,
    reason,
    repaired,
    emitted,
  };
  return decided(base, state, stateRef, role, decision, step);
}

interface Decided<S> {
  readonly decision: Decision<S>;
  readonly status: RecordedOutcome;
  readonly reason?: string;
}

/**
 * The role's decision. A BusinessRejection becomes its failure event, status `rejected`; an error
 * the role cannot recover from (permanent, or any on the last attempt) becomes the role's failure
 * facts (`Role.failed`), status `rejected` with the error's code, when the role has any.
 */
async function decideOrReject<S>(
  role: Role<S>,
  state: StoredState<S> | undefined,
  event: Envelope,
  context: DecideContext<S>,
  lastAttempt: boolean,
): Promise<Decided<S>> {
  let decision: Decision<S>;
  try {
    decision = await role.decide(state?.data, event, context);
  } catch (error) {
    return rejectedOrThrow(role, state, event, context, lastAttempt, error);
  }
  return outcomeOf(decision);
}

function outcomeOf<S>(decision: Decision<S>): Decided<S> {
  return decision.discarded
    ? { decision, status: "discarded", reason: decision.discarded }
    : { decision, status: "applied" };
}

function rejectedOrThrow<S>(
  role: Role<S>,
  state: StoredState<S> | undefined,
  event: Envelope,
  context: DecideContext<S>,
  lastAttempt: boolean,
  error: unknown,
): Decided<S> {
  if (error instanceof BusinessRejection)
    return {
      decision: { emit: [{ type: error.failure.type, payload: error.failure.payload }] },
      status: "rejected",
      reason: error.code,
    };
  const failure = describe(error);
  const forGood = failure.errorClass === "permanent" || lastAttempt;
  const decision = forGood ? role.failed?.(state?.data, event, failure, context) : undefined;
  if (decision === undefined) throw error;
  return { decision, status: "rejected", reason: failure.code };
}

function isExpired(event: Envelope, now: Date): boolean {
  return event.expires_at !== undefined && now.getTime() > Date.parse(event.expires_at);
}
