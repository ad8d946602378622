import { InMemoryEventStore } from "../../../functions/core/memory";
import { consume } from "../../../functions/core/pipeline";
import type { EventStore } from "../../../functions/core/ports";
import { conversationProjection } from "../../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { taskProjection } from "../../../functions/roles/task-projection/task-projection";
import { type AggregateRef, type Envelope, MAX_STREAM_VERSION } from "../../../schemas";
import { canonical, checkFold, foldDeps } from "../../operator/rebuild";

/** A stored view that differs from the fold of its events. */
export interface ViewDrift {
  readonly view: string;
  readonly stored: unknown;
  readonly folded: unknown;
}

/**
 * projection = fold: a view equals what the projection makes of its events fed in order on an
 * empty store. The conversation view folds its streams (lib/operator checkFold, as `agentbus rebuild
 * --check` does); the task view also folds the client feedback no stream holds, so it is folded
 * here with the same pipeline.
 */
export async function conversationDrift(
  store: EventStore,
  streams: readonly AggregateRef[],
): Promise<ViewDrift[]> {
  const { drift } = await checkFold(store, conversationProjection as never, streams);
  return drift.map((d) => ({
    view: `${d.state.type}#${d.state.id}`,
    stored: d.stored,
    folded: d.folded,
  }));
}

export async function taskViewDrift(
  store: EventStore,
  taskId: string,
  feedback: readonly Envelope[],
): Promise<ViewDrift[]> {
  const stream = await store.readStream({ type: "task", id: taskId }, 1, MAX_STREAM_VERSION);
  const scratch = new InMemoryEventStore();
  await scratch.commit({ append: stream });
  for (const event of [...stream, ...feedback])
    await consume(event, taskProjection, foldDeps(scratch, event));
  const ref = { type: "task_view", id: taskId };
  const folded = (await scratch.load({ state: ref })).state?.data;
  const stored = (await store.load({ state: ref })).state?.data;
  if (canonical(folded) === canonical(stored)) return [];
  return [{ view: `task_view#${taskId}`, stored, folded }];
}
