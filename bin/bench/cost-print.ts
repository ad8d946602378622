import {
  agentBusDollars,
  agentBusMonth,
  type FlowUsage,
  type Mappings,
  type MixedFlow,
  peerCosts,
  SYSTEMS,
  total,
  zeroUsage,
} from "../../lib/dev/metering/flow-cost";
import {
  ASSUMPTIONS,
  IDLE_POLLS_PER_MAPPING_MINUTE,
  PRICE_REGION,
  PRICES,
  PRICES_AS_OF,
} from "../../lib/dev/metering/prices";
import { peerCountingNote } from "./peers";
import { fmt, fmtInt, renderTable } from "./stats";

type Out = (line?: string) => void;

/** Many flows of one kind in flight at once: what each used, and how full the batches were. */
export interface LoadedPlay {
  readonly flow: string;
  readonly inFlight: number;
  /** From the first start until the stack was idle again. */
  readonly seconds: number;
  /** Per flow: the whole play's usage divided by `inFlight`. */
  readonly usage: FlowUsage;
  /** By function kind: invocations that carried a batch, and the records in them. */
  readonly batches: Readonly<Record<string, { invocations: number; records: number }>>;
}

/**
 * What section 6 measured: each flow's mean usage alone and in flight with many of its kind, the
 * stack's SQS mappings.
 */
export interface CostResult {
  readonly flows: readonly MixedFlow[];
  readonly loaded: readonly LoadedPlay[];
  readonly mappings: Mappings;
  /** The functions' configured memory and architecture, as `256 MB arm64 (31 functions)`. */
  readonly functions: string;
}

/** US$ per million flows, as printed. */
const perMillion = (dollars: number) => fmt(dollars * 1e6, 2);

export function printCost(out: Out, result: CostResult): void {
  printUsage(out, result.flows);
  out();
  printSideBySide(out, result.flows);
  out();
  printCounting(out, result.flows);
  out();
  printLoaded(out, result);
  out();
  printPrices(out, result.functions);
}

function printUsage(out: Out, flows: readonly MixedFlow[]): void {
  out("What one flow used on AgentBus (mean of its plays), and what a million of them cost:");
  const header = ["flow", "consumed ev", "WU", "RU", "SQS std", "SQS FIFO", "EB events"];
  const rest = ["Pipes", "λ req", "λ GB-s", "KMS", "$/M flows", "$/consumed ev"];
  const rows = flows.map(({ shape, usage: u }) => {
    const dollars = total(agentBusDollars(u));
    return [
      shape.flow,
      fmt(u.consumedEvents, 1),
      fmt(u.dynamoWriteUnits, 1),
      fmt(u.dynamoReadUnits, 1),
      fmt(u.sqsStandardRequests, 1),
      fmt(u.sqsFifoRequests, 1),
      fmt(u.eventBridgeEvents, 1),
      fmt(u.pipesRequests, 1),
      fmt(u.lambdaRequests, 1),
      fmt(u.lambdaGbSeconds.arm64 + u.lambdaGbSeconds.x86_64, 3),
      fmt(u.kmsRequests, 1),
      perMillion(dollars),
      `$${(dollars / Math.max(1, u.consumedEvents)).toExponential(2)}`,
    ];
  });
  const cols = [...header, ...rest];
  for (const line of renderTable(cols, rows, ["l", ...cols.slice(1).map(() => "r" as const)]))
    out(line);
  out();
  out("AgentBus $/M flows by line:");
  const lines = Object.keys(agentBusDollars(flows[0]?.usage ?? zeroUsage()));
  const byLine = flows.map(({ shape, usage }) => {
    const d = agentBusDollars(usage);
    return [shape.flow, ...lines.map((l) => perMillion(d[l] ?? 0))];
  });
  for (const line of renderTable(["flow", ...lines], byLine, [
    "l",
    ...lines.map(() => "r" as const),
  ]))
    out(line);
}

function printSideBySide(out: Out, flows: readonly MixedFlow[]): void {
  out(
    `US$ per million flows, ${PRICE_REGION} list prices of ${PRICES_AS_OF} (free tiers left out):`,
  );
  const rows = flows.map(({ shape, usage }) => [
    shape.flow,
    perMillion(total(agentBusDollars(usage))),
    ...peerCosts(shape, usage).map((p) => perMillion(p.dollars)),
  ]);
  const header = ["flow", ...SYSTEMS];
  for (const line of renderTable(header, rows, ["l", ...SYSTEMS.map(() => "r" as const)]))
    out(line);
}

function printCounting(out: Out, flows: readonly MixedFlow[]): void {
  out("How the peers were counted (lib/dev/metering/flow-cost.ts FLOW_SHAPES, contentRunShape):");
  for (const { shape, usage } of flows) {
    out(`  ${shape.flow}: steps ${shape.steps.join(" → ")}`);
    for (const p of peerCosts(shape, usage)) out(`    ${p.peer}: ${p.counted}`);
  }
  out(peerCountingNote(flows.map((f) => f.shape)));
  out(
    `  Lambda tasks: one request per step plus the GB-seconds AgentBus's consumer groups took for the same work (arm64); Express duration = those handlers' seconds, rounded up to 100 ms, at 64 MB; the durable function runs every step in one invocation with the same GB-seconds (no waits, no replays); Temporal: one Action for the workflow's start and one per Activity start (no retries, no heartbeats, no timers), its workers' compute and storage not counted; a child run (long form's fact check) is a child execution started by a Task state, a durable function the parent invokes, a child workflow.`,
  );
}

/** The kinds of function whose batches the loaded column shows, in the order of the path. */
const BATCHED_KINDS = ["relay", "dispatch", "consumer"] as const;

const meanBatch = (play: LoadedPlay, kind: string) => {
  const b = play.batches[kind];
  return b && b.invocations > 0 ? fmt(b.records / b.invocations, 2) : "-";
};

function printLoaded(out: Out, result: CostResult): void {
  const inFlight = result.loaded[0]?.inFlight ?? 0;
  out(
    `Loaded: ${fmtInt(inFlight)} flows of one kind started at once, per flow (alone → loaded), and the mean records per invocation of each kind of function (its batch):`,
  );
  const header = ["flow", "$/M flows", "vs alone", "λ req", "SQS std", "SQS FIFO", "WU"];
  const kinds = BATCHED_KINDS.map((k) => `${k} batch`);
  const rows = result.loaded.map((play) => {
    const alone = result.flows.find((f) => f.shape.flow === play.flow)?.usage ?? zeroUsage();
    const loaded = play.usage;
    const both = (f: (u: FlowUsage) => number) => `${fmt(f(alone), 1)} → ${fmt(f(loaded), 1)}`;
    const dollars = total(agentBusDollars(loaded));
    return [
      play.flow,
      `${perMillion(total(agentBusDollars(alone)))} → ${perMillion(dollars)}`,
      `${fmt(dollars / Math.max(1e-12, total(agentBusDollars(alone))), 2)}×`,
      both((u) => u.lambdaRequests),
      both((u) => u.sqsStandardRequests),
      both((u) => u.sqsFifoRequests),
      both((u) => u.dynamoWriteUnits),
      ...BATCHED_KINDS.map((k) => meanBatch(play, k)),
    ];
  });
  const cols = [...header, ...kinds];
  for (const line of renderTable(cols, rows, ["l", ...cols.slice(1).map(() => "r" as const)]))
    out(line);
  const seconds = result.loaded.map((p) => `${p.flow} ${fmt(p.seconds, 1)} s`).join(", ");
  out(
    `Played on the local stack (${seconds}): one poller per event source mapping, which receives up to its batch size (at most 10) of what waits; a group with a batch size of 1 (the model-calling and sending roles) never batches. What falls with load is what is billed per request of a batch (Lambda requests and GB-seconds, SQS receives and deletes, the dispatch's sends); per-unit lines stay (DynamoDB write and read units, EventBridge events, the FIFO queues' sends per message).`,
  );
  const { standard, fifo } = result.mappings;
  // A month of no flows at all: the mappings' idle polls alone.
  const idleMonth = agentBusMonth([], 0, result.mappings);
  out(
    `Not per flow: the stack's ${standard + fifo} SQS event source mappings (${standard} standard, ${fifo} FIFO) poll idle queues at ${IDLE_POLLS_PER_MAPPING_MINUTE} requests a minute each (assumed), $${fmt(idleMonth, 2)} a month whatever the load. Tiers past 100 billion SQS requests or 7.5 billion Lambda GB-seconds a month are not reached at these volumes.`,
  );
}

function printPrices(out: Out, functions: string): void {
  out(`Prices (${PRICE_REGION}, as of ${PRICES_AS_OF}):`);
  for (const p of Object.values(PRICES))
    out(
      `  $${p.dollars} per ${fmtInt(p.per)} ${p.unit} — ${p.source}${"note" in p ? ` (${p.note})` : ""}`,
    );
  out("Assumed (not a published figure):");
  for (const a of ASSUMPTIONS) out(`  ${a}`);
  out(
    `Lambda duration: each invocation's handler time, rounded up to the ms, × the function's configured memory and at its architecture's price (from the template: ${functions}). SQS: every request of the Lambda service's pollers that returned messages, the functions' sends and the pollers' deletes, each per 64 KB chunk; one SendMessage per message an EventBridge rule delivered to a queue; empty receives are the mappings' fixed cost above. EventBridge: each PutEvents entry per 64 KB chunk (the client's start of the flow, the relay's publishes); rule deliveries to SQS in the same account are not billed by EventBridge. DynamoDB Streams reads by the relay's trigger are free. The sweeper's scheduled runs are left out (not per flow).`,
  );
}

/** The summary line: each flow's dollars per million on AgentBus and on the cheapest peer. */
export function costSummary(result: CostResult): string {
  const parts = result.flows.map(({ shape, usage }) => {
    const bus = total(agentBusDollars(usage)) * 1e6;
    const cheapest = [...peerCosts(shape, usage)].sort((a, b) => a.dollars - b.dollars)[0];
    return `${shape.flow} $${fmt(bus, 2)}${cheapest ? ` (cheapest peer ${cheapest.peer} $${fmt(cheapest.dollars * 1e6, 2)})` : ""}`;
  });
  return `6. Per million flows on AWS (${PRICE_REGION} list prices of ${PRICES_AS_OF}), AgentBus: ${parts.join("; ")}.`;
}
