import { DEFAULT_LEASE_SECONDS } from "../../functions/core/agent-run-model";
import { HEARTBEAT_TARGETS_ENV } from "../../functions/core/heartbeat-routes";
import { renewalTimes } from "../../functions/handlers/heartbeat";
import { DEFAULT_LEASE_SECONDS as STARTED_LEASE_SECONDS } from "../../functions/roles/orchestrator/orchestrator";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import { type FlowUsage, zeroUsage } from "../../lib/dev/metering/flow-cost";
import { DEFAULT_AGENT_HEARTBEAT } from "../../lib/infra/agentbus-stack";
import { referenceLocalModel } from "../../test/support/reference";
import {
  countInvocation,
  metersOf,
  noInvocations,
  playedAlone,
  REPEATS,
  unbilledScopes,
} from "./cost";
import { PLAYED_FLOWS, playAlone } from "./cost-flows";
import { withoutDuration } from "./cost-print";
import { fmt, renderTable } from "./stats";

/**
 * `npm run bench -- heartbeats` (beside section 6, run alone only): what an agent's heartbeats
 * cost during long model calls. A beat takes the acknowledgement's way (straight to the
 * orchestrator's FIFO queue, its consumer, the run's lease recorded), so one beat's price is
 * measured as the acknowledgements' (`node.started`): a quick news played with them, less the
 * same run played on a stack whose agents send none (`HEARTBEAT_SECONDS=0`), per acknowledgement.
 * The model answers after MODEL_LATENCY_MS, so that the orchestrator takes an acknowledgement
 * apart from the answer after it, as it does on AWS. The beats a model call of a given length
 * sends are timed with the consumer's own rule (functions/handlers/heartbeat.ts `renewalTimes`):
 * every tick (a beat with no lease, as every beat went before) against once half of the agent's
 * lease has passed. Every beat costs the acknowledgement's requests and reads; only one that
 * moves the node's lease later costs its write (the orchestrator's `extendLease` leaves a lease
 * that already lasts that long alone, and the acknowledgement started it at 900 s). The message's
 * visibility extensions (a ChangeMessageVisibility each, on the agents' queues' timeout read from
 * the deployment) are timed the same way: every tick before, once half of the timeout has passed
 * since the receive now (a first receive, at the call's start).
 */
const MODEL_LATENCY_MS = 1_500;
/** The model call lengths the table prices, in seconds. */
const CALL_SECONDS = [10, 30, 60, 120, 300, 600, 1200] as const;

type Out = (line?: string) => void;

/**
 * The beats one model call sends under one rule, the lease writes among them, its visibility
 * extensions, and their price.
 */
export interface Beats {
  readonly beats: number;
  readonly writes: number;
  readonly extensions: number;
  /** Dollars per million model calls, without Lambda duration. */
  readonly dollars: number;
}

export interface HeartbeatRow {
  readonly callSeconds: number;
  readonly everyTick: Beats;
  readonly halfLease: Beats;
}

export interface HeartbeatsResult {
  /** One acknowledgement's usage: a beat's, its write units paid only when it moves the lease. */
  readonly beat: FlowUsage;
  /** Per million beats, without Lambda duration: every beat's requests and reads, a lease write's. */
  readonly beatDollars: { readonly reach: number; readonly write: number };
  /** Per million visibility extensions (one FIFO request each). */
  readonly extensionDollars: number;
  /** The content agents' queues' visibility timeout, in seconds. */
  readonly visibilitySeconds: number;
  /** The agent requests of a quick news (its acknowledgements): its model calls. */
  readonly calls: number;
  readonly rows: readonly HeartbeatRow[];
}

export async function runHeartbeatsSection(out: Out): Promise<HeartbeatsResult> {
  const flow = PLAYED_FLOWS.find((f) => f.flow === "content run, quick news");
  if (!flow) throw new Error("PLAYED_FLOWS has no quick news");
  out(
    `a quick news on the local stack, the model answering after ${MODEL_LATENCY_MS} ms, played once to warm up and ${REPEATS} times metered: with the agents' acknowledgements, then on a stack without heartbeats`,
  );
  const acknowledged = await played(flow, {});
  const silent = await played(flow, { HEARTBEAT_SECONDS: "0" });
  if (acknowledged.acks === 0 || silent.acks !== 0)
    throw new Error(
      `expected acknowledgements only with heartbeats, got ${acknowledged.acks} and ${silent.acks}`,
    );
  const beat = perAck(acknowledged.usage, silent.usage, acknowledged.acks);
  const reach = withoutDuration({ ...beat, dynamoWriteUnits: 0 }) * 1e6;
  const beatDollars = { reach, write: withoutDuration(beat) * 1e6 - reach };
  const extensionDollars = withoutDuration({ ...zeroUsage(), sqsFifoRequests: 1 }) * 1e6;
  const tick = DEFAULT_AGENT_HEARTBEAT.toSeconds();
  const { visibilitySeconds } = acknowledged;
  const priced = (beats: readonly number[], extended: readonly number[]): Beats => {
    const writes = leaseWrites(beats);
    const dollars =
      beats.length * beatDollars.reach +
      writes * beatDollars.write +
      extended.length * extensionDollars;
    return { beats: beats.length, writes, extensions: extended.length, dollars };
  };
  const rows = CALL_SECONDS.map((callSeconds) => {
    const everyTick = renewalTimes(callSeconds, tick, undefined);
    return {
      callSeconds,
      everyTick: priced(everyTick, everyTick),
      halfLease: priced(
        renewalTimes(callSeconds, tick, DEFAULT_LEASE_SECONDS),
        renewalTimes(callSeconds, tick, visibilitySeconds),
      ),
    };
  });
  const result = {
    beat,
    beatDollars,
    extensionDollars,
    visibilitySeconds,
    calls: acknowledged.acks,
    rows,
  };
  printHeartbeats(out, result, tick);
  return result;
}

/**
 * The flow played on a stack of its own with `envOverrides`, once to warm up and then as the cost
 * section plays it alone (./cost.ts `playedAlone`): its mean usage and acknowledgements, and the
 * shortest visibility timeout among the queues of the consumers that acknowledge.
 */
async function played(
  flow: (typeof PLAYED_FLOWS)[number],
  envOverrides: Record<string, string>,
): Promise<{ usage: FlowUsage; acks: number; visibilitySeconds: number }> {
  const tally = { current: noInvocations(), acks: 0 };
  const onEvent = (event: RuntimeEvent) => {
    countInvocation(tally.current, event);
    if (event.kind === "consumed" && event.result.event.event_type === "node.started") tally.acks++;
  };
  const env: LocalEnvironment = await startLocal({
    onEvent,
    envOverrides,
    standIns: { model: referenceLocalModel({ latencyMs: MODEL_LATENCY_MS }) },
  });
  try {
    await playAlone(env, flow);
    tally.acks = 0;
    const play = { env, tally, meters: metersOf(env), excluded: unbilledScopes(env) };
    const { usage } = await playedAlone(play, flow);
    return { usage, acks: tally.acks / REPEATS, visibilitySeconds: agentVisibility(env) };
  } finally {
    await env.stop();
  }
}

/** What one acknowledgement used: the difference of two plays' usage, per acknowledgement. */
function perAck(withAcks: FlowUsage, without: FlowUsage, acks: number): FlowUsage {
  const each = (a: number, b: number) => (a - b) / acks;
  return {
    ...withAcks,
    dynamoWriteUnits: each(withAcks.dynamoWriteUnits, without.dynamoWriteUnits),
    dynamoReadUnits: each(withAcks.dynamoReadUnits, without.dynamoReadUnits),
    sqsStandardRequests: each(withAcks.sqsStandardRequests, without.sqsStandardRequests),
    sqsFifoRequests: each(withAcks.sqsFifoRequests, without.sqsFifoRequests),
    eventBridgeEvents: each(withAcks.eventBridgeEvents, without.eventBridgeEvents),
    pipesRequests: each(withAcks.pipesRequests, without.pipesRequests),
    lambdaRequests: each(withAcks.lambdaRequests, without.lambdaRequests),
    kmsRequests: each(withAcks.kmsRequests, without.kmsRequests),
    consumedEvents: each(withAcks.consumedEvents, without.consumedEvents),
    // Duration is left out: the model's latency, not the beat, is most of it.
    lambdaGbSeconds: { arm64: 0, x86_64: 0 },
    workGbSeconds: 0,
    workSeconds: 0,
  };
}

/** The shortest visibility timeout of the consumers that send heartbeats to other groups. */
function agentVisibility(env: LocalEnvironment): number {
  const seconds = env.deployment.functions
    .filter((f) => f.environment[HEARTBEAT_TARGETS_ENV] !== undefined)
    .map((f) => Number(f.environment.VISIBILITY_TIMEOUT_SECONDS));
  if (seconds.length === 0 || !seconds.every((s) => s > 0))
    throw new Error(
      "no consumer with heartbeat targets and a visibility timeout in the deployment",
    );
  return Math.min(...seconds);
}

/**
 * How many of the beats sent at `times` (seconds after the acknowledgement) move the node's lease,
 * as the orchestrator's `extendLease` does: the acknowledgement starts it at the larger of the
 * agent's lease and the orchestrator's started lease, and a beat wants now + the agent's lease.
 */
function leaseWrites(times: readonly number[]): number {
  let expires = Math.max(DEFAULT_LEASE_SECONDS, STARTED_LEASE_SECONDS);
  let writes = 0;
  for (const at of times) {
    const wanted = at + DEFAULT_LEASE_SECONDS;
    if (wanted <= expires) continue;
    expires = wanted;
    writes++;
  }
  return writes;
}

function printHeartbeats(out: Out, r: HeartbeatsResult, tick: number): void {
  const b = r.beat;
  out(
    `one beat (an acknowledgement: ${fmt(r.calls, 1)} a run): ${fmt(b.sqsFifoRequests, 2)} FIFO requests, ${fmt(b.sqsStandardRequests, 2)} standard, ${fmt(b.lambdaRequests, 2)} Lambda requests, ${fmt(b.dynamoReadUnits, 2)} RU, ${fmt(b.eventBridgeEvents, 2)} EventBridge events: $${fmt(r.beatDollars.reach, 2)} per million beats; ${fmt(b.dynamoWriteUnits, 2)} WU more, $${fmt(r.beatDollars.write, 2)}, for one that moves the node's lease (without Lambda duration); a visibility extension $${fmt(r.extensionDollars, 2)} per million`,
  );
  out(
    `per model call: beats (lease writes among them) and visibility extensions, the heartbeat ticking every ${tick} s, the agents' lease ${DEFAULT_LEASE_SECONDS} s, a started node's ${STARTED_LEASE_SECONDS} s, the agents' queues' visibility ${r.visibilitySeconds} s; $ per million calls and per million quick news (${fmt(r.calls, 1)} agent requests, each a call that long):`,
  );
  const header = [
    "model call (s)",
    "every tick",
    "at half the term",
    "$/M calls every tick",
    "at half",
    "$/M quick news every tick",
    "at half",
    "ratio",
  ];
  const count = (x: Beats) => `${x.beats} (${x.writes}) + ${x.extensions}`;
  const rows = r.rows.map(({ callSeconds, everyTick, halfLease }) => [
    String(callSeconds),
    count(everyTick),
    count(halfLease),
    fmt(everyTick.dollars, 2),
    fmt(halfLease.dollars, 2),
    fmt(everyTick.dollars * r.calls, 2),
    fmt(halfLease.dollars * r.calls, 2),
    everyTick.dollars === 0 ? "-" : `${fmt(halfLease.dollars / everyTick.dollars, 2)}×`,
  ]);
  const right = header.map(() => "r" as const);
  for (const line of renderTable(header, rows, right)) out(line);
  out(
    "(beats (lease writes) + visibility extensions. The bench's other plays answer at once, so no beat goes in them; on AWS a model call of a minute is common.)",
  );
}

export function heartbeatsSummary(r: HeartbeatsResult): string {
  const phrase = (seconds: number) => {
    const found = r.rows.find((x) => x.callSeconds === seconds);
    if (!found) return "";
    const { everyTick, halfLease } = found;
    return `a ${seconds} s model call sends ${halfLease.beats} beats and ${halfLease.extensions} extensions, $${fmt(halfLease.dollars, 2)} per million calls (every tick: ${everyTick.beats} and ${everyTick.extensions}, $${fmt(everyTick.dollars, 2)})`;
  };
  return `A heartbeat costs $${fmt(r.beatDollars.reach, 2)} per million beats, $${fmt(r.beatDollars.write, 2)} more when it moves the lease (measured); ${phrase(60)}; ${phrase(600)}.`;
}
