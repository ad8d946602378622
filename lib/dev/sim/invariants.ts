import type { DecideContext } from "../../../functions/core/role";
import {
  type TaskView,
  taskProjection,
} from "../../../functions/roles/task-projection/task-projection";
import { registry } from "../../../schemas";
import type { World } from "./world";

/**
 * What must hold after every schedule, whatever the faults, checked from the outside: from what
 * the store applied, what is stored and what the queues hold, never from how the code works.
 */
export interface Violation {
  readonly invariant: string;
  readonly detail: string;
}

const END_TYPES = new Set(["workflow.completed", "workflow.partial", "workflow.failed"]);

export function checkInvariants(world: World): Violation[] {
  return [
    ...appliedOnce(world),
    ...nothingLost(world),
    ...onlyPoisonDeadLettered(world),
    ...runsEnded(world),
    ...projectionsFold(world),
    ...sentOnce(world),
    ...conversationsAnswered(world),
  ];
}

/** No customer message gets two replies: at most one delivery per task, whatever its key. */
function sentOnce(world: World): Violation[] {
  return repliedTwice(world.replies.deliveries());
}

/** The tasks of these deliveries that got more than one reply, whatever the keys. */
export function repliedTwice(deliveries: readonly { readonly key: string }[]): Violation[] {
  const byTask = new Map<string, string[]>();
  for (const d of deliveries) {
    const task = d.key.split(":")[0] ?? d.key;
    byTask.set(task, [...(byTask.get(task) ?? []), d.key]);
  }
  return [...byTask]
    .filter(([, keys]) => keys.length > 1)
    .map(([task, keys]) => ({
      invariant: "sent once",
      detail: `${task} got ${keys.length} replies (${keys.join(", ")})`,
    }));
}

/** The newest message the conversation accepted has its reply delivered. */
function conversationsAnswered(world: World): Violation[] {
  const delivered = new Set(world.replies.deliveries().map((d) => d.key.split(":")[0]));
  const violations: Violation[] = [];
  for (const [key, stream] of world.memory.streams) {
    if (!key.startsWith("conversation#")) continue;
    const accepted = [...stream.values()]
      .filter((e) => e.event_type === "conversation.message.accepted")
      .sort((a, b) => a.aggregate.version - b.aggregate.version);
    const newest = accepted.at(-1);
    if (newest && !delivered.has(newest.task_id))
      violations.push({
        invariant: "conversations answered",
        detail: `${key}: no reply to its newest message (${newest.task_id})`,
      });
  }
  return violations;
}

/** Each event changes each group's state at most once. */
function appliedOnce(world: World): Violation[] {
  const seen = new Map<string, number>();
  for (const c of world.store.applied) {
    const key = `${c.group} ${c.eventId}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  }
  return [...seen]
    .filter(([, n]) => n > 1)
    .map(([key, n]) => ({ invariant: "applied once", detail: `${key} applied ${n} times` }));
}

/** Every stored or published event reached every group subscribed to its type. */
function nothingLost(world: World): Violation[] {
  const recorded = new Set(world.store.applied.map((c) => `${c.group} ${c.eventId}`));
  const violations: Violation[] = [];
  for (const event of [...world.memory.log, ...world.external]) {
    if (!registry.parse(event).ok) continue;
    for (const role of world.roles) {
      if (!role.subscriptions.includes(event.event_type)) continue;
      if (!recorded.has(`${role.group} ${event.event_id}`))
        violations.push({
          invariant: "nothing lost",
          detail: `${role.group} never recorded ${event.event_type} ${event.event_id}`,
        });
    }
  }
  return violations;
}

/** After the redrive, the dead-letter queues hold the planted poison messages and nothing else. */
function onlyPoisonDeadLettered(world: World): Violation[] {
  return [...world.queues.values()].flatMap((queue) =>
    queue.deadLetters
      .filter((m) => m.messageGroup !== "poison")
      .map((m) => ({
        invariant: "only poison dead-lettered",
        detail: `${queue.group}: ${m.body.slice(0, 120)}`,
      })),
  );
}

/** Every workflow run that was asked for has ended (completed, partial or failed). */
function runsEnded(world: World): Violation[] {
  const ended = new Set(
    world.memory.log.filter((e) => END_TYPES.has(e.event_type)).map((e) => e.aggregate.id),
  );
  return world.external
    .filter((e) => e.event_type === "workflow.start.requested")
    .map((e) => (e.payload as { run_id: string }).run_id)
    .filter((run) => !ended.has(run))
    .map((run) => ({ invariant: "runs end", detail: `run ${run} did not end` }));
}

/** Every task view equals the fold of its task's stream and its feedback, in order. */
function projectionsFold(world: World): Violation[] {
  const violations: Violation[] = [];
  const context = {
    now: world.clock.now(),
    receiveCount: 1,
    repaired: false,
  } as DecideContext<TaskView>;
  for (const [key, stream] of world.memory.streams) {
    if (!key.startsWith("task#")) continue;
    const taskId = key.slice("task#".length);
    let view: TaskView | undefined;
    const events = [...stream.values()].sort((a, b) => a.aggregate.version - b.aggregate.version);
    const feedback = world.external.filter(
      (e) => e.event_type === "task.feedback.received" && e.aggregate.id === taskId,
    );
    for (const event of [...events, ...feedback]) {
      const decision = taskProjection.decide(view, event, { ...context, stored: undefined });
      view = (decision as { state?: TaskView }).state ?? view;
    }
    const stored = world.memory.states.get(`task_view#${taskId}`)?.data;
    if (JSON.stringify(stored) !== JSON.stringify(view))
      violations.push({
        invariant: "projection = fold",
        detail: `task_view#${taskId}: ${JSON.stringify(stored)} vs ${JSON.stringify(view)}`,
      });
  }
  return violations;
}
