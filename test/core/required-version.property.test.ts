import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AgentBusError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import type { Envelope } from "../../schemas";
import { feedback, LIFECYCLE, makeDeps, newCorrelationId, newTaskId } from "./fixtures";

/**
 * A message that waits for another aggregate's state (`required_version`) is applied after the
 * write that brings that state to the version, whatever the interleaving of that aggregate's
 * writes and the message's deliveries and redeliveries: held before, applied once after. The
 * negative control, the same message without the requirement, is applied too early in some
 * interleaving.
 */

const scenarioArb = fc.record({
  steps: fc.integer({ min: 1, max: LIFECYCLE.length }),
  required: fc.integer({ min: 1, max: LIFECYCLE.length }),
  // true: the producer writes the prerequisite's next step; false: the message is delivered.
  schedule: fc.array(fc.boolean(), { maxLength: 12 }),
});

type Scenario = { steps: number; required: number; schedule: boolean[] };

/** The producer's next lifecycle step of task `taskId`, committed as a state change. */
async function writeStep(deps: ConsumerDeps, taskId: string, correlationId: string, n: number) {
  const step = LIFECYCLE[n];
  if (!step) throw new Error(`no lifecycle step ${n}`);
  await appendToStream(deps, {
    aggregate: { type: "task", id: taskId },
    producer: "task-api",
    correlationId,
    taskId,
    decide: () => ({ state: { status: step.type }, emit: [step] }),
  });
}

/**
 * Plays the schedule, then writes what remains and delivers the message until it is applied.
 * Returns the prerequisite's stored version when the message was applied, and the view.
 */
async function play(scenario: Scenario, withRequirement: boolean) {
  const { deps, store } = makeDeps();
  const steps = Math.max(scenario.steps, scenario.required);
  const prerequisite = newTaskId();
  const correlationId = newCorrelationId();
  const onTask = newTaskId();
  const message: Envelope = feedback(onTask, 4, {
    ...(withRequirement
      ? { required_version: { type: "task", id: prerequisite, version: scenario.required } }
      : {}),
  });
  let written = 0;
  let appliedAt: number | undefined;
  const deliver = async () => {
    try {
      const result = await consume(message, taskProjection, deps);
      if (result.status === "applied") {
        expect(appliedAt).toBeUndefined();
        appliedAt = store.states.get(`task#${prerequisite}`)?.version ?? 0;
      } else expect(result.status).toBe("duplicate");
    } catch (error) {
      if (!(error instanceof AgentBusError) || error.code !== "ordering.required_version_pending")
        throw error;
    }
  };
  for (const write of scenario.schedule) {
    if (write && written < steps) await writeStep(deps, prerequisite, correlationId, written++);
    else await deliver();
  }
  while (written < steps) await writeStep(deps, prerequisite, correlationId, written++);
  await deliver();
  await deliver();
  const view = store.states.get(`task_view#${onTask}`)?.data as TaskView | undefined;
  return { appliedAt, view };
}

describe("required_version: a message waits for its prerequisite in every interleaving", () => {
  it("is applied once, after the write that brings the state to the version", async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => {
        const { appliedAt, view } = await play(scenario, true);
        expect(appliedAt).toBeGreaterThanOrEqual(scenario.required);
        expect(view?.feedback).toEqual({ count: 1, rating_total: 4 });
      }),
      { numRuns: 100 },
    );
  });

  it("negative control: without the requirement some interleaving applies it too early", async () => {
    const details = await fc.check(
      fc.asyncProperty(scenarioArb, async (scenario) => {
        const { appliedAt } = await play(scenario, false);
        expect(appliedAt).toBeGreaterThanOrEqual(scenario.required);
      }),
      { numRuns: 100 },
    );
    expect(details.failed).toBe(true);
  });
});
