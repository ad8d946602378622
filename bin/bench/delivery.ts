import { ulid } from "ulid";
import { taskProjectionDelivered } from "../../lib/dev/local/delivered-topology";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import {
  agentBusDollars,
  type FlowUsage,
  type Lines,
  total,
} from "../../lib/dev/metering/flow-cost";
import { DELIVERIES, type Delivery } from "../../lib/infra/constructs/consumer-group-rules";
import { countInvocation, metersOf, noInvocations, unbilledScopes, usageOf } from "./cost";
import { attachProbe } from "./local";
import type { Latency } from "./local-bounds";
import { WireProbe } from "./local-probe";
import { burst, type HopSample, hopTable, sampleHops } from "./local-runs";
import { fmt, fmtInt, renderTable } from "./stats";

/**
 * `npm run bench` section 7 (`npm run bench -- delivery`): the same FIFO group (the task
 * projection) delivered each way the topology offers, on a stack of its own each, in one run:
 * latency per hop of one event at a time, and what a burst costs in dollars per million events
 * delivered to the group, at the prices section 6 uses (lib/dev/metering/prices.ts). Everything
 * but the delivery hop is the same on every stack, so the differences are the delivery's.
 */

type Out = (line?: string) => void;

const HOP_SAMPLES = 20;
const BURST_KEYS = 25;
const BURST_PER_KEY = 4;

/** What one delivery measured. */
export interface DeliveryRun {
  readonly delivery: Delivery;
  readonly hops: Record<keyof HopSample, Latency>;
  readonly usage: FlowUsage;
  /** Events the burst committed: each delivered to the group once (what the dollars divide by). */
  readonly events: number;
  /** Sends to the FIFO queue by a subscriber of the new bus (0 for the other deliveries). */
  readonly subscriberDeliveries: number;
  /** Per million events delivered in the burst, where batches fill. */
  readonly dollarsPerMillion: Lines;
  /** Per million events delivered one at a time (the hop samples), every batch of one. */
  readonly aloneDollarsPerMillion: Lines;
}

export interface DeliveryResult {
  readonly runs: readonly DeliveryRun[];
}

let running: LocalEnvironment | undefined;

export async function stopDeliverySection(): Promise<void> {
  const env = running;
  running = undefined;
  await env?.stop();
}

export async function runDeliverySection(out: Out): Promise<DeliveryResult> {
  const runs: DeliveryRun[] = [];
  // The task projection reads a client's unsequenced feedback, which no stream holds: it cannot
  // be stream-delivered, and the stream is measured by the cost section's conversation projection.
  for (const delivery of DELIVERIES.filter((d) => d !== "stream")) {
    const mark = performance.now();
    runs.push(await measureDelivery(delivery));
    out(
      `${delivery}: measured on a stack of its own in ${fmt((performance.now() - mark) / 1000, 1)} s`,
    );
  }
  printHops(out, runs);
  printDollars(out, runs);
  return { runs };
}

/** A stack whose only group is the task projection, delivered `delivery`. */
async function stackFor(delivery: Delivery, onEvent: (e: RuntimeEvent) => void) {
  const topology = taskProjectionDelivered(delivery);
  const stage = `dl${ulid().slice(-6).toLowerCase()}`;
  return startLocal({ topology, stage, onEvent });
}

async function measureDelivery(delivery: Delivery): Promise<DeliveryRun> {
  const probe = new WireProbe();
  let current = noInvocations();
  let subscribed = 0;
  const onEvent = (event: RuntimeEvent) => {
    countInvocation(current, event);
    if (event.kind === "subscribed") subscribed += event.messages;
    if (event.kind !== "consumed") return;
    const result = event.result as { event?: { event_id: string } };
    probe.mark(result.event?.event_id, `consumed:${event.group}`);
  };
  running = await stackFor(delivery, onEvent);
  const env = running;
  try {
    attachProbe(probe, env);
    await env.runtime.idle();
    const meters = metersOf(env);
    const bridges = new Set(env.deployment.bridges.map((b) => b.queueUrl));
    const metered = () => usageOf(meters, current, unbilledScopes(env), bridges);
    const restart = () => {
      for (const m of meters) m.reset();
      current = noInvocations();
      subscribed = 0;
    };
    restart();
    const samples = await sampleHops(env, probe, HOP_SAMPLES);
    await env.runtime.idle();
    const alone = metered();
    restart();
    const { events } = await burst(env, probe, BURST_KEYS, BURST_PER_KEY);
    await env.runtime.idle();
    const usage = metered();
    return {
      delivery,
      hops: hopTable(samples, HOP_KEYS),
      usage,
      events,
      subscriberDeliveries: subscribed,
      dollarsPerMillion: perMillion(usage, events),
      aloneDollarsPerMillion: perMillion(alone, samples.length),
    };
  } finally {
    await stopDeliverySection();
  }
}

/**
 * Each line's dollars per million events delivered to the group: divided by the events committed,
 * not by the consumer's invocations, which count a duplicate delivery (dropped by the inbox) too.
 */
function perMillion(usage: FlowUsage, events: number): Lines {
  const lines = agentBusDollars(usage);
  const per = events > 0 ? 1e6 / events : 0;
  return Object.fromEntries(Object.entries(lines).map(([line, d]) => [line, d * per]));
}

const HOPS: [keyof HopSample, string][] = [
  ["commitToRelay", "commit -> relay invoked (stream read)"],
  ["relayToFifo", "relay -> sent to the FIFO queue (the delivery hop)"],
  ["relayToBuffer", "  relay -> buffer queue received"],
  ["bufferToDispatched", "  buffer -> sent to the FIFO queue"],
  ["dispatchedToConsumer", "send to the FIFO queue -> consumer invoked"],
  ["consumerCommit", "consumer invoked -> committed"],
  ["whole", "whole path: commit -> consumer committed"],
];
const HOP_KEYS = HOPS.map(([key]) => key);

function printHops(out: Out, runs: readonly DeliveryRun[]): void {
  out();
  out(`per hop, ${HOP_SAMPLES} events one at a time, median / p95 ms (moto, not AWS latency):`);
  const cell = (l: Latency) => (l.n === 0 ? "-" : `${fmtInt(l.p50)} / ${fmtInt(l.p95)}`);
  const classic = runs[0];
  const rows = HOPS.map(([key, label]) => [label, ...runs.map((r) => cell(r.hops[key]))]);
  if (classic)
    rows.push([
      "whole path median vs the first",
      ...runs.map((r) => `${fmt(r.hops.whole.p50 / classic.hops.whole.p50, 2)}×`),
    ]);
  for (const line of renderTable(["hop", ...runs.map((r) => r.delivery)], rows, [
    "l",
    ...runs.map(() => "r" as const),
  ]))
    out(`  ${line}`);
}

function printDollars(out: Out, runs: readonly DeliveryRun[]): void {
  out();
  out(
    `US$ per million events delivered to the group, ${HOP_SAMPLES} events one at a time (every batch of one), and a burst of ${BURST_KEYS * BURST_PER_KEY} events over ${BURST_KEYS} order keys (batches fill); everything but the delivery is the same on every stack:`,
  );
  const first = runs[0];
  const lines = Object.keys(first?.dollarsPerMillion ?? {});
  const both = (r: DeliveryRun, line: string) =>
    `${fmt(r.aloneDollarsPerMillion[line] ?? 0, 2)} | ${fmt(r.dollarsPerMillion[line] ?? 0, 2)}`;
  const rows = lines.map((line) => [line, ...runs.map((r) => both(r, line))]);
  rows.push([
    "total",
    ...runs.map(
      (r) => `${fmt(total(r.aloneDollarsPerMillion), 2)} | ${fmt(total(r.dollarsPerMillion), 2)}`,
    ),
  ]);
  if (first)
    rows.push([
      "total vs the first",
      ...runs.map(
        (r) =>
          `${fmt(total(r.aloneDollarsPerMillion) / total(first.aloneDollarsPerMillion), 2)}× | ${fmt(total(r.dollarsPerMillion) / total(first.dollarsPerMillion), 2)}×`,
      ),
    ]);
  rows.push(["events committed (burst)", ...runs.map((r) => fmtInt(r.events))]);
  rows.push([
    "consumer deliveries (burst, with duplicates)",
    ...runs.map((r) => fmtInt(r.usage.consumedEvents)),
  ]);
  rows.push([
    "new bus: subscriber sends per event (burst)",
    ...runs.map((r) => (r.subscriberDeliveries ? fmt(r.subscriberDeliveries / r.events, 2) : "-")),
  ]);
  const header = ["line (one at a time | burst)", ...runs.map((r) => r.delivery)];
  for (const line of renderTable(header, rows, ["l", ...runs.map(() => "r" as const)]))
    out(`  ${line}`);
  if (runs.some((r) => r.subscriberDeliveries > 0))
    out(
      "  not in the totals: the new bus bills ingestion and delivery per KB (and retention) at rates not in lib/dev/metering/prices.ts's sources, so the subscriber column leaves them out; each relayed event enters the new bus once, from the relay (the classic rule that forwards the topic leaves the relay's source out), and the classic bus once, for the topic's other groups (EventBridge events).",
    );
}

/** One line for the bench's summary. */
export function deliverySummary(result: DeliveryResult): string {
  const [first, ...rest] = result.runs;
  if (!first) return "7. No delivery was measured.";
  const dollars = (r: DeliveryRun) =>
    `$${fmt(total(r.aloneDollarsPerMillion), 2)}/M alone, $${fmt(total(r.dollarsPerMillion), 2)}/M in a burst`;
  const phrase = (r: DeliveryRun) =>
    `${r.delivery} ${fmtInt(r.hops.whole.p50)} ms, ${dollars(r)} (${fmt(total(r.dollarsPerMillion) / total(first.dollarsPerMillion), 2)}×)`;
  return `7. One event from commit to the task projection's commit, median on moto, and US$ per million events delivered to it (the new bus's own charges unpriced): ${first.delivery} ${fmtInt(first.hops.whole.p50)} ms, ${dollars(first)}; ${rest.map(phrase).join("; ")}.`;
}
