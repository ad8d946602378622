import { ulid } from "ulid";
import { InMemoryEventStore } from "../../functions/core/memory";
import type { Vault } from "../../functions/core/personal-data/vault";
import type { CommitRequest, ConsumerDeps, EventStore } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import { type Envelope, registry } from "../../schemas";

export const LIFECYCLE = [
  { type: "task.accepted", payload: { title: "Why is my refund late?" } },
  {
    type: "plan.created",
    payload: { steps: [{ title: "look up order" }, { title: "draft reply" }] },
  },
  { type: "answer.generated", payload: { answer_ref: "ans_1" } },
  { type: "notification.sent", payload: { channel: "email" } },
] as const;

export function makeDeps(
  start = "2026-09-01T10:00:00.000Z",
  vault?: (clock: ManualClock) => Vault,
) {
  const clock = new ManualClock(start);
  const store = new InMemoryEventStore(clock, vault?.(clock));
  const deps: ConsumerDeps = { store, registry, clock, ids: ulidSource(clock) };
  return { clock, store, deps };
}

export const newTaskId = () => `task_${ulid()}`;
export const newCorrelationId = () => `corr_${ulid()}`;

/** Commit the first `steps` lifecycle events of a new task through the producer API. */
export async function seedTask(
  deps: ConsumerDeps,
  steps = 4,
  taskId = newTaskId(),
): Promise<Envelope[]> {
  const correlationId = newCorrelationId();
  const out: Envelope[] = [];
  for (const step of LIFECYCLE.slice(0, steps)) {
    const emitted = await appendToStream(deps, {
      aggregate: { type: "task", id: taskId },
      producer: "task-api",
      correlationId,
      taskId,
      cause: out.at(-1),
      decide: (state) => ({
        state: { status: step.type, n: ((state?.data as { n?: number })?.n ?? 0) + 1 },
        emit: [step],
      }),
    });
    out.push(...emitted);
  }
  return out;
}

/** A client's feedback: unsequenced (version 0), de-duplicated by event id only. */
export function feedback(
  taskId: string,
  rating: number,
  overrides: Partial<Envelope> = {},
): Envelope {
  const envelope = {
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: "2026-09-01T10:00:05.000Z",
    correlation_id: newCorrelationId(),
    causation_id: null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    order_key: taskId,
    producer: "web-client",
    attempt: 1,
    payload: { rating },
    ...overrides,
  };
  return envelope as Envelope;
}

/** A client's message: unsequenced, on conversation/<id> at version 0, a new task id. */
export function clientMessage(
  conversationId: string,
  text: string,
  options: { customer?: string; overrides?: Partial<Envelope> } = {},
): Envelope {
  const taskId = newTaskId();
  return {
    event_id: ulid(),
    event_type: "conversation.message.received",
    schema_version: 1,
    occurred_at: "2026-09-01T10:00:00.000Z",
    correlation_id: newCorrelationId(),
    causation_id: null,
    task_id: taskId,
    conversation_id: conversationId,
    aggregate: { type: "conversation", id: conversationId, version: 0 },
    order_key: conversationId,
    producer: "web-client",
    attempt: 1,
    payload: { text, customer_id: options.customer ?? "cust_alice" },
    ...options.overrides,
  } as Envelope;
}

/** The store, with every commit request it was given kept in order. */
export function countingStore(store: EventStore): { store: EventStore; commits: CommitRequest[] } {
  const commits: CommitRequest[] = [];
  return {
    commits,
    store: {
      load: (r) => store.load(r),
      readStream: (...a) => store.readStream(...a),
      commit: (r) => {
        commits.push(r);
        return store.commit(r);
      },
    },
  };
}
