import type { Mutable } from "../../core/commit";
import { defineRole, type EventOf } from "../../core/define-role";
import { PermanentError } from "../../core/errors";
import type { StateSummary } from "../../core/ports";

export type TaskStatus = "accepted" | "planned" | "generated" | "delivered";

/** The read model of one task: where it stands and every event that shaped it, in order. */
export interface TaskView {
  readonly task_id: string;
  readonly status: TaskStatus;
  readonly title?: string;
  readonly plan_steps?: number;
  /** The plan's step titles, in order. */
  readonly plan?: readonly string[];
  readonly answer_ref?: string;
  readonly channel?: string;
  /** Last applied version of the task's stream. */
  readonly version: number;
  readonly history: readonly {
    readonly event_id: string;
    readonly event_type: string;
    readonly version: number;
  }[];
  readonly feedback: { readonly count: number; readonly rating_total: number };
  /** The tenant whose task it is: its first event's (absent: the default tenant). */
  readonly tenant_id?: string;
}

/** The status each sequenced event moves the task to, and the status it requires before. */
const LIFECYCLE = {
  "task.accepted": { from: undefined, to: "accepted" },
  "plan.created": { from: "accepted", to: "planned" },
  "answer.generated": { from: "planned", to: "generated" },
  "notification.sent": { from: "generated", to: "delivered" },
} as const satisfies Record<string, { from: TaskStatus | undefined; to: TaskStatus }>;

/** The task's stream events the view folds, in version order. */
type LifecycleType = keyof typeof LIFECYCLE;

/**
 * The task projection of seed 000 §6.3: folds a task's stream into a view, in version order.
 * The pipeline guarantees order and exactly-once effect; the check below turns a broken
 * guarantee into a loud error instead of a silently wrong view.
 */
export const taskProjection = defineRole<TaskView, LifecycleType | "task.feedback.received">({
  group: "task-projection",
  summarize: summarizeTask,
  subscriptions: [...(Object.keys(LIFECYCLE) as LifecycleType[]), "task.feedback.received"],
  stateOf: (event) => ({ type: "task_view", id: event.aggregate.id }),
  // The view's checkpoint of its task stream records what it applied (lib/operator/self-recorded).
  decide(view, event) {
    if (event.event_type === "task.feedback.received") {
      const { rating } = event.payload;
      const base = view ?? emptyView(event);
      return {
        state: {
          ...base,
          feedback: {
            count: base.feedback.count + 1,
            rating_total: base.feedback.rating_total + rating,
          },
        },
      };
    }
    const step = LIFECYCLE[event.event_type];
    if (!step)
      throw new PermanentError(
        "projection.unhandled",
        `task-projection cannot fold ${event.event_type}`,
      );
    const version = view?.version ?? 0;
    if (
      event.aggregate.version !== version + 1 ||
      (view?.history.length ? view.status : undefined) !== step.from
    ) {
      throw new PermanentError(
        "projection.out_of_order",
        `${event.event_type} v${event.aggregate.version} cannot follow ${view?.status ?? "nothing"} v${version}`,
      );
    }
    const base = view ?? emptyView(event);
    const next: Mutable<TaskView> = {
      ...base,
      status: step.to,
      version: event.aggregate.version,
      history: [
        ...base.history,
        {
          event_id: event.event_id,
          event_type: event.event_type,
          version: event.aggregate.version,
        },
      ],
    };
    setFields(next, event);
    return { state: next };
  },
});

function emptyView(first: { aggregate: { id: string }; tenant_id?: string }): TaskView {
  return {
    task_id: first.aggregate.id,
    status: "accepted",
    version: 0,
    history: [],
    feedback: { count: 0, rating_total: 0 },
    ...(first.tenant_id === undefined ? {} : { tenant_id: first.tenant_id }),
  };
}

/** What the event tells of the task, set on the next view (made for this event: not shared). */
function setFields(next: Mutable<TaskView>, event: EventOf<LifecycleType>): void {
  switch (event.event_type) {
    case "task.accepted":
      next.title = event.payload.title;
      return;
    case "plan.created": {
      const { steps } = event.payload;
      next.plan_steps = steps.length;
      next.plan = steps.map((step) => step.title);
      return;
    }
    case "answer.generated":
      next.answer_ref = event.payload.answer_ref;
      return;
    case "notification.sent":
      next.channel = event.payload.channel;
      return;
  }
}

/** A task, by its status. */
export function summarizeTask(view: TaskView): StateSummary {
  // Set field by field rather than spread from conditional literals: this runs on every write.
  const summary: Mutable<StateSummary> = { kind: "task", status: view.status };
  if (view.title) summary.label = view.title.slice(0, 80);
  if (view.tenant_id !== undefined) summary.tenant = view.tenant_id;
  return summary;
}
