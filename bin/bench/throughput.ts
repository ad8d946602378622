import type { InMemoryEventStore } from "../../functions/core/memory";
import { consume, type DecideContext } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import { type TaskView, taskProjection } from "../../functions/roles/task-projection";
import { type Envelope, registry } from "../../schemas";
import {
  fmt,
  fmtInt,
  fmtMiB,
  fmtPct,
  heapUsed,
  type Pass,
  renderTable,
  type Summary,
  sampleThroughput,
  summarize,
} from "./stats";
import {
  BENCH_START,
  buildThroughputWorkload,
  correctViews,
  LIFECYCLE,
  memoryDeps,
  storeWithStreams,
  type ThroughputWorkload,
} from "./workload";

export interface ThroughputOptions {
  readonly tasks: number;
  readonly duplicateFraction: number;
  readonly samples: number;
  /** Minimum timed work per sample. */
  readonly minSampleMs: number;
  readonly seed: number;
}

export const DEFAULT_THROUGHPUT: ThroughputOptions = {
  tasks: 2_000,
  duplicateFraction: 0.2,
  samples: 5,
  minSampleMs: 250,
  seed: 20_260_901,
};

type Delivery = "in order" | "shuffled, 20% dup";
type RunnerName = "bare: decide + Map.set" | "bare + envelope validation" | "AgentBus consume";

interface Outcome {
  /** Task view of each task id after the pass. */
  readonly viewOf: (taskId: string) => TaskView | undefined;
  /** Deliveries the runner threw on (bare runners) or counted per status (AgentBus). */
  readonly notes: Record<string, number>;
}

interface Runner {
  readonly delivery: Delivery;
  readonly name: RunnerName;
  readonly events: readonly unknown[];
  readonly pass: Pass<{ run: () => Promise<void>; outcome: () => Outcome }>;
}

export interface ThroughputResult {
  readonly rows: readonly {
    delivery: Delivery;
    name: RunnerName;
    summary: Summary;
  }[];
  readonly correctness: readonly { delivery: Delivery; name: RunnerName; correct: number }[];
  readonly tasks: number;
}

const viewKey = (taskId: string) => `task_view#${taskId}`;

/**
 * The baseline: the same decision and a plain state write, with no dedup, no version gate and no
 * atomic commit. A decision that throws (out-of-order input) is counted and skipped, which is what
 * such a consumer does at best (in production it would retry the message, then dead-letter it).
 */
function bareRunner(
  delivery: Delivery,
  events: readonly unknown[],
  validate: boolean,
): Runner["pass"] {
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
function agentBusRunner(source: InMemoryEventStore, events: readonly unknown[]): Runner["pass"] {
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

function runners(workload: ThroughputWorkload): Runner[] {
  const list: Runner[] = [];
  for (const [delivery, events] of [
    ["in order", workload.inOrder],
    ["shuffled, 20% dup", workload.messy],
  ] as const) {
    list.push(
      {
        delivery,
        name: "bare: decide + Map.set",
        events,
        pass: bareRunner(delivery, events, false),
      },
      {
        delivery,
        name: "bare + envelope validation",
        events,
        pass: bareRunner(delivery, events, true),
      },
      {
        delivery,
        name: "AgentBus consume",
        events,
        pass: agentBusRunner(workload.source, events),
      },
    );
  }
  return list;
}

type Out = (line?: string) => void;
type Correctness = ThroughputResult["correctness"][number];
type Row = ThroughputResult["rows"][number];

export async function runThroughputSection(
  out: Out,
  options: ThroughputOptions = DEFAULT_THROUGHPUT,
): Promise<ThroughputResult> {
  const workload = await buildThroughputWorkload(options);
  describeWorkload(out, workload, options);
  const list = runners(workload);
  const heapBefore = heapUsed();
  const checked = await checkedPasses(list, workload, options, heapBefore);
  const samples = await sampled(list, checked.warm, options);
  const heapAfter = heapUsed();
  const rows: Row[] = list.map((runner) => ({
    delivery: runner.delivery,
    name: runner.name,
    summary: summarize(samples.get(runner) ?? []),
  }));
  for (const line of throughputTable(rows)) out(line);
  out();
  describeCorrectness(out, list, checked, options.tasks);
  const perEvent = (checked.heapWithStore - heapBefore) / workload.inOrder.length;
  out(
    `heap used (after forced GC): ${fmtMiB(heapBefore)} before the runs; ${fmtMiB(checked.heapWithStore)} while one in-order AgentBus store is alive (≈ ${fmtInt(perEvent)} B per consumed event: inbox rows, checkpoints, views); ${fmtMiB(heapAfter)} after all samples`,
  );
  return { rows, correctness: checked.correctness, tasks: options.tasks };
}

function describeWorkload(out: Out, workload: ThroughputWorkload, options: ThroughputOptions) {
  const lifecycleEvents = options.tasks * LIFECYCLE.length;
  out(
    `workload: ${fmtInt(options.tasks)} tasks × ${LIFECYCLE.length} lifecycle events + ${fmtInt(options.tasks)} feedback messages = ${fmtInt(workload.inOrder.length)} events (${fmtInt(lifecycleEvents)} sequenced, ${fmtInt(options.tasks)} unsequenced)`,
  );
  out(
    `          "shuffled, 20% dup": the same events plus ${fmtInt(workload.duplicates)} redelivered copies, globally shuffled = ${fmtInt(workload.messy.length)} deliveries`,
  );
  out(
    `method:   per runner 1 untimed pass (correctness check, and warm-up; runners faster than one sample get a warm-up sample too), then ${options.samples} samples, runners interleaved; a sample repeats whole passes until ≥ ${options.minSampleMs} ms of timed work (fresh state per pass, forced GC before each sample)`,
  );
  out();
}

interface Checked {
  readonly correctness: Correctness[];
  readonly notes: Map<Runner, Record<string, number>>;
  /** Heap used while the in-order AgentBus store of the untimed pass is alive. */
  readonly heapWithStore: number;
  /** Runners whose untimed pass was long enough to count as their warm-up. */
  readonly warm: Set<Runner>;
}

/**
 * One untimed pass of each runner, checked: the benchmark measures runners that do the job, and
 * refuses to time AgentBus when its task views come out wrong.
 */
async function checkedPasses(
  list: readonly Runner[],
  workload: ThroughputWorkload,
  options: ThroughputOptions,
  heapBefore: number,
): Promise<Checked> {
  const correctness: Correctness[] = [];
  const notes = new Map<Runner, Record<string, number>>();
  let heapWithStore = heapBefore;
  const warm = new Set<Runner>();
  for (const runner of list) {
    const prepared = runner.pass.prepare();
    const start = performance.now();
    await prepared.run();
    // A pass at least as long as a sample is warm-up enough; faster runners get a warm-up sample.
    if (performance.now() - start >= options.minSampleMs) warm.add(runner);
    const outcome = prepared.outcome();
    if (runner.name === "AgentBus consume" && runner.delivery === "in order") {
      heapWithStore = heapUsed();
    }
    correctness.push({
      delivery: runner.delivery,
      name: runner.name,
      correct: correctViews(workload, outcome.viewOf),
    });
    notes.set(runner, outcome.notes);
  }
  const wrong = correctness.filter(
    (c) => c.name === "AgentBus consume" && c.correct !== options.tasks,
  );
  if (wrong.length > 0) {
    throw new Error(
      `AgentBus produced wrong task views (${wrong.map((w) => `${w.delivery}: ${w.correct}/${options.tasks} correct`).join("; ")}): the benchmark refuses to time a broken pipeline`,
    );
  }
  return { correctness, notes, heapWithStore, warm };
}

/** Each runner's samples, the runners interleaved, after a warm-up sample for those that need one. */
async function sampled(
  list: readonly Runner[],
  warm: ReadonlySet<Runner>,
  options: ThroughputOptions,
): Promise<Map<Runner, number[]>> {
  for (const runner of list) {
    if (!warm.has(runner)) await sampleThroughput(runner.pass, options.minSampleMs);
  }
  const samples = new Map<Runner, number[]>(list.map((r) => [r, []]));
  for (let i = 0; i < options.samples; i++) {
    for (const runner of list) {
      samples.get(runner)?.push(await sampleThroughput(runner.pass, options.minSampleMs));
    }
  }
  return samples;
}

function throughputTable(rows: readonly Row[]): string[] {
  const bareOf = (delivery: Delivery) =>
    rows.find((r) => r.delivery === delivery && r.name === "bare: decide + Map.set")?.summary;
  return renderTable(
    ["delivery", "runner", "median ev/s", "min – max ev/s", "spread", "µs/event", "vs bare"],
    rows.map((row) => {
      const bare = bareOf(row.delivery);
      const ratio =
        bare && row.name !== "bare: decide + Map.set"
          ? `${fmt(row.summary.median / bare.median, 4)}× (${fmt(bare.median / row.summary.median, 1)}× slower)`
          : "1×";
      return [
        row.delivery,
        row.name,
        fmtInt(row.summary.median),
        `${fmtInt(row.summary.min)} – ${fmtInt(row.summary.max)}`,
        fmtPct(row.summary.spread),
        fmt(1e6 / row.summary.median, 2),
        ratio,
      ];
    }),
    ["l", "l", "r", "r", "r", "r", "l"],
  );
}

function describeCorrectness(
  out: Out,
  list: readonly Runner[],
  checked: Checked,
  tasks: number,
): void {
  out("correct task views after one pass (status delivered, versions 1-4 once, feedback once):");
  for (const runner of list) {
    const c = checked.correctness.find(
      (x) => x.delivery === runner.delivery && x.name === runner.name,
    );
    const detail = Object.entries(checked.notes.get(runner) ?? {})
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${fmtInt(n)}`)
      .join(", ");
    out(
      `  ${runner.delivery.padEnd(17)}  ${runner.name.padEnd(26)}  ${fmtInt(c?.correct ?? 0).padStart(5)}/${fmtInt(tasks)}${detail ? `  (${detail})` : ""}`,
    );
  }
  out(
    "  (on shuffled delivery the bare runners spend much of their time throwing and catching out-of-order decisions, and still end wrong: their speed there is no target, only a reference)",
  );
  out();
}
