import { describe } from "../../functions/core/errors";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import {
  agentBusDollars,
  type FlowShape,
  type FlowUsage,
  type Mappings,
  type MixedFlow,
  total,
} from "../../lib/dev/metering/flow-cost";
import { indexCatalog } from "../../lib/dev/metering/index-writes";
import {
  type Meter,
  type MeterSnapshot,
  meter,
  SERVICE_SCOPES,
} from "../../lib/dev/metering/metering";
import type { ColdPlay } from "./cost-cold";
import { PLAYED_FLOWS, type PlayedFlow, playAlone, type StartedFlow } from "./cost-flows";
import { type CostResult, type LoadedPlay, printCost } from "./cost-print";
import { withPeerCounts } from "./peers";
import { fmt } from "./stats";

/**
 * `npm run bench` section 6 (`npm run bench -- cost`): what each reference flow costs in dollars
 * on AWS, metered end to end on the local stack, beside the same flow on Step Functions, Lambda
 * durable functions and Temporal Cloud. Each flow is played once to warm the functions up (its
 * usage kept apart: the first flow of a customer in cold functions, ./cost-cold.ts), then
 * REPEATS times, alone, from an idle stack to an idle stack; what it used is the mean.
 */
export const REPEATS = 2;

/**
 * The loaded column: this many flows of one kind started at once (100, or `BENCH_IN_FLIGHT`), so
 * that every hop's batches fill as far as the stack's settings let them; what they used is
 * divided by their number.
 */
export const IN_FLIGHT = inFlight(process.env.BENCH_IN_FLIGHT);

function inFlight(setting: string | undefined): number {
  if (setting === undefined || setting === "") return 100;
  const n = Number(setting);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`BENCH_IN_FLIGHT must be a whole number of flows, 1 or more, not "${setting}"`);
  return n;
}

/** How long the flows in flight at once may take to settle on the local stack. */
const LOADED_TIMEOUT_MS = 900_000;

type Out = (line?: string) => void;

export { type CostResult, costSummary, type LoadedPlay } from "./cost-print";

/** The invocations of one kind of function that carried a batch, and the records in them. */
export interface BatchTally {
  invocations: number;
  records: number;
}

/** What the runtime reported while one flow (or one measured run) played. */
export interface Invocations {
  requests: number;
  arm64: number;
  x86_64: number;
  consumerGbSeconds: number;
  consumerSeconds: number;
  consumed: number;
  /** By function kind (`consumer`, `dispatch`, `relay`, ...): the batches it was invoked with. */
  batches: Record<string, BatchTally>;
}

export const noInvocations = (): Invocations => ({
  requests: 0,
  arm64: 0,
  x86_64: 0,
  consumerGbSeconds: 0,
  consumerSeconds: 0,
  consumed: 0,
  batches: {},
});

/** Adds one runtime event to `current`: a consumed event, or an invocation's request and GB-s. */
export function countInvocation(current: Invocations, event: RuntimeEvent): void {
  if (event.kind === "consumed" || event.kind === "consume-failed") current.consumed++;
  // The sweeper runs on a schedule whatever the load: not a flow's.
  if (event.kind !== "invoked" || event.functionKind === "sweeper") return;
  const gbSeconds = (event.memoryMb / 1024) * (Math.ceil(event.ms) / 1000);
  current.requests++;
  current[event.architecture] += gbSeconds;
  if (event.records > 0) {
    const batches = current.batches[event.functionKind] ?? { invocations: 0, records: 0 };
    batches.invocations++;
    batches.records += event.records;
    current.batches[event.functionKind] = batches;
  }
  if (event.functionKind === "consumer") {
    current.consumerGbSeconds += gbSeconds;
    current.consumerSeconds += event.ms / 1000;
  }
}

/** The scopes whose calls no flow pays for: the sweeper's (it runs on a schedule). */
export function unbilledScopes(env: LocalEnvironment): Set<string> {
  return new Set(
    env.deployment.functions.filter((f) => f.kind === "sweeper").map((f) => f.group ?? f.name),
  );
}

let running: LocalEnvironment | undefined;

export async function stopCostSection(): Promise<void> {
  const env = running;
  running = undefined;
  await env?.stop();
}

/** The flows with what the peers' own tools counted for each (./peers.ts). */
async function withCountedPeers(flows: readonly MixedFlow[]): Promise<MixedFlow[]> {
  const shapes = await withPeerCounts(flows.map((f) => f.shape));
  return flows.map((f, i) => ({ ...f, shape: shapes[i] ?? f.shape }));
}

export async function runCostSection(out: Out): Promise<CostResult> {
  const tally = { current: noInvocations() };
  const onEvent = (event: RuntimeEvent) => countInvocation(tally.current, event);
  running = await startLocal({ onEvent });
  const env = running;
  try {
    const play: Play = { env, tally, meters: metersOf(env), excluded: unbilledScopes(env) };
    out(
      `local stack on ${env.endpoint}: each flow played once to warm up, ${REPEATS} times alone, then ${IN_FLIGHT} at once, metered`,
    );
    await env.runtime.idle();
    const flows: MixedFlow[] = [];
    const cold: ColdPlay[] = [];
    for (const flow of PLAYED_FLOWS) {
      cold.push({ flow: flow.flow, usage: await playedCold(play, flow) });
      flows.push(await playedAlone(play, flow));
    }
    const loaded: LoadedPlay[] = [];
    for (const flow of PLAYED_FLOWS) {
      const played = await playedLoaded(play, flow);
      const dollars = total(agentBusDollars(played.usage)) * 1e6;
      out(
        `  ${IN_FLIGHT} × ${flow.flow}: settled in ${fmt(played.seconds, 1)} s, $${fmt(dollars, 2)} per million flows`,
      );
      loaded.push(played);
    }
    const result = {
      flows: await withCountedPeers(flows),
      cold,
      loaded,
      mappings: mappingsOf(env),
      functions: functionsOf(env),
    };
    printCost(out, result);
    return result;
  } finally {
    await stopCostSection();
  }
}

/** What the plays of one section share: the stack, its meters and the invocations counted. */
export interface Play {
  readonly env: LocalEnvironment;
  readonly tally: { current: Invocations };
  readonly meters: Meter[];
  readonly excluded: ReadonlySet<string>;
}

/** Starts metering afresh. */
function resetMeters(play: Play): void {
  for (const m of play.meters) m.reset();
  play.tally.current = noInvocations();
}

/**
 * The flow played once, before its metered plays: what it used in functions that had not served
 * it (its customer's data key not yet cached, the instances' first calls).
 */
async function playedCold(play: Play, flow: PlayedFlow): Promise<FlowUsage> {
  resetMeters(play);
  await playAlone(play.env, flow);
  return usageOf(play.meters, play.tally.current, play.excluded);
}

/** The flow played REPEATS times alone: its shape and mean usage. */
export async function playedAlone(play: Play, flow: PlayedFlow): Promise<MixedFlow> {
  const usages: FlowUsage[] = [];
  const shapes: FlowShape[] = [];
  for (let i = 0; i < REPEATS; i++) {
    resetMeters(play);
    shapes.push(await playAlone(play.env, flow));
    usages.push(usageOf(play.meters, play.tally.current, play.excluded));
  }
  return { shape: sameShape(flow.flow, shapes), usage: meanOf(usages) };
}

/**
 * IN_FLIGHT flows started at once, then the runtime left to settle and each flow's outcome
 * checked: what they used, per flow, and the batches each kind of function was invoked with.
 */
async function playedLoaded(play: Play, flow: PlayedFlow): Promise<LoadedPlay> {
  const { env } = play;
  // After a loaded play the stack can take longer than idle()'s default to go quiet.
  await env.runtime.idle({ timeoutMs: LOADED_TIMEOUT_MS });
  resetMeters(play);
  const started = performance.now();
  const flows = await Promise.all(Array.from({ length: IN_FLIGHT }, () => flow.start(env)));
  await env.runtime.idle({ timeoutMs: LOADED_TIMEOUT_MS });
  await settledAll(flow.flow, flows, started + LOADED_TIMEOUT_MS);
  await env.runtime.idle({ timeoutMs: LOADED_TIMEOUT_MS });
  const seconds = (performance.now() - started) / 1000;
  const usage = usageOf(play.meters, play.tally.current, play.excluded);
  return {
    flow: flow.flow,
    inFlight: IN_FLIGHT,
    seconds,
    usage: meanOf([usage], IN_FLIGHT),
    batches: play.tally.current.batches,
  };
}

/**
 * Waits for every flow's outcome until `deadline` (performance.now() time); refused, naming each
 * flow that did not settle with where it stopped (for a workflow run, each node's state, its map
 * items, leases, held nodes and child runs: ../../lib/dev/local/scenario/workflow.ts
 * `describeRun`), one line each, rather than stopping at the first.
 */
async function settledAll(
  name: string,
  flows: readonly StartedFlow[],
  deadline: number,
): Promise<void> {
  const unsettled: string[] = [];
  for (const f of flows)
    try {
      // At least a second each, so that a flow that ended is still found after the deadline.
      await f.ended(Math.max(1000, deadline - performance.now()));
    } catch (error) {
      unsettled.push(describe(error).message);
    }
  if (unsettled.length > 0)
    throw new Error(
      `${unsettled.length} of ${flows.length} × ${name} did not settle:\n${unsettled.map((u) => `  ${u}`).join("\n")}`,
    );
}

/** Meters on the clients the functions and the runtime share (the emulator's SDK clients). */
export function metersOf(env: LocalEnvironment): Meter[] {
  const { clients } = env;
  return [
    meter(clients.dynamodb, { indexes: indexCatalog(env.names.tables) }),
    meter(clients.sqs),
    meter(clients.eventbridge),
    ...(clients.kms ? [meter(clients.kms)] : []),
  ];
}

/** The functions' memory and architecture, e.g. `256 MB arm64 (31 functions)`. */
function functionsOf(env: LocalEnvironment): string {
  const counts = new Map<string, number>();
  for (const f of env.deployment.functions) {
    const key = `${f.memoryMb} MB ${f.architecture}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].map(([key, n]) => `${key} (${n} functions)`).join(", ");
}

/** The stack's SQS event source mappings by queue type. */
function mappingsOf(env: LocalEnvironment): Mappings {
  const sqs = env.deployment.mappings.filter((m) => m.source === "sqs");
  const fifo = sqs.filter((m) => m.eventSourceArn.endsWith(".fifo")).length;
  return { standard: sqs.length - fifo, fifo };
}

/**
 * Sum of what the meters counted in the scopes a bill has: the functions' groups, the Lambda
 * service's SQS pollers, pipes and the client's start of the flow. Calls outside any scope are
 * the bench's own (waiting for the outcome, runtime.idle()) and the sweeper's are left out.
 */
function billedScopes(meters: Meter[], excluded: ReadonlySet<string>): MeterSnapshot[] {
  return meters.flatMap((m) =>
    Object.entries(m.byScope())
      .filter(([scope]) => !excluded.has(scope))
      .map(([, snapshot]) => snapshot),
  );
}

/**
 * What the metered calls and invocations come to as AWS bills them. `localQueues`: queues only the
 * local runtime has (the queue it stands in for a classic rule's delivery to a new bus with),
 * whose requests no AWS bill has.
 */
export function usageOf(
  meters: Meter[],
  inv: Invocations,
  excluded: ReadonlySet<string>,
  localQueues: ReadonlySet<string> = new Set(),
): FlowUsage {
  const snapshots = billedScopes(meters, excluded);
  const sum = (f: (s: MeterSnapshot) => number) => snapshots.reduce((n, s) => n + f(s), 0);
  const sqs = sqsRequests(snapshots, localQueues);
  const pipes = meters.flatMap((m) => {
    const s = m.byScope()[SERVICE_SCOPES.pipe];
    return s ? [s] : [];
  });
  return {
    dynamoWriteUnits: sum((s) => s.writeUnits),
    dynamoReadUnits: sum((s) => s.readUnits),
    sqsStandardRequests: sqs.standard,
    sqsFifoRequests: sqs.fifo,
    eventBridgeEvents: sum((s) => s.billed.PutEvents ?? 0),
    // A pipe bills one request per batch it reads (its SQS calls are in the SQS lines).
    pipesRequests: pipes.reduce((n, s) => n + (s.calls.ReceiveMessage ?? 0) - s.emptyReceives, 0),
    lambdaRequests: inv.requests,
    lambdaGbSeconds: { arm64: inv.arm64, x86_64: inv.x86_64 },
    kmsRequests: sum((s) => countKms(s)),
    consumedEvents: inv.consumed,
    workGbSeconds: inv.consumerGbSeconds,
    workSeconds: inv.consumerSeconds,
  };
}

const KMS_OPERATIONS = ["GenerateDataKey", "Decrypt", "Encrypt", "ReEncrypt"];
const countKms = (s: MeterSnapshot) => KMS_OPERATIONS.reduce((n, op) => n + (s.calls[op] ?? 0), 0);

/**
 * SQS requests by queue type: every billed request but the empty receives (those are the
 * pollers' fixed cost, counted per month), plus one SendMessage per message that reached a queue
 * without a metered send: an EventBridge rule's target delivery, billed to the queue's owner.
 */
function sqsRequests(
  snapshots: MeterSnapshot[],
  localQueues: ReadonlySet<string>,
): { standard: number; fifo: number } {
  const byQueue = new Map<string, { requests: number; sent: number; first: number }>();
  for (const s of snapshots)
    for (const [url, q] of Object.entries(s.queues)) {
      if (localQueues.has(url)) continue;
      const t = byQueue.get(url) ?? { requests: 0, sent: 0, first: 0 };
      t.requests += q.requests - q.emptyReceives;
      t.sent += q.sent;
      t.first += q.firstReceived;
      byQueue.set(url, t);
    }
  let standard = 0;
  let fifo = 0;
  for (const [url, t] of byQueue) {
    const n = t.requests + Math.max(0, t.first - t.sent);
    if (url.endsWith(".fifo")) fifo += n;
    else standard += n;
  }
  return { standard, fifo };
}

/**
 * The one shape every play of a flow had: its usage is their mean, so plays that ran different
 * steps (a content run with other claims or rounds) would price the peers on a shape no play had.
 */
function sameShape(flow: string, shapes: readonly FlowShape[]): FlowShape {
  const [first, ...rest] = shapes;
  if (!first) throw new Error(`the flow ${flow} was not played`);
  const differs = rest.find((s) => JSON.stringify(s) !== JSON.stringify(first));
  if (differs)
    throw new Error(
      `the plays of ${flow} ran different steps (${first.steps.length} and ${differs.steps.length}): their mean usage has no one shape to price the peers on`,
    );
  return first;
}

/** The mean of the usages, each standing for `flows` flows (one by default). */
export function meanOf(usages: FlowUsage[], flows = 1): FlowUsage {
  const n = usages.length * flows;
  const mean = (f: (u: FlowUsage) => number) => usages.reduce((a, u) => a + f(u), 0) / n;
  return {
    dynamoWriteUnits: mean((u) => u.dynamoWriteUnits),
    dynamoReadUnits: mean((u) => u.dynamoReadUnits),
    sqsStandardRequests: mean((u) => u.sqsStandardRequests),
    sqsFifoRequests: mean((u) => u.sqsFifoRequests),
    eventBridgeEvents: mean((u) => u.eventBridgeEvents),
    pipesRequests: mean((u) => u.pipesRequests),
    lambdaRequests: mean((u) => u.lambdaRequests),
    lambdaGbSeconds: {
      arm64: mean((u) => u.lambdaGbSeconds.arm64),
      x86_64: mean((u) => u.lambdaGbSeconds.x86_64),
    },
    kmsRequests: mean((u) => u.kmsRequests),
    consumedEvents: mean((u) => u.consumedEvents),
    workGbSeconds: mean((u) => u.workGbSeconds),
    workSeconds: mean((u) => u.workSeconds),
  };
}
