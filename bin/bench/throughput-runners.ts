import type { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import type { DecideContext } from "../../functions/core/role";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { type Envelope, registry } from "../../schemas";
import type { Pass } from "./stats";
import { BENCH_START, memoryDeps, storeWithStreams, type ThroughputWorkload } from "./workload";

/**
 * The runners section 1 times: the same task-projection decision behind a bare consumer (with
 * and without envelope validation) and behind AgentBus's pipeline, on in-order and on messy
 * delivery. Each runs in a process of its own (./throughput-child.ts).
 */

export type Delivery = "in order" | "shuffled, 20% dup";
export type RunnerName =
  | "bare: decide + Map.set"
  | "bare + envelope validation"
  | "AgentBus consume";

export interface RunnerSpec {
  readonly delivery: Delivery;
  readonly name: RunnerName;
}

export const DELIVERIES: readonly Delivery[] = ["in order", "shuffled, 20% dup"];
export const RUNNER_NAMES: readonly RunnerName[] = [
  "bare: decide + Map.set",
  "bare + envelope validation",
  "AgentBus consume",
];

export interface Outcome {
  /** Task view of each task id after the pass. */
  readonly viewOf: (taskId: string) => TaskView | undefined;
  /** Deliveries the runner threw on (bare runners) or counted per status (AgentBus). */
  readonly notes: Record<string, number>;
}

export type RunnerPass = Pass<{ run: () => Promise<void>; outcome: () => Outcome }>;

const viewKey = (taskId: string) => `task_view#${taskId}`;

function eventsOf(workload: ThroughputWorkload, delivery: Delivery): readonly unknown[] {
  return delivery === "in order" ? workload.inOrder : workload.messy;
}

export function runnerPass(spec: RunnerSpec, workload: ThroughputWorkload): RunnerPass {
  const events = eventsOf(workload, spec.delivery);
  return spec.name === "AgentBus consume"
    ? agentBusRunner(workload.source, events)
    : bareRunner(spec.delivery, events, spec.name === "bare + envelope validation");
}

/**
 * The baseline: the same decision and a plain state write, with no dedup, no version gate and no
 * atomic commit. A decision that throws (out-of-order input) is counted and skipped, which is what
 * such a consumer does at best (in production it would retry the message, then dead-letter it).
 */
function bareRunner(delivery: Delivery, events: readonly unknown[], validate: boolean): RunnerPass {
  return {
    prepare: () => {
      const states = new Map<string, TaskView>();
      const notes: Record<string, number> = { "decision threw": 0 };
      const context: DecideContext<TaskView> = {
        now: new Date(BENCH_START),
        receiveCount: 1,
        stored: undefined,
        repaired: false,
      };
      const run = async () => {
        for (const raw of events) {
          let event: Envelope;
          if (validate) {
            const parsed = registry.parse(raw);
            if (!parsed.ok) throw new Error(`${delivery}: invalid envelope ${parsed.message}`);
            event = parsed.envelope;
          } else {
            event = raw as Envelope;
          }
          const key = viewKey(event.aggregate.id);
          try {
            const decision = await taskProjection.decide(states.get(key), event, context);
            if (decision.state !== undefined) states.set(key, decision.state);
          } catch {
            notes["decision threw"] = (notes["decision threw"] ?? 0) + 1;
          }
        }
      };
      return { run, outcome: () => ({ viewOf: (id) => states.get(viewKey(id)), notes }) };
    },
    run: async (prepared) => {
      await prepared.run();
      return events.length;
    },
  };
}

/** AgentBus: validation, dedup/gate/gap repair, decision and atomic commit on the in-memory store. */
function agentBusRunner(source: InMemoryEventStore, events: readonly unknown[]): RunnerPass {
  return {
    prepare: () => {
      const store = storeWithStreams(source);
      const { deps } = memoryDeps(store);
      const notes: Record<string, number> = {};
      const run = async () => {
        for (const raw of events) {
          const result = await consume(raw, taskProjection, deps as ConsumerDeps);
          notes[result.status] = (notes[result.status] ?? 0) + 1;
          // Counted in a loop: this bookkeeping is timed with the pipeline, and should cost nothing.
          let repaired = 0;
          for (const step of result.steps) if (step.repaired) repaired++;
          if (repaired > 0) notes["gap-repaired"] = (notes["gap-repaired"] ?? 0) + repaired;
        }
      };
      const viewOf = (id: string) => store.states.get(viewKey(id))?.data as TaskView | undefined;
      return { run, outcome: () => ({ viewOf, notes }) };
    },
    run: async (prepared) => {
      await prepared.run();
      return events.length;
    },
  };
}
