import { PermanentError } from "../../../functions/core/errors";
import type { Role } from "../../../functions/core/role";
import { traceIdOf } from "../../../functions/core/trace-context";
import { consumerEntry } from "../../../functions/handlers/consumer";

export const BUGGY_GROUP = "buggy-projection";
export const BUGGY_VIEW = "buggy_view";

/** The versions the projection fails on for good (a bug), set by the test; none by default. */
export const bug: { failOn: Set<number> } = ((globalThis as Record<string, unknown>)
  .__agentbusBuggyProjection as { failOn: Set<number> } | undefined) ?? { failOn: new Set() };
(globalThis as Record<string, unknown>).__agentbusBuggyProjection = bug;

/** What the projection applied: each version, and the trace id of the message that carried it. */
export interface BuggyView {
  readonly applied: readonly number[];
  readonly traceIds: readonly string[];
}

/**
 * A projection of task streams that records each version it applies (with its message's trace
 * id), with a bug a test can switch on: it fails permanently on the versions in `bug.failOn` (the
 * real case of a dead-letter redrive).
 */
export const buggyProjection: Role<BuggyView> = {
  group: BUGGY_GROUP,
  subscriptions: ["task.accepted", "plan.created", "answer.generated", "notification.sent"],
  // Its own view of the task: the task's stream state belongs to the producer that appends to it.
  stateOf: (event) => ({ type: BUGGY_VIEW, id: event.aggregate.id }),
  decide(state, event) {
    const version = event.aggregate.version;
    if (bug.failOn.has(version))
      throw new PermanentError("projection.bug", `cannot project version ${version} (a bug)`);
    return {
      state: {
        applied: [...(state?.applied ?? []), version],
        traceIds: [...(state?.traceIds ?? []), traceIdOf(event)],
      },
    };
  },
};

export const { create, handler } = consumerEntry(buggyProjection);
