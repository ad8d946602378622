import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { DurableContext } from "@aws/durable-execution-sdk-js";
import type { FlowShape } from "../../lib/dev/metering/flow-cost";

/**
 * The reference flows as Lambda durable functions, written with AWS's SDK
 * (`@aws/durable-execution-sdk-js`) and run on its testing SDK's local runner
 * (`@aws/durable-execution-sdk-js-testing`, LocalDurableTestRunner, real timers): what the
 * execution recorded is counted, not assumed. Both are devDependencies, loaded when the cost
 * section runs; where they are not installed the bench says the durable figures are assumed.
 *
 * Each step returns a result of the size STEP_RESULT_BYTES gives it: the bytes a checkpoint holds
 * depend on them. Operations: every operation the execution recorded (steps, the contexts of
 * map, parallel and child contexts, chained invokes), with the operations of each chained
 * execution, plus one start per execution. Checkpoint bytes: every payload the history holds (the
 * execution's input and result, each step's and context's result, each invoke's result). Lambda
 * invocations are not counted: how many the local runner makes depends on whether a chained
 * execution ends before its parent suspends, a matter of timing.
 */

export interface DurableCount {
  readonly operations: number;
  readonly checkpointBytes: number;
  /** The SDK versions that counted. */
  readonly sdk: string;
}

/** What a step's result weighs in the checkpoint (a representative result of the step). */
const STEP_RESULT_BYTES: Readonly<Record<string, number>> = {
  route: 200,
  "look up order": 400,
  "generate reply": 800,
  "send reply": 120,
  "model: plan": 600,
  "get order": 400,
  "get refund status": 200,
  "issue refund": 200,
  "model: answer": 600,
  "select topic": 300,
  "fact check": 300,
  write: 4000,
  review: 400,
};

const resultOf = (step: string) => ({
  step,
  text: "x".repeat(STEP_RESULT_BYTES[step] ?? 200),
});

type Ctx = DurableContext;
type Input = {
  /** The flow's steps (FLOW_SHAPES): a sequential flow runs them one after the other. */
  readonly steps: readonly string[];
  readonly claims: number;
  readonly rounds: number;
  readonly childRuns: number;
};

/** Steps one after the other. */
async function inSequence(ctx: Ctx, steps: readonly string[]): Promise<unknown> {
  let last: unknown;
  for (const step of steps) last = await ctx.step(step, async () => resultOf(step));
  return last;
}

/** A support turn and a refund review: their steps one after the other. */
const sequential = async (input: Input, ctx: Ctx) => inSequence(ctx, input.steps);

/** A step per claim, in a map. */
const factCheck = async ({ claims }: Pick<Input, "claims">, ctx: Ctx) =>
  (
    await ctx.map(
      "fact check",
      Array.from({ length: claims }, (_, i) => i + 1),
      async (item, claim) =>
        item.step(`fact check claim ${claim}`, async () => resultOf("fact check")),
    )
  ).getResults();

/** Writing and review, once per round. */
async function rounds(ctx: Ctx, count: number): Promise<unknown> {
  let review: unknown;
  for (let round = 1; round <= count; round++) {
    await ctx.step(`write ${round}`, async () => resultOf("write"));
    review = await ctx.step(`review ${round}`, async () => resultOf("review"));
  }
  return review;
}

/** Quick news: the fact check beside the writing. */
const quickNews = async (input: Input, ctx: Ctx) => {
  await ctx.step("select topic", async () => resultOf("select topic"));
  return (
    await ctx.parallel("check and write", [
      async (branch: Ctx) => factCheck(input, branch),
      async (branch: Ctx) => rounds(branch, input.rounds),
    ])
  ).getResults();
};

const FACT_CHECK_FUNCTION = "fact-check";

/** Long form: the fact check (in a chained durable function when its run started one), then writing. */
const longForm = async (input: Input, ctx: Ctx) => {
  await ctx.step("select topic", async () => resultOf("select topic"));
  if (input.childRuns > 0)
    await ctx.invoke("fact check run", FACT_CHECK_FUNCTION, { claims: input.claims });
  else await factCheck(input, ctx);
  return rounds(ctx, input.rounds);
};

const FLOWS: Readonly<Record<string, (input: Input, ctx: Ctx) => Promise<unknown>>> = {
  "support turn": sequential,
  "refund review": sequential,
  "content run, quick news": quickNews,
  "content run, long form": longForm,
};

/** What a content run's shape says it did: claims and review rounds. */
function inputOf(shape: FlowShape): Input {
  const claims = shape.steps.filter((s) => s.startsWith("fact check claim")).length;
  const rounds = shape.steps.filter((s) => s === "review").length;
  return { steps: shape.steps, claims, rounds, childRuns: shape.childRuns };
}

type Testing = typeof import("@aws/durable-execution-sdk-js-testing");
type Sdk = typeof import("@aws/durable-execution-sdk-js");

/** The two SDKs, or undefined when they are not installed. */
async function loadSdks(): Promise<{ sdk: Sdk; testing: Testing; versions: string } | undefined> {
  try {
    const sdk = await import("@aws/durable-execution-sdk-js");
    const testing = await import("@aws/durable-execution-sdk-js-testing");
    const versions = `${SDK} ${versionOf(SDK)}, ${TESTING} ${versionOf(TESTING)}`;
    return { sdk, testing, versions };
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === "ERR_MODULE_NOT_FOUND" || code === "MODULE_NOT_FOUND") return undefined;
    throw error;
  }
}

const SDK = "@aws/durable-execution-sdk-js";
const TESTING = "@aws/durable-execution-sdk-js-testing";

/** An installed package's version, from its package.json (which its exports do not list). */
function versionOf(name: string): string {
  const main = createRequire(import.meta.url).resolve(name);
  const root = main.slice(0, main.lastIndexOf(name) + name.length);
  return (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string })
    .version;
}

/** The UTF-8 bytes of every `Payload` string in a history event. */
function payloadBytes(value: unknown): number {
  if (!value || typeof value !== "object") return 0;
  let bytes = 0;
  for (const [key, v] of Object.entries(value)) {
    if (key === "Payload" && typeof v === "string") bytes += Buffer.byteLength(v, "utf8");
    else bytes += payloadBytes(v);
  }
  return bytes;
}

interface Counted {
  operations: number;
  checkpointBytes: number;
}

/** One execution of `handler` on the local runner, counted (with `register`ed chained functions). */
async function countExecution(
  testing: Testing,
  handler: Parameters<Testing["LocalDurableTestRunner"]["prototype"]["registerDurableFunction"]>[1],
  payload: unknown,
  register: (runner: InstanceType<Testing["LocalDurableTestRunner"]>) => void = () => {},
): Promise<Counted> {
  const runner = new testing.LocalDurableTestRunner({ handlerFunction: handler });
  register(runner);
  const result = await runner.run({ payload });
  if (result.getStatus() !== "SUCCEEDED")
    throw new Error(
      `the durable function ended ${result.getStatus()}: ${result.getError().errorMessage}`,
    );
  return {
    operations: result.getOperations().length + 1,
    checkpointBytes: result.getHistoryEvents().reduce((n, e) => n + payloadBytes(e), 0),
  };
}

/**
 * Each flow's durable function run on the testing SDK's local runner, counted; undefined when
 * the SDKs are not installed (the bench then prices the assumed count). `shapes`: the flows as
 * played (a content run's claims, rounds and child runs).
 */
export async function countDurableFlows(
  shapes: readonly FlowShape[],
): Promise<Map<string, DurableCount> | undefined> {
  const loaded = await loadSdks();
  if (!loaded) return undefined;
  const { sdk, testing, versions } = loaded;
  const counts = new Map<string, DurableCount>();
  // Real timers: the flows have no waits, and skipping time installs fake timers process-wide,
  // which would stop the local stack's pollers running beside it.
  await testing.LocalDurableTestRunner.setupTestEnvironment({ skipTime: false });
  try {
    for (const shape of shapes) {
      const flow = FLOWS[shape.flow];
      if (!flow) continue;
      const input = inputOf(shape);
      const parent = await countExecution(testing, sdk.withDurableExecution(flow), input, (r) => {
        r.registerDurableFunction(FACT_CHECK_FUNCTION, sdk.withDurableExecution(factCheck));
      });
      // A chained execution is an execution of its own, billed as one: counted alone.
      const children =
        input.childRuns > 0 && shape.flow === "content run, long form"
          ? await countExecution(testing, sdk.withDurableExecution(factCheck), {
              claims: input.claims,
            })
          : { operations: 0, checkpointBytes: 0 };
      counts.set(shape.flow, {
        operations: parent.operations + children.operations * input.childRuns,
        checkpointBytes: parent.checkpointBytes + children.checkpointBytes * input.childRuns,
        sdk: versions,
      });
    }
  } finally {
    await testing.LocalDurableTestRunner.teardownTestEnvironment();
  }
  return counts;
}
