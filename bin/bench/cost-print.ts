import {
  agentBusDollars,
  type Mappings,
  type MixedFlow,
  peerCosts,
  perConsumedEvent,
  SECONDS_PER_MONTH,
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

/** What section 6 measured: each flow's mean usage, one mix's seconds, the stack's SQS mappings. */
export interface CostResult {
  readonly flows: readonly MixedFlow[];
  readonly mixSeconds: number;
  readonly mappings: Mappings;
  /** The functions' configured memory and architecture, as `256 MB arm64 (31 functions)`. */
  readonly functions: string;
}

const LOADS = [1, 10, 100, 1_000] as const;

/** US$ per million flows, as printed. */
const perMillion = (dollars: number) => fmt(dollars * 1e6, 2);

export function printCost(out: Out, result: CostResult): void {
  printUsage(out, result.flows);
  out();
  printSideBySide(out, result.flows);
  out();
  printCounting(out, result.flows);
  out();
  printLoads(out, result);
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

function printLoads(out: Out, result: CostResult): void {
  const mixesPerMonth = SECONDS_PER_MONTH / result.mixSeconds;
  const consumed = result.flows.reduce((n, f) => n + f.usage.consumedEvents, 0);
  out(
    `US$ per consumed event over the mix of the ${result.flows.length} flows (one of each, ${fmt(consumed, 1)} events consumed by AgentBus's groups, the denominator of every column) at today's load — the mix once per ${fmt(result.mixSeconds, 1)} s, the local stack's pace: ${fmtInt(mixesPerMonth)} mixes a month — and at 10×, 100×, 1,000×:`,
  );
  const rows = LOADS.map((load) => {
    const per = perConsumedEvent(result.flows, mixesPerMonth, load, result.mappings);
    return [`${fmtInt(load)}×`, ...SYSTEMS.map((s) => `$${per[s].toExponential(3)}`)];
  });
  for (const line of renderTable(["load", ...SYSTEMS], rows, [
    "l",
    ...SYSTEMS.map(() => "r" as const),
  ]))
    out(line);
  const { standard, fifo } = result.mappings;
  out(
    `Flat where billing is per request or unit (DynamoDB on-demand, EventBridge, Pipes, KMS, Lambda requests, Step Functions, durable operations): the same per event at any load. Not flat: AgentBus's ${standard + fifo} SQS event source mappings (${standard} standard, ${fifo} FIFO) poll idle queues at a fixed ${IDLE_POLLS_PER_MAPPING_MINUTE} requests a minute each (assumed), counted all month at every load, which weighs at low load; SQS requests (tiers past 100 billion a month) and Lambda arm64 GB-seconds (past 7.5 billion) get cheaper with volume; Temporal Cloud's Actions are tiered ($50 down to $25 per million past 100 million a month) on top of its Business plan's $500 a month minimum (or 10% of usage). Lambda's, SQS's, KMS's and Step Functions' free tiers are left out.`,
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
