import { heapUsed, sampleThroughput } from "./stats";
import { type RunnerPass, type RunnerSpec, runnerPass } from "./throughput-runners";
import { buildThroughputWorkload, correctViews, type ThroughputWorkload } from "./workload";

/**
 * One runner of section 1 in a process of its own (forked by ./throughput.ts): V8 shapes its
 * optimized code by the values it has seen, and runners that share a process share that type
 * feedback (the task projection's decision, the registry), so each would be timed partly on the
 * others' values. Messages in, each answered by one message out:
 * - start {spec, options}: builds the workload (the same seed in every process) -> ready;
 * - check {minSampleMs}: one untimed pass, its task views checked -> checked;
 * - sample {minSampleMs}: one throughput sample -> sample;
 * - stop -> stopped, then the process ends.
 */

export interface ChildOptions {
  readonly tasks: number;
  readonly duplicateFraction: number;
  readonly seed: number;
}

export type ToChild =
  | { readonly type: "start"; readonly spec: RunnerSpec; readonly options: ChildOptions }
  | { readonly type: "check"; readonly minSampleMs: number }
  | { readonly type: "sample"; readonly minSampleMs: number }
  | { readonly type: "stop" };

export type FromChild =
  | {
      readonly type: "ready";
      readonly events: number;
      readonly deliveries: number;
      readonly duplicates: number;
    }
  | {
      readonly type: "checked";
      readonly correct: number;
      readonly notes: Record<string, number>;
      /** The pass took at least a sample's time: warm-up enough. */
      readonly warm: boolean;
      /** Heap used (after a forced collection) before the pass, and with its state alive. */
      readonly heapBefore: number;
      readonly heapWithState: number;
    }
  | { readonly type: "sample"; readonly eventsPerSecond: number }
  | { readonly type: "stopped"; readonly heapAfter: number }
  | { readonly type: "error"; readonly message: string };

let workload: ThroughputWorkload | undefined;
let pass: RunnerPass | undefined;

async function answer(message: ToChild): Promise<FromChild> {
  switch (message.type) {
    case "start": {
      workload = await buildThroughputWorkload(message.options);
      pass = runnerPass(message.spec, workload);
      return {
        type: "ready",
        events: workload.inOrder.length,
        deliveries: workload.messy.length,
        duplicates: workload.duplicates,
      };
    }
    case "check":
      return check(message.minSampleMs);
    case "sample":
      return {
        type: "sample",
        eventsPerSecond: await sampleThroughput(started().pass, message.minSampleMs),
      };
    case "stop":
      return { type: "stopped", heapAfter: heapUsed() };
  }
}

function started(): { workload: ThroughputWorkload; pass: RunnerPass } {
  if (!workload || !pass) throw new Error("throughput child: asked to run before start");
  return { workload, pass };
}

async function check(minSampleMs: number): Promise<FromChild> {
  const { workload: built, pass: runner } = started();
  const heapBefore = heapUsed();
  const prepared = runner.prepare();
  const start = performance.now();
  await prepared.run();
  const warm = performance.now() - start >= minSampleMs;
  const outcome = prepared.outcome();
  const heapWithState = heapUsed();
  return {
    type: "checked",
    correct: correctViews(built, outcome.viewOf),
    notes: outcome.notes,
    warm,
    heapBefore,
    heapWithState,
  };
}

function send(message: FromChild): Promise<void> {
  return new Promise((resolve, reject) =>
    process.send?.(message, undefined, {}, (error) => (error ? reject(error) : resolve())),
  );
}

// The bench ended (or was stopped) without a stop message: nothing is left to answer.
process.on("disconnect", () => process.exit(0));

process.on("message", (message: ToChild) => {
  answer(message)
    .then(async (reply) => {
      await send(reply);
      if (reply.type === "stopped") process.exit(0);
    })
    .catch(async (error: unknown) => {
      await send({
        type: "error",
        message: error instanceof Error ? (error.stack ?? error.message) : String(error),
      });
      process.exit(1);
    });
});
