import {
  dollarsFor,
  IDLE_POLLS_PER_MAPPING_MINUTE,
  LAMBDA_ARM64_TIERS,
  PRICES,
  SQS_FIFO_TIERS,
  SQS_STANDARD_TIERS,
  temporalMonth,
  tieredDollars,
} from "./prices";

/**
 * What one flow (a support turn, a content run, a refund review) costs in dollars: on AgentBus
 * from what the bench metered while the local stack played it, and on the peers (Step Functions
 * Standard and Express, Lambda durable functions, Temporal Cloud) from the steps the flow would
 * take there (FLOW_SHAPES). Pure arithmetic over ./prices.
 */

/** What AgentBus used for one flow, as AWS bills it. */
export interface FlowUsage {
  readonly dynamoWriteUnits: number;
  readonly dynamoReadUnits: number;
  readonly sqsStandardRequests: number;
  readonly sqsFifoRequests: number;
  readonly eventBridgeEvents: number;
  readonly pipesRequests: number;
  readonly lambdaRequests: number;
  readonly lambdaGbSeconds: { readonly arm64: number; readonly x86_64: number };
  readonly kmsRequests: number;
  /** Deliveries the consumer groups handled: the flow's consumed events. */
  readonly consumedEvents: number;
  /** GB-seconds of the consumer groups' invocations alone: the flow's work, without the hops. */
  readonly workGbSeconds: number;
  /** Seconds the consumer groups' handlers ran: the flow's work, end to end. */
  readonly workSeconds: number;
}

/** A flow that used nothing. */
export function zeroUsage(): FlowUsage {
  return {
    dynamoWriteUnits: 0,
    dynamoReadUnits: 0,
    sqsStandardRequests: 0,
    sqsFifoRequests: 0,
    eventBridgeEvents: 0,
    pipesRequests: 0,
    lambdaRequests: 0,
    lambdaGbSeconds: { arm64: 0, x86_64: 0 },
    kmsRequests: 0,
    consumedEvents: 0,
    workGbSeconds: 0,
    workSeconds: 0,
  };
}

export type Lines = Record<string, number>;

/** US$ per line for one flow on AgentBus, at list prices (first tiers). */
export function agentBusDollars(u: FlowUsage): Lines {
  return {
    "DynamoDB writes": dollarsFor(PRICES.dynamoWrite, u.dynamoWriteUnits),
    "DynamoDB reads": dollarsFor(PRICES.dynamoRead, u.dynamoReadUnits),
    "SQS standard": dollarsFor(PRICES.sqsStandard, u.sqsStandardRequests),
    "SQS FIFO": dollarsFor(PRICES.sqsFifo, u.sqsFifoRequests),
    "EventBridge events": dollarsFor(PRICES.eventBridgeEvents, u.eventBridgeEvents),
    Pipes: dollarsFor(PRICES.pipesRequests, u.pipesRequests),
    "Lambda requests": dollarsFor(PRICES.lambdaRequests, u.lambdaRequests),
    "Lambda duration":
      dollarsFor(PRICES.lambdaArm64, u.lambdaGbSeconds.arm64) +
      dollarsFor(PRICES.lambdaX86, u.lambdaGbSeconds.x86_64),
    KMS: dollarsFor(PRICES.kmsRequests, u.kmsRequests),
  };
}

export const total = (lines: Lines) => Object.values(lines).reduce((a, b) => a + b, 0);

/**
 * US$ per line for one flow when the stack's tables are provisioned (`tablesCapacity`) and a
 * sustained load keeps `utilization` (0..1) of their capacity in use, as auto scaling aims to: a
 * capacity unit held for an hour serves 3,600 units, of which that share is used. Bursts beyond
 * what auto scaling follows, and each table's and index's minimum capacity (a monthly cost
 * whatever the load), are not per flow.
 */
export function agentBusProvisionedDollars(u: FlowUsage, utilization: number): Lines {
  if (!(utilization > 0 && utilization <= 1))
    throw new Error(`utilization must be above 0 and at most 1, not ${utilization}`);
  const unitHours = (units: number) => units / SECONDS_PER_HOUR / utilization;
  return {
    ...agentBusDollars(u),
    "DynamoDB writes": dollarsFor(PRICES.dynamoWriteCapacity, unitHours(u.dynamoWriteUnits)),
    "DynamoDB reads": dollarsFor(PRICES.dynamoReadCapacity, unitHours(u.dynamoReadUnits)),
  };
}

const SECONDS_PER_HOUR = 3600;

/** What a table or index held at one read and one write unit costs a month (its minimum). */
export function minimumCapacityMonth(): number {
  const hours = SECONDS_PER_MONTH / SECONDS_PER_HOUR;
  return (
    dollarsFor(PRICES.dynamoWriteCapacity, hours) + dollarsFor(PRICES.dynamoReadCapacity, hours)
  );
}

/**
 * A flow as the peers would run it: its steps, each a Task state (Step Functions), a step
 * (durable functions) or an Activity (Temporal), how many of them run in parallel blocks, and
 * how many child workflows it starts (some of its steps run in them).
 */
export interface FlowShape {
  readonly flow: string;
  readonly steps: readonly string[];
  /** Parallel and Map states (Step Functions) / parallel blocks (durable functions) the flow has. */
  readonly parallelBlocks: number;
  /**
   * Child workflows it starts: a nested execution (Step Functions: the parent's Task state that
   * starts it, and for Express its own request), a chained durable function (the parent's
   * invoke, the child's start and its invocation), a child workflow (Temporal: its start).
   */
  readonly childRuns: number;
  /**
   * What the peers' own tools counted for the flow as it was played (bin/bench/peer-*.ts); a peer
   * without a count is priced on the assumed count from the steps.
   */
  readonly counted?: PeerCounts;
}

/** The peers' figures counted for one flow, rather than assumed from its steps. */
export interface PeerCounts {
  /** State transitions of its state machine's execution (and nested ones), from its ASL. */
  readonly stepFunctions?: { readonly transitions: number; readonly executions: number };
  /** Its durable function run on AWS's testing SDK. */
  readonly durable?: {
    readonly operations: number;
    readonly checkpointBytes: number;
    readonly sdk: string;
  };
}

/**
 * The reference flows' steps, as a workflow engine would run them: the counting the peers' cost
 * stands on. A content run's steps depend on what it did (./contentRunShape).
 */
export const FLOW_SHAPES: readonly FlowShape[] = [
  {
    flow: "support turn",
    steps: ["route", "look up order", "generate reply", "send reply"],
    parallelBlocks: 0,
    childRuns: 0,
  },
  {
    flow: "refund review",
    steps: [
      "route",
      "model: plan",
      "get order",
      "get refund status",
      "issue refund",
      "model: answer",
      "generate reply",
      "send reply",
    ],
    parallelBlocks: 0,
    childRuns: 0,
  },
];

/**
 * What a content run did: the claims its fact check checked (map items), its review rounds, and
 * the child runs it started (long form's fact check, from version 4).
 */
export interface ContentRunPlayed {
  readonly claims: number;
  readonly rounds: number;
  readonly childRuns?: number;
}

/**
 * A content run as a workflow engine would run it: topic selection, one fact-check step per claim
 * in a Map, and writing and review once per round (a loop). Quick news runs the Map beside
 * writing (a Parallel state, so two blocks); long form one after the other (the Map alone),
 * inside a child workflow when its run started one.
 */
export function contentRunShape(
  kind: "quick news" | "long form",
  { claims, rounds, childRuns = 0 }: ContentRunPlayed,
): FlowShape {
  return {
    flow: `content run, ${kind}`,
    steps: [
      "select topic",
      ...Array.from({ length: claims }, (_, i) => `fact check claim ${i + 1}`),
      ...Array.from({ length: rounds }, () => ["write", "review"]).flat(),
    ],
    parallelBlocks: kind === "quick news" ? 2 : 1,
    childRuns,
  };
}

/** The units a peer bills one flow in, by how FLOW_SHAPES counts it. */
export interface PeerCount {
  readonly peer: string;
  readonly counted: string;
  readonly dollars: number;
}

/** Express bills memory in 64 MB chunks: a flow's small state fits the first. */
const EXPRESS_MEMORY_GB = 64 / 1024;

/**
 * The same flow on each peer. Steps that do work run on Lambda for Step Functions and durable
 * functions (one request each for Step Functions, one invocation for the durable function) with
 * the GB-seconds AgentBus's consumer groups took for the same work (`workGbSeconds`); Temporal's
 * workers run wherever they are hosted, so its column is its Actions alone.
 */
export function peerCosts(shape: FlowShape, usage: FlowUsage): PeerCount[] {
  const n = shape.steps.length;
  const children = shape.childRuns;
  const { stepFunctions: sfn, durable } = shape.counted ?? {};
  const transitions = sfn?.transitions ?? n + shape.parallelBlocks + children;
  const work = dollarsFor(PRICES.lambdaArm64, usage.workGbSeconds);
  const tasks = dollarsFor(PRICES.lambdaRequests, n) + work;
  const expressSeconds = Math.ceil(usage.workSeconds * 10) / 10;
  const requests = sfn?.executions ?? 1 + children;
  const operations = durable?.operations ?? 1 + n + shape.parallelBlocks + 2 * children;
  const invocations = 1 + children;
  const actions = 1 + n + children;
  const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`;
  const parallel = (what: string) =>
    shape.parallelBlocks ? ` + ${shape.parallelBlocks} ${what}` : "";
  const nested = (what: string) => (children ? ` + ${children} ${what}` : "");
  const sfnCounted = sfn
    ? `${transitions} transitions (counted from its ASL)`
    : `${transitions} transitions (assumed: ${n} Task states${parallel("Parallel/Map")}${nested("child execution start")})`;
  const durableCounted = durable
    ? `${operations} operations, ${durable.checkpointBytes} checkpoint bytes (counted: ${durable.sdk}) + ${plural(invocations, "invocation")}`
    : `${operations} operations (assumed: start + ${n} steps${parallel("parallel")}${nested("child invoke + child start")}) + ${plural(invocations, "invocation")}`;
  return [
    {
      peer: "Step Functions Standard",
      counted: `${sfnCounted} + ${n} Lambda tasks`,
      dollars: dollarsFor(PRICES.stepFunctionsTransitions, transitions) + tasks,
    },
    {
      peer: "Step Functions Express",
      counted: `${plural(requests, "request")}${sfn ? " (counted)" : ""} + ${expressSeconds.toFixed(1)} s × 64 MB + ${n} Lambda tasks`,
      dollars:
        dollarsFor(PRICES.stepFunctionsExpressRequests, requests) +
        dollarsFor(PRICES.stepFunctionsExpressDuration, expressSeconds * EXPRESS_MEMORY_GB) +
        tasks,
    },
    {
      peer: "Lambda durable functions",
      counted: durableCounted,
      dollars:
        dollarsFor(PRICES.durableOperations, operations) +
        dollarsFor(PRICES.lambdaRequests, invocations) +
        work,
    },
    {
      peer: "Temporal Cloud",
      counted: `${actions} Actions (assumed: workflow start + ${n} Activity starts${nested("child workflow start")})`,
      dollars: dollarsFor(PRICES.temporalActions, actions),
    },
  ];
}

/**
 * How far a flow's DynamoDB writes are from a peer's price: the write units that would make
 * AgentBus cost what `peer` does with every other line as metered (what the peer costs, less
 * what AgentBus spends on everything but its writes, at the write unit's price; 0 when the rest
 * alone costs more than the peer, so no cut in writes alone reaches it).
 */
export interface WriteBudget {
  readonly peer: System;
  readonly peerDollars: number;
  /** AgentBus's dollars for the flow. */
  readonly dollars: number;
  /** AgentBus's dollars for the flow, its DynamoDB writes left out. */
  readonly otherDollars: number;
  readonly writeUnits: number;
  readonly writeUnitsAtPeer: number;
}

export function writeBudget(
  shape: FlowShape,
  usage: FlowUsage,
  peer: Exclude<System, "AgentBus"> = "Lambda durable functions",
): WriteBudget {
  const peerDollars = peerCosts(shape, usage).find((p) => p.peer === peer)?.dollars;
  if (peerDollars === undefined) throw new Error(`no price for ${peer}`);
  const lines = agentBusDollars(usage);
  const dollars = total(lines);
  const otherDollars = dollars - (lines["DynamoDB writes"] ?? 0);
  const perUnit = dollarsFor(PRICES.dynamoWrite, 1);
  return {
    peer,
    peerDollars,
    dollars,
    otherDollars,
    writeUnits: usage.dynamoWriteUnits,
    writeUnitsAtPeer: Math.max(0, (peerDollars - otherDollars) / perUnit),
  };
}

/** One flow of the mix the bench played, with its usage and how many times a mix holds it. */
export interface MixedFlow {
  readonly shape: FlowShape;
  readonly usage: FlowUsage;
}

/** The SQS event source mappings of the stack, by queue type: what idles at a fixed cost. */
export interface Mappings {
  readonly standard: number;
  readonly fifo: number;
}

/** The AgentBus lines priced through volume tiers at a month's volume rather than flat. */
const TIERED_LINES = ["SQS standard", "SQS FIFO", "Lambda duration"] as const;

const MINUTES_PER_MONTH = 30 * 24 * 60;
export const SECONDS_PER_MONTH = MINUTES_PER_MONTH * 60;

export const SYSTEMS = [
  "AgentBus",
  "Step Functions Standard",
  "Step Functions Express",
  "Lambda durable functions",
  "Temporal Cloud",
] as const;
export type System = (typeof SYSTEMS)[number];

/**
 * A month of AgentBus at `mixes` of the flows: request and unit prices flat, SQS requests and
 * arm64 GB-seconds through their volume tiers, and the idle polls of every SQS mapping
 * (IDLE_POLLS_PER_MAPPING_MINUTE) all month long at every load: an upper bound, as a busy
 * queue's polls return messages instead.
 */
export function agentBusMonth(flows: readonly MixedFlow[], mixes: number, m: Mappings): number {
  const sum = (f: (u: FlowUsage) => number) => flows.reduce((n, x) => n + f(x.usage), 0) * mixes;
  const idle = IDLE_POLLS_PER_MAPPING_MINUTE * MINUTES_PER_MONTH;
  const flat = flows.reduce((n, x) => {
    const lines = agentBusDollars(x.usage);
    const tiered = TIERED_LINES.reduce((t, line) => t + (lines[line] ?? 0), 0);
    return n + total(lines) - tiered;
  }, 0);
  return (
    flat * mixes +
    tieredDollars(SQS_STANDARD_TIERS, sum((u) => u.sqsStandardRequests) + m.standard * idle) +
    tieredDollars(SQS_FIFO_TIERS, sum((u) => u.sqsFifoRequests) + m.fifo * idle) +
    tieredDollars(
      LAMBDA_ARM64_TIERS,
      sum((u) => u.lambdaGbSeconds.arm64),
    ) +
    dollarsFor(
      PRICES.lambdaX86,
      sum((u) => u.lambdaGbSeconds.x86_64),
    )
  );
}

/** A month of each system at `mixes` of the flows, in US$. */
export function monthOf(
  flows: readonly MixedFlow[],
  mixes: number,
  m: Mappings,
): Record<System, number> {
  const peer = (name: string) =>
    flows.reduce(
      (n, x) => n + (peerCosts(x.shape, x.usage).find((p) => p.peer === name)?.dollars ?? 0),
      0,
    ) * mixes;
  const actions = flows.reduce((n, x) => n + 1 + x.shape.steps.length, 0) * mixes;
  return {
    AgentBus: agentBusMonth(flows, mixes, m),
    "Step Functions Standard": peer("Step Functions Standard"),
    "Step Functions Express": peer("Step Functions Express"),
    "Lambda durable functions": peer("Lambda durable functions"),
    // Its workers' compute is not Temporal's bill: Actions through their tiers, plus the plan.
    "Temporal Cloud": temporalMonth(actions),
  };
}

/**
 * US$ per consumed event (AgentBus's deliveries of the mix) on each system, with the mix played
 * `mixesPerMonth × load` times a month.
 */
export function perConsumedEvent(
  flows: readonly MixedFlow[],
  mixesPerMonth: number,
  load: number,
  m: Mappings,
): Record<System, number> {
  if (!(mixesPerMonth > 0) || !(load > 0))
    throw new Error(`a load needs a positive rate, not ${mixesPerMonth} mixes a month × ${load}`);
  const mixes = mixesPerMonth * load;
  const events = flows.reduce((n, x) => n + x.usage.consumedEvents, 0) * mixes;
  const month = monthOf(flows, mixes, m);
  return Object.fromEntries(SYSTEMS.map((s) => [s, month[s] / events])) as Record<System, number>;
}
