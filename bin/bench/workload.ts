import { InMemoryEventStore } from "../../functions/core/memory";
import type { ConsumerDeps } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import type { TaskView } from "../../functions/roles/task-projection/task-projection";
import { type Envelope, registry } from "../../schemas";
import { seededRandom, shuffle } from "./stats";

/** The task lifecycle in stream order, with payloads the task-projection role folds. */
export const LIFECYCLE = [
  { type: "task.accepted", payload: { title: "Why is my refund late?" } },
  {
    type: "plan.created",
    payload: {
      steps: [{ title: "look up order" }, { title: "check refund" }, { title: "draft reply" }],
    },
  },
  { type: "answer.generated", payload: { answer_ref: "answers/refund-status-1" } },
  { type: "notification.sent", payload: { channel: "email" } },
] as const;

export const BENCH_START = "2026-09-01T10:00:00.000Z";

/** In-memory consumer dependencies on a fixed clock (nothing in the workload expires). */
export function memoryDeps(store?: InMemoryEventStore) {
  const clock = new ManualClock(BENCH_START);
  const deps: ConsumerDeps = {
    store: store ?? new InMemoryEventStore(clock),
    registry,
    clock,
    ids: ulidSource(clock),
  };
  return { clock, deps };
}

const ids = ulidSource();

/** A client's feedback on a task: unsequenced (version 0), de-duplicated by event id only. */
export function feedbackEnvelope(taskId: string, rating: number): Envelope {
  const parsed = registry.parse({
    event_id: ids.next(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: BENCH_START,
    correlation_id: `corr_${ids.next()}`,
    causation_id: null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    producer: "web-client",
    payload: { rating, comment: "thanks, that answered it" },
  });
  if (!parsed.ok) throw new Error(`bench built an invalid feedback envelope: ${parsed.message}`);
  return parsed.envelope;
}

export const newTaskId = (): string => `task_${ids.next()}`;

/**
 * Commit `steps` lifecycle events of each task through the producer API (the transactional
 * outbox), phase by phase so the tasks progress side by side as they would in production.
 * Returns the appended envelopes in commit order.
 */
export async function produceLifecycles(
  deps: ConsumerDeps,
  taskIds: readonly string[],
  steps: number = LIFECYCLE.length,
): Promise<Envelope[]> {
  const correlation = new Map(taskIds.map((id) => [id, `corr_${ids.next()}`]));
  const last = new Map<string, Envelope>();
  const out: Envelope[] = [];
  for (const step of LIFECYCLE.slice(0, steps)) {
    for (const taskId of taskIds) {
      const emitted = await appendToStream<{ status: string }>(deps, {
        aggregate: { type: "task", id: taskId },
        producer: "task-api",
        correlationId: correlation.get(taskId) ?? `corr_${ids.next()}`,
        taskId,
        cause: last.get(taskId),
        decide: () => ({ state: { status: step.type }, emit: [step] }),
      });
      for (const e of emitted) {
        last.set(taskId, e);
        out.push(e);
      }
    }
  }
  return out;
}

/** What a queue hands a consumer: the envelope as parsed JSON, not the validated object. */
const asDelivered = (envelope: Envelope): unknown => JSON.parse(JSON.stringify(envelope));

export interface ThroughputWorkload {
  readonly taskIds: readonly string[];
  /** Expected rating of each task's single feedback message. */
  readonly ratings: ReadonlyMap<string, number>;
  /** The producer's event store: its task streams serve gap repair in every pass. */
  readonly source: InMemoryEventStore;
  /** Every lifecycle event, then every feedback message, each exactly once and in order. */
  readonly inOrder: readonly unknown[];
  /** The same events plus a redelivered copy of a fraction of them, all shuffled. */
  readonly messy: readonly unknown[];
  readonly duplicates: number;
}

export async function buildThroughputWorkload(options: {
  tasks: number;
  duplicateFraction: number;
  seed: number;
}): Promise<ThroughputWorkload> {
  const { deps } = memoryDeps();
  const source = deps.store as InMemoryEventStore;
  const taskIds = Array.from({ length: options.tasks }, newTaskId);
  const lifecycle = await produceLifecycles(deps, taskIds);
  const random = seededRandom(options.seed);
  const ratings = new Map(taskIds.map((id) => [id, 1 + Math.floor(random() * 5)]));
  const feedback = taskIds.map((id) => feedbackEnvelope(id, ratings.get(id) ?? 5));
  const inOrder = [...lifecycle, ...feedback].map(asDelivered);
  const duplicates = Math.round(inOrder.length * options.duplicateFraction);
  const redelivered = shuffle([...inOrder], random).slice(0, duplicates);
  const messy = shuffle([...inOrder, ...redelivered.map((e) => structuredClone(e))], random);
  return { taskIds, ratings, source, inOrder, messy, duplicates };
}

/** A fresh consumer-side store that shares (read only) the producer's task streams. */
export function storeWithStreams(source: InMemoryEventStore): InMemoryEventStore {
  const store = new InMemoryEventStore(new ManualClock(BENCH_START));
  for (const [key, stream] of source.streams) store.streams.set(key, stream);
  return store;
}

/** How many task views ended exactly as one in-order, exactly-once delivery leaves them. */
export function correctViews(
  workload: ThroughputWorkload,
  viewOf: (taskId: string) => TaskView | undefined,
): number {
  let correct = 0;
  for (const taskId of workload.taskIds) {
    const view = viewOf(taskId);
    const rating = workload.ratings.get(taskId);
    if (
      view?.status === "delivered" &&
      view.version === LIFECYCLE.length &&
      view.history.map((h) => h.version).join() === "1,2,3,4" &&
      view.feedback.count === 1 &&
      view.feedback.rating_total === rating
    )
      correct++;
  }
  return correct;
}
