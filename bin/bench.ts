import { availableParallelism, loadavg } from "node:os";
import { type MotoServer, motoAvailable, startMoto } from "../lib/dev/local/moto";
import { silenceNodeVersionWarning } from "../lib/operator/warnings";
import { type BundlesResult, bundlesSummary, runBundlesSection } from "./bench/bundles";
import { type CostResult, costSummary, runCostSection, stopCostSection } from "./bench/cost";
import {
  type DeliveryResult,
  deliverySummary,
  runDeliverySection,
  stopDeliverySection,
} from "./bench/delivery";
import { type DynamoResult, type Measured, runDynamoSection } from "./bench/dynamo";
import { type HeartbeatsResult, heartbeatsSummary, runHeartbeatsSection } from "./bench/heartbeats";
import { type ListsResult, listsSummary, runListsSection } from "./bench/lists";
import {
  type LocalResult,
  runLocalSection,
  runTenantsSection,
  stopLocalSection,
} from "./bench/local";
import { type LongRunResult, longRunSummary, runLongRunSection } from "./bench/long-run";
import { type RolesResult, rolesSummary, runRolesSection, stopRolesSection } from "./bench/roles";
import { fmt, fmtInt } from "./bench/stats";
import type { TenantsResult } from "./bench/tenants";
import { runThroughputSection, type ThroughputResult } from "./bench/throughput";
import {
  runWritesSection,
  stopWritesSection,
  type WritesResult,
  writesSummary,
} from "./bench/writes";

/**
 * `npm run bench`: what AgentBus's reliability costs, against baselines measured in the same run.
 * 1. Consumer pipeline throughput on the in-memory adapters vs a bare decide + Map.set consumer.
 * 2. DynamoDB calls and capacity units per consumed event, against moto, vs Powertools
 *    idempotency around a separate state write and outbox write.
 * 3. The local stack (moto + in-process runtime): latency per hop and end to end, a burst, a
 *    conversation, vs the emulator's own latency for each hop; calls/s and CPU, idle and loaded.
 * 4. Every Lambda bundle as `cdk deploy` builds it: size and init time, vs the bundling before
 *    and vs leaving the SDK to the runtime.
 * 5. DynamoDB calls and capacity units per delivery of every consumer group while the local stack
 *    plays the reference scenario, beside the commit minimum and the Powertools baseline.
 * 6. What each reference flow (a support turn, a content run, a refund review) costs in dollars
 *    on AWS, metered end to end on the local stack, beside Step Functions, Lambda durable
 *    functions and Temporal Cloud, per million flows played alone and with 100 of a kind in
 *    flight at once (batches filled), with the batch sizes measured.
 * `npm run bench -- memory` runs section 1 alone, `npm run bench -- local` section 3,
 * `npm run bench -- tenants` only section 3's tenants measurement (with and without tenant lanes),
 * `npm run bench -- bundles` section 4, `npm run bench -- roles` sections 2 and 5,
 * 7. One FIFO group delivered each way the topology offers (dispatch function, Pipe, ...), on a
 *    stack of its own each: latency per hop and dollars per million consumed events, one at a
 *    time and in a burst, side by side.
 * 8. One tenant's runs of one status, a page and the next, of 100,000 runs on moto: from the
 *    by-tenant-status index, beside the look-through of the kind's list.
 * 9. One agent run of 2,000 turns on the agent loop: bytes written per turn at turn 10 and at its
 *    last, no moto.
 * `npm run bench -- cost` section 6, `npm run bench -- delivery` section 7, `npm run bench -- lists`
 * section 8, `npm run bench -- long-run` section 9; `npm run bench -- writes` (alone only) lists
 * section 6's flows' DynamoDB writes one by one, grouped, with their write units, then the write
 * units of one conversation's turns as it grows past the turns it keeps; `npm run bench --
 * heartbeats` (alone only) prices one agent heartbeat and the beats long model calls send.
 * No figure is hard-coded and nothing asserts speed; the run fails only when something breaks.
 */

silenceNodeVersionWarning();

const out = (line = "") => process.stdout.write(`${line}\n`);
const heading = (title: string) => {
  out();
  out(title);
  out("=".repeat(title.length));
};

/** A failure of the environment, not of the code: its message says it all, no stack needed. */
class SetupError extends Error {}

let moto: MotoServer | undefined;

async function stopMoto(): Promise<void> {
  const server = moto;
  moto = undefined;
  if (server) await server.stop();
  await stopLocalSection();
  await stopRolesSection();
  await stopCostSection();
  await stopWritesSection();
  await stopDeliverySection();
}

for (const [signal, code] of [
  ["SIGINT", 130],
  ["SIGTERM", 143],
] as const) {
  process.on(signal, () => {
    void stopMoto().finally(() => process.exit(code));
  });
}

async function main(): Promise<void> {
  const started = performance.now();
  const load = loadavg()[0] ?? 0;
  out(
    `AgentBus benchmark — Node ${process.version}, ${process.platform}/${process.arch}, ${availableParallelism()} CPUs, load average ${fmt(load, 1)} at start${load > availableParallelism() ? " (a busy machine: expect wide spreads)" : ""}`,
  );
  const only = (Object.keys(SOLO) as (keyof typeof SOLO)[]).find((s) =>
    process.argv.slice(2).includes(s),
  );
  // Fail before the long in-memory section when sections 2 and 3 cannot run.
  if (only !== "bundles" && only !== "memory" && only !== "long-run" && !motoAvailable()) {
    throw new SetupError(
      "moto_server is not on PATH, and sections 2 and 3 need it: install moto 5.2 with its server extra (pip install 'moto[server]~=5.2')",
    );
  }
  if (only) {
    const line = await SOLO[only]();
    heading("Summary");
    out(line);
    out();
    out(`done in ${fmt((performance.now() - started) / 1000, 1)} s`);
    return;
  }

  const throughput = await runMemory();
  const dynamo = await runDynamo();
  const local = await runLocal();
  const bundles = await runBundles();
  const roles = await runRoles(dynamo);
  const cost = await runCost();
  const delivery = await runDelivery();
  const lists = await runLists();
  const longRun = await runLongRun();

  heading("Summary");
  out(memorySummary(throughput));
  out(dynamoSummary(dynamo));
  out(localSummary(local));
  out(bundlesSummary(bundles));
  out(rolesSummary(roles));
  out(costSummary(cost));
  out(deliverySummary(delivery));
  out(listsSummary(lists));
  out(longRunSummary(longRun));
  out();
  out(`done in ${fmt((performance.now() - started) / 1000, 1)} s`);
}

/** Each section that can run alone (`npm run bench -- <name>`), with its summary line. */
const SOLO = {
  memory: async () => memorySummary(await runMemory()),
  local: async () => localSummary(await runLocal()),
  tenants: async () => tenantsSummary(await runTenants()),
  bundles: async () => bundlesSummary(await runBundles()),
  roles: async () => rolesSummary(await runRoles(await runDynamo())),
  cost: async () => costSummary(await runCost()),
  writes: async () => writesSummary(await runWrites()),
  heartbeats: async () => heartbeatsSummary(await runHeartbeats()),
  delivery: async () => deliverySummary(await runDelivery()),
  lists: async () => listsSummary(await runLists()),
  "long-run": async () => longRunSummary(await runLongRun()),
};

/** Section 1: the consumer pipeline on the in-memory adapters, against bare consumers. */
async function runMemory(): Promise<ThroughputResult> {
  heading("1. Consumer pipeline throughput, in-memory adapters (role: task-projection)");
  const mark = performance.now();
  const throughput = await runThroughputSection(out);
  out(`section 1 took ${fmt((performance.now() - mark) / 1000, 1)} s`);
  return throughput;
}

/** Section 2: DynamoDB calls and capacity units per consumed event, against a moto of its own. */
async function runDynamo(): Promise<DynamoResult> {
  heading("2. DynamoDB cost per consumed event, against moto");
  out(
    "AgentBus: consume() with DynamoEventStore (one GetItem of the state item, which holds the group's checkpoints and recent ids; state + emitted events in one TransactWriteItems, or one PutItem or UpdateItem when there is a single write: an unsequenced message is recorded by its id on the state, with no inbox row).",
  );
  out(
    'Baseline: Powertools makeIdempotent + DynamoDBPersistenceLayer (key "event_id", record TTL 7 days like the inbox) around GetItem state, PutItem state (revision condition) and a separate PutItem per emitted event.',
  );
  out();
  let dynamo: DynamoResult;
  const mark = performance.now();
  try {
    moto = await startMoto();
    out(
      `moto_server pid ${moto.pid} on ${moto.endpoint} (started by this run, stopped at its end)`,
    );
    dynamo = await runDynamoSection(out, moto.endpoint);
  } finally {
    await stopMoto();
  }
  out();
  out(
    "WU/RU: capacity units estimated by lib/dev/metering/metering.ts from item sizes, as on-demand DynamoDB bills them (transaction items 2×, failed conditions billed, a key that finds nothing one minimum read), with the entries each write makes in the tables' global secondary indexes (1 WU per KB each; an event that starts a run of its stream's events in one correlation, or is a task root, enters the trace index, a task root also task-roots, a stream's first event by-stream-type; an inbox row the trace index, a task root also task-roots); moto's own ConsumedCapacity is size-blind and not used.",
  );
  out("moto ms/ev: moto on this machine, not indicative of AWS latency.");
  out(`section 2 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto start included)`);
  return dynamo;
}

async function runLocal(): Promise<LocalResult> {
  heading("3. The local stack: latency per hop and end to end, against moto's own");
  const mark = performance.now();
  const local = await runLocalSection(out);
  out(
    "Bounds: moto on this machine, measured in this run with fresh SDK clients; the stack's moto is measured idle, with the runtime's pollers running.",
  );
  out(`section 3 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto starts included)`);
  return local;
}

async function runTenants(): Promise<TenantsResult | undefined> {
  heading("3. The local stack: one tenant's reply latency during another tenant's burst");
  const mark = performance.now();
  const tenants = await runTenantsSection(out);
  out(`took ${fmt((performance.now() - mark) / 1000, 1)} s (moto starts included)`);
  return tenants;
}

async function runBundles(): Promise<BundlesResult> {
  heading("4. Lambda bundles and init time, built as cdk deploy builds them");
  const mark = performance.now();
  const bundles = await runBundlesSection(out);
  out(`section 4 took ${fmt((performance.now() - mark) / 1000, 1)} s`);
  return bundles;
}

async function runRoles(dynamo: DynamoResult): Promise<RolesResult> {
  heading("5. DynamoDB cost per delivery of each consumer group, in the reference scenario");
  const mark = performance.now();
  const roles = await runRolesSection(out, dynamo);
  out(`section 5 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto start included)`);
  return roles;
}

async function runCost(): Promise<CostResult> {
  heading("6. Dollars per flow on AWS, beside Step Functions, durable functions and Temporal");
  const mark = performance.now();
  const cost = await runCostSection(out);
  out(`section 6 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto start included)`);
  return cost;
}

/** Beside section 6, run alone only: each flow's write units, write by write. */
async function runWrites(): Promise<WritesResult> {
  heading("Write units per flow, write by write (the flows of section 6, played alone)");
  const mark = performance.now();
  const writes = await runWritesSection(out);
  out(`took ${fmt((performance.now() - mark) / 1000, 1)} s (moto start included)`);
  return writes;
}

/** Beside section 6, run alone only: what an agent's heartbeats cost during long model calls. */
async function runHeartbeats(): Promise<HeartbeatsResult> {
  heading("Heartbeats during long model calls: one beat's price, and the beats a call sends");
  const mark = performance.now();
  const heartbeats = await runHeartbeatsSection(out);
  out(`took ${fmt((performance.now() - mark) / 1000, 1)} s (moto starts included)`);
  return heartbeats;
}

async function runDelivery(): Promise<DeliveryResult> {
  heading("7. One FIFO group delivered each way: latency per hop and dollars, side by side");
  const mark = performance.now();
  const delivery = await runDeliverySection(out);
  out(`section 7 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto starts included)`);
  return delivery;
}

/** Section 8: a page of one tenant's runs of one status, against a moto of its own. */
async function runLists(): Promise<ListsResult> {
  heading("8. A page of one tenant's runs of one status, of 100,000 runs on moto");
  const mark = performance.now();
  try {
    moto = await startMoto();
    return await runListsSection(out, moto.endpoint);
  } finally {
    await stopMoto();
    out(`section 8 took ${fmt((performance.now() - mark) / 1000, 1)} s (moto start included)`);
  }
}

/** Section 9: one long agent run, in memory. */
async function runLongRun(): Promise<LongRunResult> {
  heading("9. An agent run of 2,000 turns: bytes written per turn, early and late");
  const mark = performance.now();
  const result = await runLongRunSection(out);
  out(`section 9 took ${fmt((performance.now() - mark) / 1000, 1)} s`);
  return result;
}

function localSummary(local: LocalResult): string {
  const whole = local.hops.whole;
  const w = local.worst;
  return `3. On the local stack one event takes ${fmtInt(whole.p50)} ms (median; p95 ${fmtInt(whole.p95)} ms) from its commit to a FIFO consumer's commit, ${fmt(whole.p50 / local.wholeBound, 1)}× what moto itself needs for the same hops (${fmtInt(local.wholeBound)} ms); the most time above its bound goes in ${w.label.trim()}: ${fmtInt(w.median)} ms vs ${fmt(w.bound, 1)} ms (${fmt(w.median / w.bound, 1)}×). A burst of ${local.burst.events} events over ${local.burst.keys} order keys goes through at ${fmt(local.burst.events / local.burst.seconds, 1)} events/s; a conversation message reaches its reply in ${fmtInt(local.conversation.p50)} ms (median)${local.tenants ? `, ${tenantsPhrase(local.tenants)}` : ""}; idle, the stack makes ${fmtInt(local.idleRequestsPerSecond)} calls/s to moto, and runtime.idle() takes ${fmtInt(local.settleMs)} ms on a settled stack.`;
}

function tenantsPhrase(t: TenantsResult): string {
  const { lanes, orderKeys } = t;
  const without = orderKeys
    ? `; keyed by order key alone, ${fmtInt(orderKeys.quiet.p50)} ms and ${fmtInt(orderKeys.underBurst.p50)} ms (${fmt(orderKeys.underBurst.p50 / orderKeys.quiet.p50, 1)}×)`
    : "";
  return `one tenant's message posted to the front door is answered in ${fmtInt(lanes.quiet.p50)} ms alone and ${fmtInt(lanes.underBurst.p50)} ms during another tenant's burst of ${t.burstMessages} conversations (${fmt(lanes.underBurst.p50 / lanes.quiet.p50, 1)}×) with tenant lanes${without}`;
}

function tenantsSummary(t: TenantsResult | undefined): string {
  return t ? `3. On the local stack ${tenantsPhrase(t)}.` : "3. The stack has no front door.";
}

function memorySummary(throughput: ThroughputResult): string {
  const row = (delivery: string, name: string) =>
    throughput.rows.find((r) => r.delivery === delivery && r.name === name)?.summary.median ?? 0;
  const correct = (delivery: string, name: string) =>
    throughput.correctness.find((c) => c.delivery === delivery && c.name === name)?.correct ?? 0;
  const bus = row("in order", "AgentBus consume");
  const bare = row("in order", "bare: decide + Map.set");
  const validated = row("in order", "bare + envelope validation");
  const messyBus = row("shuffled, 20% dup", "AgentBus consume");
  return `1. In memory, AgentBus consume handles ${fmtInt(bus)} events/s in order, ${fmt(bare / bus, 1)}× slower than a bare decide + Map.set (${fmtInt(bare)}/s): ≈ ${fmt(1e6 / bus - 1e6 / bare, 1)} µs more per event, of which envelope validation ≈ ${fmt(1e6 / validated - 1e6 / bare, 1)} µs and dedup, gate and atomic commit on the in-memory store the rest; with 20% duplicates shuffled it does ${fmtInt(messyBus)}/s and leaves ${fmtInt(correct("shuffled, 20% dup", "AgentBus consume"))}/${fmtInt(throughput.tasks)} task views right, the bare consumer ${fmtInt(correct("shuffled, 20% dup", "bare: decide + Map.set"))}/${fmtInt(throughput.tasks)}.`;
}

function dynamoSummary(dynamo: DynamoResult): string {
  const callsOf = (m: Measured) => Object.values(m.calls).reduce((a, b) => a + b, 0) / m.events;
  const writesOf = (m: Measured) => m.writeUnits / m.events;
  const readsOf = (m: Measured) => m.readUnits / m.events;
  const parts = dynamo.cases.map(
    (c) =>
      `${c.name.replace(/ \(.*\)$/, "")} ${fmt(callsOf(c.agentBus), 1)}/${fmt(callsOf(c.baseline), 1)} calls, ${fmt(writesOf(c.agentBus), 1)}/${fmt(writesOf(c.baseline), 1)} WU, ${fmt(readsOf(c.agentBus), 1)}/${fmt(readsOf(c.baseline), 1)} RU`,
  );
  const applied = dynamo.cases.filter((c) => !c.name.startsWith("redelivered"));
  const range = (values: number[]) => {
    const lo = Math.min(...values);
    const hi = Math.max(...values);
    return fmt(lo, 1) === fmt(hi, 1) ? `${fmt(lo, 1)}×` : `${fmt(lo, 1)}-${fmt(hi, 1)}×`;
  };
  const fewerCalls = range(applied.map((c) => callsOf(c.baseline) / callsOf(c.agentBus)));
  const moreWrites = range(applied.map((c) => writesOf(c.agentBus) / writesOf(c.baseline)));
  const moreReads = range(applied.map((c) => readsOf(c.agentBus) / readsOf(c.baseline)));
  return `2. On DynamoDB, AgentBus/baseline per event: ${parts.join("; ")}. For an applied event AgentBus makes ${fewerCalls} fewer calls and commits state, inbox, checkpoint and outbox atomically, at ${moreWrites} the write units (transaction items bill 2×; the inbox row, kept as the trace's record, is the item beyond the minimum) and ${moreReads} the read units.`;
}

main().then(
  () => process.exit(0),
  async (error: unknown) => {
    await stopMoto();
    const message =
      error instanceof SetupError
        ? error.message
        : error instanceof Error
          ? (error.stack ?? error.message)
          : String(error);
    process.stderr.write(`\nbench failed: ${message}\n`);
    process.exit(1);
  },
);
