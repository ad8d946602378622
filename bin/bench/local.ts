import type { ConsumeResult } from "../../functions/core/role";
import type { LocalDelivery } from "../../functions/roles/customer-support/integrations/reply-channel/memory";
import { hasConversation } from "../../lib/dev/local/conversation";
import { emulatorClients } from "../../lib/dev/local/deploy";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { startMoto } from "../../lib/dev/local/moto";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import { mappedQueueUrls } from "../../lib/dev/local/runtime/queues";
import { type Bounds, type Latency, measureBounds, pingQueue } from "./local-bounds";
import { cpuNow, type Probed, percentiles, ratesBetween, WireProbe } from "./local-probe";
import {
  type BurstResult,
  burst,
  type ConversationSample,
  conversationPath,
  HOP_GROUP,
  type HopSample,
  hopTable,
  sampleHops,
} from "./local-runs";
import { fmt, fmtInt, renderTable } from "./stats";
import { measureTenants, type TenantsResult } from "./tenants";

/**
 * `npm run bench` section 3: the local stack (moto + the in-process runtime) as `npm start` and
 * the tests use it. Per-hop latency of one event, a burst over many order keys, one conversation
 * message to its delivered reply, and the emulator's own latency for each hop measured in the
 * same run (on a bare moto_server and on the stack's, idle). Requests per second to the emulator
 * and CPU of this process and of moto, idle and under load.
 */

export interface LocalResult {
  readonly hops: Record<keyof HopSample, Latency>;
  readonly bare: Bounds;
  readonly burst: BurstResult;
  readonly conversation: Latency & { steps: number };
  /** One tenant's reply latency alone and during another's burst (./tenants.ts). */
  readonly tenants?: TenantsResult;
  readonly idleRequestsPerSecond: number;
  readonly settleMs: number;
  /** The bare emulator's medians of every hop added up. */
  readonly wholeBound: number;
  /** The hop furthest above its bound (median - bound). */
  readonly worst: { readonly label: string; readonly median: number; readonly bound: number };
}

type Out = (line?: string) => void;

/** What this section has started and not stopped yet (for a run that is interrupted). */
const running = new Set<{ stop(): Promise<void> }>();

/** Stop the emulators and the stack this section started (on Ctrl-C or a failure). */
export async function stopLocalSection(): Promise<void> {
  const all = [...running];
  running.clear();
  await Promise.allSettled(all.map((r) => r.stop()));
}

/** Registers one stack at a time in `running` (the one passed last; undefined: none). */
function tracker(): (env: LocalEnvironment | undefined) => void {
  let tracked: LocalEnvironment | undefined;
  return (env) => {
    if (tracked) running.delete(tracked);
    tracked = env;
    if (env) running.add(env);
  };
}

/**
 * `npm run bench -- tenants`: only the tenants measurement of this section (./tenants.ts), on a
 * stack of its own and then on one without tenant lanes.
 */
export async function runTenantsSection(out: Out): Promise<TenantsResult | undefined> {
  const delivered = new Map<string, number>();
  const env = await startLocal({
    onDelivery: (d: LocalDelivery) => {
      if (!delivered.has(d.conversationId)) delivered.set(d.conversationId, performance.now());
    },
  });
  running.add(env);
  try {
    return await measureTenants(env, delivered, out, tracker());
  } finally {
    running.delete(env);
    await env.stop();
  }
}

const HOP_SAMPLES = 25;
const BOUND_SAMPLES = 25;
const IDLE_WINDOW_MS = 6000;

/** Labels of the hops, in path order, with the emulator bound each is compared with. */
const HOPS: [keyof HopSample, string, keyof Bounds | undefined][] = [
  ["commitToRelay", "commit -> relay invoked (stream read)", "stream"],
  ["relayToBuffer", "relay -> buffer queue received", "putEvents"],
  ["putEventsCall", "  of which the relay's PutEvents call", undefined],
  ["bufferToDispatched", "buffer -> dispatch sent to FIFO", "send"],
  ["dispatchedToConsumer", "dispatch's send -> FIFO consumer invoked", "sendToReceive"],
  ["consumerCommit", "consumer invoked -> committed", "transact"],
  ["whole", "whole path: commit -> consumer committed", undefined],
];
const HOP_KEYS = HOPS.map(([key]) => key);

export async function runLocalSection(out: Out): Promise<LocalResult> {
  let mark = performance.now();
  const lap = () => {
    const ms = performance.now() - mark;
    mark = performance.now();
    return ms;
  };
  const bare = await bareBounds();
  out(`emulator bounds on a bare moto_server measured in ${fmt(lap() / 1000, 1)} s`);
  const probe = new WireProbe();
  const delivered = new Map<string, number>();
  const steps = new Map<string, number>();
  const fill = new BatchFill();
  const env = await startProbed(probe, steps, fill, delivered);
  running.add(env);
  try {
    attachProbe(probe, env);
    const t = env.timings;
    out(
      `local stack up in ${fmt(lap() / 1000, 1)} s: moto ${fmtInt(t.emulator)} ms, synth ${fmtInt(t.synth)} ms, deploy ${fmtInt(t.deploy)} ms (${env.deployment.resources.size} resources), ${env.deployment.functions.length} functions (on the SDK clients), ${env.deployment.mappings.length} mappings, ${env.deployment.pipes.length} pipes`,
    );
    const settle = await measureSettle(env, probe, out);
    const idle = await window(
      env,
      probe,
      IDLE_WINDOW_MS,
      () => new Promise((r) => setTimeout(r, IDLE_WINDOW_MS)),
    );
    printWindow(out, `idle stack, ${fmt(IDLE_WINDOW_MS / 1000, 0)} s`, idle);
    const stackBounds = await measureBounds(env.endpoint, BOUND_SAMPLES);
    out();
    const samples = await sampleHops(env, probe, HOP_SAMPLES);
    const hops = hopTable(samples, HOP_KEYS);
    printHops(out, hops, bare, stackBounds);
    out();
    const b = await measureBurst(env, probe, fill, out);
    await env.runtime.idle();
    const conversation = await conversations(env, delivered, steps, out);
    const tenants = await measureTenants(env, delivered, out, tracker());
    return {
      hops,
      bare,
      burst: b,
      conversation,
      ...(tenants ? { tenants } : {}),
      idleRequestsPerSecond: idle.rates.reduce((a, [, r]) => a + r, 0),
      settleMs: settle,
      wholeBound: wholeBoundOf(bare),
      worst: worstHop(hops, bare),
    };
  } finally {
    running.delete(env);
    await env.stop();
  }
}

/**
 * The section's stack. Its functions run on the emulator's SDK clients, which the probe is
 * attached to: it sees their PutEvents and SendMessageBatch calls, which split the hops.
 */
function startProbed(
  probe: WireProbe,
  steps: Map<string, number>,
  fill: BatchFill,
  delivered: Map<string, number>,
): Promise<LocalEnvironment> {
  return startLocal({
    onEvent: (event) => observe(probe, steps, fill, event),
    onDelivery: (d: LocalDelivery) => {
      if (!delivered.has(d.conversationId)) delivered.set(d.conversationId, performance.now());
    },
  });
}

/** 50 order keys × 4 events in order, committed all at once: throughput, hops, calls and CPU. */
async function measureBurst(
  env: LocalEnvironment,
  probe: WireProbe,
  fill: BatchFill,
  out: Out,
): Promise<BurstResult> {
  fill.reset();
  const load = await window(env, probe, 0, () => burst(env, probe, 50, 4));
  const b = load.result;
  out(
    `burst: ${b.events} events over ${b.keys} order keys (each key's events in order), committed in ${fmt(b.commitSeconds, 1)} s, all consumed by ${HOP_GROUP} after ${fmt(b.seconds, 1)} s: ${fmt(b.events / b.seconds, 1)} events/s; commit -> consumed median ${fmtInt(b.latency.p50)} ms, p95 ${fmtInt(b.latency.p95)} ms`,
  );
  const hops = hopTable(b.hops, HOP_KEYS);
  out(
    `  its hops, median / p95 ms: ${HOPS.map(([key, label]) => `${label.trim()} ${fmtInt(hops[key].p50)} / ${fmtInt(hops[key].p95)}`).join("; ")}`,
  );
  out(`  ${fill.describe()}`);
  printWindow(out, "under the burst", load);
  return b;
}

/**
 * How full the relay's PutEvents, its SendMessageBatch calls to relay-delivered groups and the
 * dispatchers' SendMessageBatch calls are.
 */
class BatchFill {
  private relayed = { entries: 0, calls: 0 };
  private sentByRelay = { entries: 0, calls: 0 };
  private dispatched = { entries: 0, calls: 0 };

  reset(): void {
    this.relayed = { entries: 0, calls: 0 };
    this.sentByRelay = { entries: 0, calls: 0 };
    this.dispatched = { entries: 0, calls: 0 };
  }

  observe(event: RuntimeEvent): void {
    if (event.kind === "relayed") {
      const r = event.report as {
        published?: number;
        calls?: number;
        direct?: { delivered: number; calls: number };
      };
      this.relayed.entries += r.published ?? 0;
      this.relayed.calls += r.calls ?? 0;
      this.sentByRelay.entries += r.direct?.delivered ?? 0;
      this.sentByRelay.calls += r.direct?.calls ?? 0;
    } else if (event.kind === "dispatched") {
      const r = event.report as { sent?: number; calls?: number };
      this.dispatched.entries += r.sent ?? 0;
      this.dispatched.calls += r.calls ?? 0;
    }
  }

  describe(): string {
    const per = (t: { entries: number; calls: number }) =>
      `${fmtInt(t.entries)} in ${fmtInt(t.calls)} calls (${fmt(t.entries / Math.max(1, t.calls), 1)} per call, at most 10)`;
    return `batches: relay PutEvents ${per(this.relayed)}; relay SendMessageBatch ${per(this.sentByRelay)}; dispatch SendMessageBatch ${per(this.dispatched)}`;
  }
}

async function bareBounds(): Promise<Bounds> {
  const moto = await startMoto();
  running.add(moto);
  try {
    return await measureBounds(moto.endpoint, BOUND_SAMPLES);
  } finally {
    running.delete(moto);
    await moto.stop();
  }
}

function observe(
  probe: WireProbe,
  steps: Map<string, number>,
  fill: BatchFill,
  event: RuntimeEvent,
): void {
  fill.observe(event);
  if (event.kind !== "consumed") return;
  const result = event.result as ConsumeResult | { error: unknown };
  if ("error" in result) return;
  probe.mark(result.event.event_id, `consumed:${event.group}`);
  const correlation = result.event.correlation_id;
  steps.set(correlation, (steps.get(correlation) ?? 0) + 1);
}

/**
 * The handlers and the runtime share the environment's clients; the stream poller has its own
 * (a private field of the runtime): when it is not there, stream reads are not counted and the
 * first hop is not split.
 */
export function attachProbe(probe: WireProbe, env: LocalEnvironment): void {
  probe.attach("sqs", env.clients.sqs);
  probe.attach("dynamodb", env.clients.dynamodb);
  probe.attach("eventbridge", env.clients.eventbridge);
  if (env.clients.sns) probe.attach("sns", env.clients.sns);
  const streams = (env.runtime as unknown as { streams?: Probed }).streams;
  if (streams?.middlewareStack) probe.attach("streams", streams);
}

/** How long the runtime's idle() takes on a settled stack, and the calls it makes meanwhile. */
async function measureSettle(env: LocalEnvironment, probe: WireProbe, out: Out): Promise<number> {
  await env.runtime.idle();
  const w = await window(env, probe, 0, () => env.runtime.idle());
  const attributes = w.rates.find(([op]) => op === "sqs.GetQueueAttributes")?.[1] ?? 0;
  out(
    `runtime.idle() on a settled stack returns after ${fmtInt(w.ms)} ms; meanwhile ${fmt(attributes, 1)} GetQueueAttributes/s (idle() itself and backpressure reads)`,
  );
  const url = mappedQueueUrls(env.deployment)[0] ?? "";
  const fresh = emulatorClients(env.endpoint, env.region);
  try {
    const shared = await pingQueue(env.clients.sqs, url, 25);
    const own = await pingQueue(fresh.sqs, url, 25);
    const show = (l: Latency) => `${fmt(l.p50, 1)} / ${fmtInt(l.p95)} / ${fmtInt(l.max)}`;
    out(
      `25 GetQueueAttributes one after another, median / p95 / max ms: ${show(shared)} through the SQS client the runtime's pollers (long polls of 5 s) and the handlers share (SDK default: 50 sockets per client), ${show(own)} through a fresh client`,
    );
  } finally {
    for (const c of [fresh.dynamodb, fresh.sqs, fresh.eventbridge, fresh.sns]) c?.destroy();
  }
  return w.ms;
}

interface Window<T> {
  readonly result: T;
  readonly ms: number;
  readonly rates: [string, number][];
  readonly nodeCpu: number;
  readonly motoCpu: number | undefined;
  readonly peakSqs: number;
  /** Mean duration of a call per operation, as the caller sees it (queueing for a socket included). */
  readonly meanMs: Map<string, number>;
}

function meanCallMs(
  calls0: Map<string, number>,
  calls1: Map<string, number>,
  ms0: Map<string, number>,
  ms1: Map<string, number>,
): Map<string, number> {
  const mean = new Map<string, number>();
  for (const [op, n] of calls1) {
    const count = n - (calls0.get(op) ?? 0);
    if (count > 0) mean.set(op, ((ms1.get(op) ?? 0) - (ms0.get(op) ?? 0)) / count);
  }
  return mean;
}

/** Run `work`, lasting at least `minMs`, and record calls per second and CPU meanwhile. */
async function window<T>(
  env: LocalEnvironment,
  probe: WireProbe,
  minMs: number,
  work: () => Promise<T>,
): Promise<Window<T>> {
  const before = probe.counts();
  const spent = probe.durations();
  const cpu = cpuNow(env.moto?.pid);
  probe.resetPeaks();
  const started = performance.now();
  const result = await work();
  const rest = minMs - (performance.now() - started);
  if (rest > 0) await new Promise((r) => setTimeout(r, rest));
  const ms = performance.now() - started;
  const after = cpuNow(env.moto?.pid);
  return {
    result,
    ms,
    rates: ratesBetween(before, probe.counts(), ms / 1000),
    meanMs: meanCallMs(before, probe.counts(), spent, probe.durations()),
    nodeCpu: (after.node - cpu.node) / ms,
    motoCpu:
      after.moto !== undefined && cpu.moto !== undefined ? (after.moto - cpu.moto) / ms : undefined,
    peakSqs: probe.peakInflight("sqs"),
  };
}

function printWindow(out: Out, label: string, w: Window<unknown>): void {
  const total = w.rates.reduce((a, [, r]) => a + r, 0);
  const cores = (x: number | undefined) => (x === undefined ? "n/a" : `${fmt(x, 2)} cores`);
  out(
    `${label}: ${fmtInt(total)} calls/s to the emulator; CPU node ${cores(w.nodeCpu)}, moto ${cores(w.motoCpu)}; up to ${w.peakSqs} SQS calls (long polls included) in flight at once on the shared SQS client`,
  );
  out(
    `  calls/s (mean ms per call): ${w.rates.map(([op, r]) => `${op} ${fmt(r, 1)} (${fmtInt(w.meanMs.get(op) ?? 0)})`).join(", ")}`,
  );
}

function wholeBoundOf(b: Bounds): number {
  return b.stream.p50 + b.putEvents.p50 + b.send.p50 + b.fifo.p50 + b.transact.p50;
}

function worstHop(hops: Record<keyof HopSample, Latency>, bare: Bounds): LocalResult["worst"] {
  const rows = HOPS.flatMap(([key, label, bound]) =>
    bound ? [{ label, median: hops[key].p50, bound: bare[bound].p50 }] : [],
  );
  return rows.reduce((a, b) => (b.median - b.bound > a.median - a.bound ? b : a));
}

function printHops(
  out: Out,
  hops: Record<keyof HopSample, Latency>,
  bare: Bounds,
  stack: Bounds,
): void {
  out(
    `per hop, ${HOP_SAMPLES} events one at a time (${HOP_GROUP}: events table stream -> relay -> events bus -> buffer queue -> dispatch -> FIFO queue -> consumer), ms:`,
  );
  const wholeBound = wholeBoundOf(bare);
  const rows = HOPS.map(([key, label, bound]) => {
    const h = hops[key];
    const b = bound ? bare[bound].p50 : key === "whole" ? wholeBound : Number.NaN;
    const s = bound ? stack[bound].p50 : Number.NaN;
    return [
      label,
      String(h.n),
      fmtInt(h.p50),
      fmtInt(h.p95),
      Number.isNaN(b) ? "" : fmt(b, 1),
      Number.isNaN(s) ? "" : fmt(s, 1),
      Number.isNaN(b) || b <= 0 ? "" : `${fmt(h.p50 / b, 1)}×`,
    ];
  });
  for (const line of renderTable(
    ["hop", "n", "median", "p95", "bound (bare moto)", "bound (stack's moto)", "median / bound"],
    rows,
    ["l", "r", "r", "r", "r", "r", "r"],
  ))
    out(`  ${line}`);
  out(
    "  bounds, medians with fresh clients: stream = PutItem until GetRecords (back to back) returns it; putEvents = PutEvents until a parked long poll on the rule's SQS target returns; send = one FIFO SendMessage; sendToReceive = from a FIFO SendMessage's call until a parked long poll returns it; fifo = the same from the call's response; transact = a 3-item TransactWriteItems; whole = stream + putEvents + send + fifo + transact",
  );
}

async function conversations(
  env: LocalEnvironment,
  delivered: Map<string, number>,
  steps: Map<string, number>,
  out: Out,
): Promise<Latency & { steps: number }> {
  if (!hasConversation(env)) return { ...percentiles([]), steps: 0 };
  const samples: ConversationSample[] = [];
  for (let i = 0; i < 3; i++) {
    samples.push(await conversationPath(env, delivered, steps));
    await env.runtime.idle();
  }
  const latency = percentiles(samples.map((s) => s.ms));
  const hopsPerMessage = Math.max(...samples.map((s) => s.steps));
  out(
    `conversation: a customer's message put on the events bus until the channel delivers the reply, ${samples.length} messages one at a time: ${samples.map((s) => fmtInt(s.ms)).join(", ")} ms (median ${fmtInt(latency.p50)} ms); up to ${hopsPerMessage} consumer invocations on the message's correlation by then`,
  );
  return { ...latency, steps: hopsPerMessage };
}
