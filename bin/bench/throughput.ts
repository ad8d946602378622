import { type ChildProcess, fork } from "node:child_process";
import { fmt, fmtInt, fmtMiB, fmtPct, renderTable, type Summary, summarize } from "./stats";
import type { ChildOptions, FromChild, ToChild } from "./throughput-child";
import {
  DELIVERIES,
  type Delivery,
  RUNNER_NAMES,
  type RunnerName,
  type RunnerSpec,
} from "./throughput-runners";
import { LIFECYCLE } from "./workload";

export interface ThroughputOptions extends ChildOptions {
  readonly samples: number;
  /** Minimum timed work per sample. */
  readonly minSampleMs: number;
}

export const DEFAULT_THROUGHPUT: ThroughputOptions = {
  tasks: 2_000,
  duplicateFraction: 0.2,
  samples: 5,
  minSampleMs: 250,
  seed: 20_260_901,
};

export interface ThroughputResult {
  readonly rows: readonly {
    delivery: Delivery;
    name: RunnerName;
    summary: Summary;
  }[];
  readonly correctness: readonly { delivery: Delivery; name: RunnerName; correct: number }[];
  readonly tasks: number;
}

type Out = (line?: string) => void;
type Row = ThroughputResult["rows"][number];
type Checked = Extract<FromChild, { type: "checked" }>;
type Ready = Extract<FromChild, { type: "ready" }>;

/**
 * One runner's process (./throughput-child.ts), forked with this process's flags (tsx's loader)
 * and asked one thing at a time.
 */
class RunnerProcess {
  private readonly child: ChildProcess;
  private waiting?: { resolve: (m: FromChild) => void; reject: (e: Error) => void };
  private ended?: Error;

  constructor(readonly spec: RunnerSpec) {
    this.child = fork(new URL("./throughput-child.ts", import.meta.url), [], {
      execArgv: process.execArgv,
    });
    this.child.on("message", (message: FromChild) => {
      const waiting = this.waiting;
      this.waiting = undefined;
      if (message.type === "error")
        waiting?.reject(new Error(`${this.label()}: ${message.message}`));
      else waiting?.resolve(message);
    });
    this.child.on("exit", (code, signal) => {
      this.ended = new Error(`${this.label()}: its process ended (${signal ?? `exit ${code}`})`);
      this.waiting?.reject(this.ended);
      this.waiting = undefined;
    });
  }

  label(): string {
    return `${this.spec.delivery} / ${this.spec.name}`;
  }

  ask<T extends FromChild["type"]>(
    message: ToChild,
    expected: T,
  ): Promise<Extract<FromChild, { type: T }>> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<FromChild>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.child.send(message);
    }).then((reply) => {
      if (reply.type !== expected)
        throw new Error(`${this.label()}: answered ${reply.type} to ${message.type}`);
      return reply as Extract<FromChild, { type: T }>;
    });
  }

  /** Ends the process if it is still running (after an error elsewhere). */
  kill(): void {
    if (!this.ended) this.child.kill();
  }
}

export async function runThroughputSection(
  out: Out,
  options: ThroughputOptions = DEFAULT_THROUGHPUT,
): Promise<ThroughputResult> {
  const runners = DELIVERIES.flatMap((delivery) =>
    RUNNER_NAMES.map((name) => new RunnerProcess({ delivery, name })),
  );
  try {
    const { tasks, duplicateFraction, seed } = options;
    const ready = await Promise.all(
      runners.map((r) =>
        r.ask(
          { type: "start", spec: r.spec, options: { tasks, duplicateFraction, seed } },
          "ready",
        ),
      ),
    );
    describeWorkload(out, ready[0] as Ready, options);
    const checked = await checkedPasses(runners, options);
    const samples = await sampled(runners, checked, options);
    const stopped = await Promise.all(runners.map((r) => r.ask({ type: "stop" }, "stopped")));
    const rows: Row[] = runners.map((runner) => ({
      ...runner.spec,
      summary: summarize(samples.get(runner) ?? []),
    }));
    for (const line of throughputTable(rows)) out(line);
    out();
    describeCorrectness(out, runners, checked, options.tasks);
    describeHeap(out, runners, checked, stopped, ready[0] as Ready);
    const correctness = runners.map((r) => ({ ...r.spec, correct: checked.get(r)?.correct ?? 0 }));
    return { rows, correctness, tasks: options.tasks };
  } finally {
    for (const runner of runners) runner.kill();
  }
}

function describeWorkload(out: Out, ready: Ready, options: ThroughputOptions) {
  const lifecycleEvents = options.tasks * LIFECYCLE.length;
  out(
    `workload: ${fmtInt(options.tasks)} tasks × ${LIFECYCLE.length} lifecycle events + ${fmtInt(options.tasks)} feedback messages = ${fmtInt(ready.events)} events (${fmtInt(lifecycleEvents)} sequenced, ${fmtInt(options.tasks)} unsequenced)`,
  );
  out(
    `          "shuffled, 20% dup": the same events plus ${fmtInt(ready.duplicates)} redelivered copies, globally shuffled = ${fmtInt(ready.deliveries)} deliveries`,
  );
  out(
    `method:   each runner in a process of its own, so that no runner's code is optimized for another's values (the same workload, built from the same seed in each); per runner 1 untimed pass (correctness check, and warm-up; runners faster than one sample get a warm-up sample too), then ${options.samples} samples, runners interleaved, one process working at a time; a sample repeats whole passes until ≥ ${options.minSampleMs} ms of timed work (fresh state per pass, forced GC before each sample)`,
  );
  out();
}

/**
 * One untimed pass of each runner, one process at a time, checked: the benchmark measures runners
 * that do the job, and refuses to time AgentBus when its task views come out wrong.
 */
async function checkedPasses(
  runners: readonly RunnerProcess[],
  options: ThroughputOptions,
): Promise<Map<RunnerProcess, Checked>> {
  const checked = new Map<RunnerProcess, Checked>();
  for (const runner of runners) {
    checked.set(
      runner,
      await runner.ask({ type: "check", minSampleMs: options.minSampleMs }, "checked"),
    );
  }
  const wrong = runners.filter(
    (r) => r.spec.name === "AgentBus consume" && checked.get(r)?.correct !== options.tasks,
  );
  if (wrong.length > 0) {
    throw new Error(
      `AgentBus produced wrong task views (${wrong.map((r) => `${r.spec.delivery}: ${checked.get(r)?.correct}/${options.tasks} correct`).join("; ")}): the benchmark refuses to time a broken pipeline`,
    );
  }
  return checked;
}

/** Each runner's samples, the runners interleaved, after a warm-up sample for those that need one. */
async function sampled(
  runners: readonly RunnerProcess[],
  checked: ReadonlyMap<RunnerProcess, Checked>,
  options: ThroughputOptions,
): Promise<Map<RunnerProcess, number[]>> {
  const sample = { type: "sample", minSampleMs: options.minSampleMs } as const;
  for (const runner of runners) {
    if (!checked.get(runner)?.warm) await runner.ask(sample, "sample");
  }
  const samples = new Map<RunnerProcess, number[]>(runners.map((r) => [r, []]));
  for (let i = 0; i < options.samples; i++) {
    for (const runner of runners) {
      samples.get(runner)?.push((await runner.ask(sample, "sample")).eventsPerSecond);
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
  runners: readonly RunnerProcess[],
  checked: ReadonlyMap<RunnerProcess, Checked>,
  tasks: number,
): void {
  out("correct task views after one pass (status delivered, versions 1-4 once, feedback once):");
  for (const runner of runners) {
    const c = checked.get(runner);
    const detail = Object.entries(c?.notes ?? {})
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${fmtInt(n)}`)
      .join(", ");
    out(
      `  ${runner.spec.delivery.padEnd(17)}  ${runner.spec.name.padEnd(26)}  ${fmtInt(c?.correct ?? 0).padStart(5)}/${fmtInt(tasks)}${detail ? `  (${detail})` : ""}`,
    );
  }
  out(
    "  (on shuffled delivery the bare runners spend much of their time throwing and catching out-of-order decisions, and still end wrong: their speed there is no target, only a reference)",
  );
  out();
}

/** The heap of the in-order AgentBus runner's process: its store per consumed event. */
function describeHeap(
  out: Out,
  runners: readonly RunnerProcess[],
  checked: ReadonlyMap<RunnerProcess, Checked>,
  stopped: readonly Extract<FromChild, { type: "stopped" }>[],
  ready: Ready,
): void {
  const index = runners.findIndex(
    (r) => r.spec.name === "AgentBus consume" && r.spec.delivery === "in order",
  );
  const heap = checked.get(runners[index] as RunnerProcess);
  const after = stopped[index]?.heapAfter;
  if (!heap || after === undefined) return;
  const perEvent = (heap.heapWithState - heap.heapBefore) / ready.events;
  out(
    `heap used in the in-order AgentBus process (after forced GC): ${fmtMiB(heap.heapBefore)} before its first pass; ${fmtMiB(heap.heapWithState)} while that pass's store is alive (≈ ${fmtInt(perEvent)} B per consumed event: inbox rows, checkpoints, views); ${fmtMiB(after)} after all samples`,
  );
}
