import { type AggregateRef, type Envelope, MAX_STORED_ENVELOPE_BYTES } from "../../schemas";
import { applyInOrder, type Delivery, keepsMessage, sharedStream, stateRefOf } from "./apply";
import { openClaim } from "./claim-check";
import { duplicateStep, refOf } from "./commit";
import {
  DuplicateCommitError,
  PermanentError,
  TransientError,
  VersionConflictError,
} from "./errors";
import { eventsToApply } from "./gate";
import { deliveryFor } from "./personal-data/delivery";
import type { ConsumerDeps, LoadRequest } from "./ports";
import type { ConsumeOptions, ConsumeResult, Role, Step } from "./role";

const DEFAULT_MAX_CONFLICT_RETRIES = 3;

/**
 * What the pipeline reads for the event: the state, with the stream's checkpoint (a sequenced
 * event) or the dedup record (an unsequenced one: the state's recent ids, the row as well once a
 * commit found one, or the row alone for a group that keeps messages whole).
 */
function loadRequestOf(
  role: Role<unknown>,
  event: Envelope,
  stream: AggregateRef | undefined,
  stateRef: AggregateRef,
  readRow: boolean,
): LoadRequest {
  if (stream)
    return {
      checkpoint: { group: role.group, stream, row: sharedStream(role, stream) },
      state: stateRef,
    };
  const rowOnly = keepsMessage(role, event);
  return {
    inbox: { group: role.group, eventId: event.event_id, row: readRow || rowOnly, rowOnly },
    state: stateRef,
  };
}

/**
 * The consumer pipeline every role uses:
 * 1. open the sealed personal fields the role reads (./personal-data/delivery.ts), then validate
 *    the envelope (permanent error if invalid, unknown or not subscribed);
 * 2. dedup (recent ids for unsequenced messages) and version gate (checkpoint for sequenced
 *    ones), both kept on the state item: older or equal versions are duplicates; a gap is filled
 *    from the event store, in order;
 * 3. for each event to apply: discard when expired or when the role says so (recorded with the
 *    reason); else run the role's decision;
 * 4. commit the state with its gate records (which record the event), the appended events, and
 *    an inbox row only for a discard, a rejection or a repair, in one atomic write; on a version
 *    conflict reload and decide again (bounded); on an inbox conflict it is a duplicate.
 * Throws AgentBusError subclasses; the caller maps their class to retry / DLQ.
 */
export async function consume<S>(
  raw: unknown,
  role: Role<S>,
  deps: ConsumerDeps,
  options: ConsumeOptions = {},
): Promise<ConsumeResult> {
  // A claim check is opened from the event's stream; what it opens may exceed the bus's limit.
  const opened = await openClaim(raw, deps.store);
  const delivered = await deliveryFor(opened, role, deps.registry, deps.personalData);
  const parsed = deps.registry.parse(
    delivered.raw,
    opened === raw ? {} : { maxBytes: MAX_STORED_ENVELOPE_BYTES },
  );
  if (!parsed.ok) {
    throw new PermanentError(parsed.code, parsed.message, { details: { eventId: parsed.eventId } });
  }
  const { definition } = parsed;
  const event = delivered.restore(parsed.envelope);
  if (!role.subscriptions.includes(event.event_type)) {
    throw new PermanentError(
      "routing.unsubscribed",
      `consumer group ${role.group} does not subscribe to ${event.event_type}`,
    );
  }
  const stateRef = stateRefOf(role, event);
  const stream = definition.sequenced && !role.unordered ? refOf(event) : undefined;
  const delivery: Delivery<S> = { event, home: stateRef, stream, role, deps, options };
  const maxRounds = (options.maxConflictRetries ?? DEFAULT_MAX_CONFLICT_RETRIES) + 1;
  const steps: Step[] = [];
  // The state's recent ids answer the dedup check; after a commit found the inbox row (the id
  // had left the recent ones), the row is read as well.
  let readRow = false;

  for (let round = 0; round < maxRounds; round++) {
    const loaded = await deps.store.load(loadRequestOf(role, event, stream, stateRef, readRow));
    const queue = await eventsToApply(event, stream, loaded, deps, role.beginsState);
    if (queue.length === 0) {
      const step = duplicateStep(event);
      return { event, status: "duplicate", steps: [...steps, step] };
    }
    try {
      await applyInOrder(queue, delivery, loaded, steps);
      const last = steps.at(-1);
      if (!last || last.eventId !== event.event_id)
        throw new Error("pipeline did not reach the delivered event");
      return { event, status: last.status, reason: last.reason, steps };
    } catch (error) {
      if (error instanceof DuplicateCommitError) readRow = true;
      if (error instanceof VersionConflictError || error instanceof DuplicateCommitError) continue;
      throw error;
    }
  }
  throw new TransientError(
    "commit.contention",
    `gave up after ${maxRounds} conflicting commits on ${stateRef.type}#${stateRef.id}`,
  );
}
