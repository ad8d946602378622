import type { AggregateRef, Envelope } from "../../schemas";
import { buildEmitted } from "./emit";
import { TransientError, VersionConflictError } from "./errors";
import type { ConsumerDeps, StoredState } from "./ports";
import type { Decision } from "./role";

export interface AppendRequest<S> {
  /** The aggregate whose stream receives the events. */
  readonly aggregate: AggregateRef;
  readonly producer: string;
  readonly correlationId: string;
  readonly taskId: string;
  readonly conversationId?: string;
  /**
   * The caller's W3C trace context, which a write without a cause continues (a new trace without
   * one; ./trace-context.ts).
   */
  readonly traceparent?: string;
  /** The event that caused this write, when there is one. */
  readonly cause?: Envelope;
  /**
   * The processing attempt that writes (the envelope's `attempt`). Default 1: a producer that
   * writes once per request is on its first attempt; one that retries a request it already tried
   * (a handler on a redelivered message) passes that message's receive count.
   */
  readonly attempt?: number;
  /** Decide from the current state (reloaded after a conflict): next state and events. */
  readonly decide: (state: StoredState<S> | undefined) => Decision<S>;
  readonly maxConflictRetries?: number;
}

/**
 * The producer side of the transactional outbox: an API, CLI or agent changes an aggregate and
 * appends its events in one atomic write (state with a revision condition + events that must not
 * exist yet). The event store's stream then carries the events to the relay. On a conflict the
 * state is reloaded and `decide` runs again.
 */
export async function appendToStream<S>(
  deps: ConsumerDeps,
  request: AppendRequest<S>,
): Promise<Envelope[]> {
  const rounds = (request.maxConflictRetries ?? 3) + 1;
  for (let round = 0; round < rounds; round++) {
    const { state } = await deps.store.load({ state: request.aggregate });
    const current = state as StoredState<S> | undefined;
    const decision = request.decide(current);
    const emitted = buildEmitted(
      decision.emit ?? [],
      request.cause ?? null,
      request.aggregate,
      current?.version ?? 0,
      {
        producer: request.producer,
        now: deps.clock.now(),
        attempt: request.attempt ?? 1,
        root: {
          correlationId: request.correlationId,
          taskId: request.taskId,
          conversationId: request.conversationId,
          ...(request.traceparent === undefined ? {} : { traceparent: request.traceparent }),
        },
      },
      deps,
    );
    try {
      await deps.store.commit({
        state: {
          aggregate: request.aggregate,
          expectedRevision: current?.revision ?? 0,
          next: decision.state !== undefined ? decision.state : (current?.data ?? null),
          version: (current?.version ?? 0) + emitted.length,
          // The aggregate may be a consumer group's state too: its gate records are kept.
          ...(current?.gate ? { gate: current.gate } : {}),
          ...(current?.streamHead ? { streamHead: current.streamHead } : {}),
        },
        append: emitted,
      });
      return emitted;
    } catch (error) {
      if (error instanceof VersionConflictError) continue;
      throw error;
    }
  }
  throw new TransientError(
    "commit.contention",
    `gave up appending to ${request.aggregate.type}#${request.aggregate.id}`,
  );
}
