import { type Envelope, registry } from "../../schemas";
import { LIFECYCLE } from "../local/scenario";
import type { PlantedStoreBug } from "./faulty-store";
import { checkInvariants, type Violation } from "./invariants";
import { Random } from "./random";
import { type FaultPlan, World } from "./world";

/**
 * One simulated schedule: a seed gives the workload (tasks with client feedback, content
 * workflows, one poison message), the fault plan and every choice of the scheduler; playing the
 * same seed again plays the same schedule.
 */
export interface ScheduleResult {
  readonly seed: number;
  readonly faults: FaultPlan;
  readonly violations: readonly Violation[];
  /** What the scheduler did and the store injected, by kind. */
  readonly counts: Readonly<Record<string, number>>;
}

/** A fault plan drawn from the seed: each fault is off, light or heavy. */
export function faultPlanOf(random: Random): FaultPlan {
  const rate = () => random.pick([0, 0.02, 0.1]);
  return {
    loadFails: rate(),
    commitFailsBefore: rate(),
    commitFailsAfter: rate(),
    republish: random.pick([0, 0.2, 0.5]),
    crashAfterCommit: rate(),
    stall: rate(),
  };
}

export async function playSchedule(
  seed: number,
  options: { readonly bug?: PlantedStoreBug; readonly faults?: FaultPlan } = {},
): Promise<ScheduleResult> {
  const faults = options.faults ?? faultPlanOf(new Random(seed ^ 0x5eed));
  const world = new World({ seed, faults, bug: options.bug });
  const tasks = 1 + world.random.below(3);
  for (let i = 0; i < tasks; i++) {
    const taskId = `task_${world.deps.ids.next()}`;
    await world.produceTask(taskId, LIFECYCLE.slice(0, 1 + world.random.below(LIFECYCLE.length)));
    world.publishExternal(
      external(
        world,
        "task.feedback.received",
        { type: "task", id: taskId },
        {
          rating: 1 + world.random.below(5),
        },
      ),
    );
  }
  const runs = 1 + world.random.below(2);
  for (let i = 0; i < runs; i++) {
    const runId = `run_${world.deps.ids.next()}`;
    const hint = world.random.chance(0.3) ? "[fail-fact-check] energy storage" : "energy storage";
    world.publishExternal(
      external(
        world,
        "workflow.start.requested",
        { type: "dag_run", id: runId },
        {
          run_id: runId,
          workflow: world.random.pick(["quick-news", "long-form"]),
          request: { topic_hint: hint },
        },
      ),
    );
  }
  world.publishExternal(JSON.stringify({ event_id: "555-0100", payload: "not an envelope" }));
  await world.run();
  const counts: Record<string, number> = { ...world.counts };
  for (const [kind, n] of Object.entries(world.store.injected)) counts[kind] = n;
  return { seed, faults, violations: checkInvariants(world), counts };
}

/** An unsequenced message from outside the store (a client, the CLI), with the world's ids. */
function external(
  world: World,
  type: string,
  aggregate: { type: string; id: string },
  payload: Record<string, unknown>,
): Envelope {
  const parsed = registry.parse({
    event_id: world.deps.ids.next(),
    event_type: type,
    schema_version: 1,
    occurred_at: world.clock.now().toISOString(),
    correlation_id: `corr_${world.deps.ids.next()}`,
    causation_id: null,
    task_id: aggregate.type === "task" ? aggregate.id : `task_${world.deps.ids.next()}`,
    aggregate: { ...aggregate, version: 0 },
    producer: "sim-client",
    payload,
  });
  if (!parsed.ok) throw new Error(`the simulation built an invalid ${type}: ${parsed.message}`);
  return parsed.envelope;
}
