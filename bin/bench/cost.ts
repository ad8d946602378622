import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import type { FlowShape, FlowUsage, Mappings, MixedFlow } from "../../lib/dev/metering/flow-cost";
import { indexCatalog } from "../../lib/dev/metering/index-writes";
import {
  type Meter,
  type MeterSnapshot,
  meter,
  SERVICE_SCOPES,
} from "../../lib/dev/metering/metering";
import { PLAYED_FLOWS } from "./cost-flows";
import { type CostResult, printCost } from "./cost-print";
import { withPeerCounts } from "./peers";

/**
 * `npm run bench` section 6 (`npm run bench -- cost`): what each reference flow costs in dollars
 * on AWS, metered end to end on the local stack, beside the same flow on Step Functions, Lambda
 * durable functions and Temporal Cloud. Each flow is played REPEATS times, alone, from an idle
 * stack to an idle stack; what it used is the mean.
 */
const REPEATS = 2;

type Out = (line?: string) => void;

export { type CostResult, costSummary } from "./cost-print";

/** What the runtime reported while one flow (or one measured run) played. */
export interface Invocations {
  requests: number;
  arm64: number;
  x86_64: number;
  consumerGbSeconds: number;
  consumerSeconds: number;
  consumed: number;
}

export const noInvocations = (): Invocations => ({
  requests: 0,
  arm64: 0,
  x86_64: 0,
  consumerGbSeconds: 0,
  consumerSeconds: 0,
  consumed: 0,
});

/** Adds one runtime event to `current`: a consumed event, or an invocation's request and GB-s. */
export function countInvocation(current: Invocations, event: RuntimeEvent): void {
  if (event.kind === "consumed" || event.kind === "consume-failed") current.consumed++;
  // The sweeper runs on a schedule whatever the load: not a flow's.
  if (event.kind !== "invoked" || event.functionKind === "sweeper") return;
  const gbSeconds = (event.memoryMb / 1024) * (Math.ceil(event.ms) / 1000);
  current.requests++;
  current[event.architecture] += gbSeconds;
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
  let current = noInvocations();
  const onEvent = (event: RuntimeEvent) => countInvocation(current, event);
  running = await startLocal({ onEvent });
  const env = running;
  try {
    const meters = metersOf(env);
    const excluded = unbilledScopes(env);
    out(`local stack on ${env.endpoint}: each flow played ${REPEATS} times alone, metered`);
    await env.runtime.idle();
    const flows: MixedFlow[] = [];
    let mixSeconds = 0;
    for (const flow of PLAYED_FLOWS) {
      const usages: FlowUsage[] = [];
      const shapes: FlowShape[] = [];
      const started = performance.now();
      for (let i = 0; i < REPEATS; i++) {
        for (const m of meters) m.reset();
        current = noInvocations();
        shapes.push(await flow.play(env));
        usages.push(usageOf(meters, current, excluded));
      }
      mixSeconds += (performance.now() - started) / 1000 / REPEATS;
      flows.push({ shape: sameShape(flow.flow, shapes), usage: meanOf(usages) });
    }
    const result = {
      flows: await withCountedPeers(flows),
      mixSeconds,
      mappings: mappingsOf(env),
      functions: functionsOf(env),
    };
    printCost(out, result);
    return result;
  } finally {
    await stopCostSection();
  }
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

export function meanOf(usages: FlowUsage[]): FlowUsage {
  const n = usages.length;
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
