import {
  agentBusDollars,
  agentBusMonth,
  agentBusProvisionedDollars,
  type FlowUsage,
  type Mappings,
  type MixedFlow,
  minimumCapacityMonth,
  peerCosts,
  SYSTEMS,
  total,
  writeBudget,
  zeroUsage,
} from "../../lib/dev/metering/flow-cost";
import {
  ASSUMPTIONS,
  IDLE_POLLS_PER_MAPPING_MINUTE,
  PRICE_REGION,
  PRICES,
  PRICES_AS_OF,
} from "../../lib/dev/metering/prices";
import { DEFAULT_TARGET_UTILIZATION_PERCENT } from "../../lib/infra/constructs/table-capacity";
import { type ColdPlay, printCold } from "./cost-cold";
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
  /** Each flow's first play (unmetered in `flows`): in functions it had not warmed yet. */
  readonly cold: readonly ColdPlay[];
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
  printCold(out, result.cold, result.flows);
  out();
  printSideBySide(out, result.flows);
  out();
  printWriteBudget(out, result.flows);
  out();
  printCounting(out, result.flows);
  out();
  printLoaded(out, result);
  out();
  printPrices(out, result.functions);
}

/** A flow's name and what one of it used. */
type Used = Pick<MixedFlow, "usage"> & { readonly shape: Pick<MixedFlow["shape"], "flow"> };

function printUsage(
  out: Out,
  flows: readonly Used[],
  title = "What one flow used on AgentBus (mean of its plays after a warm-up play), and what a million of them cost:",
): void {
  out(title);
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

/** The write units at which each flow would cost what a durable function does (writeBudget). */
function printWriteBudget(out: Out, flows: readonly MixedFlow[]): void {
  const budgets = flows.map(({ shape, usage }) => ({
    flow: shape.flow,
    ...writeBudget(shape, usage),
  }));
  const peer = budgets[0]?.peer ?? "Lambda durable functions";
  out(
    `The DynamoDB writes at which a flow would cost what ${peer} do, every other line as metered above:`,
  );
  const rows = budgets.map((b) => [
    b.flow,
    perMillion(b.dollars),
    perMillion(b.peerDollars),
    perMillion(b.otherDollars),
    fmt(b.writeUnits, 1),
    fmt(b.writeUnitsAtPeer, 1),
  ]);
  const header = ["flow", "AgentBus", peer, "AgentBus without writes", "WU", "WU at its price"];
  for (const line of renderTable(header, rows, ["l", "r", "r", "r", "r", "r"])) out(line);
  out(
    "(WU at its price 0: what AgentBus spends besides its writes already costs more than the peer; cutting writes alone cannot reach it.)",
  );
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

/** US$ of a flow's usage without the Lambda duration line (wall-clock time on the emulator). */
export const withoutDuration = (u: FlowUsage, lines = agentBusDollars(u)) =>
  total(lines) - (lines["Lambda duration"] ?? 0);

/**
 * The utilization at which the loaded column prices provisioned tables: the target auto scaling
 * keeps by default (lib/infra/constructs/table-capacity.ts).
 */
const PROVISIONED_UTILIZATION = DEFAULT_TARGET_UTILIZATION_PERCENT / 100;

/** One flow's row of the loaded table: alone → loaded for what batches change, and the batches. */
function loadedRow(play: LoadedPlay, alone: FlowUsage): string[] {
  const loaded = play.usage;
  const both = (f: (u: FlowUsage) => number, digits = 1) =>
    `${fmt(f(alone), digits)} → ${fmt(f(loaded), digits)}`;
  const ratio = (f: (u: FlowUsage) => number) =>
    `${fmt(f(loaded) / Math.max(1e-12, f(alone)), 2)}×`;
  const dollars = (u: FlowUsage) => total(agentBusDollars(u));
  return [
    play.flow,
    `${perMillion(dollars(alone))} → ${perMillion(dollars(loaded))}`,
    `${perMillion(withoutDuration(alone))} → ${perMillion(withoutDuration(loaded))}`,
    ratio(withoutDuration),
    perMillion(
      withoutDuration(loaded, agentBusProvisionedDollars(loaded, PROVISIONED_UTILIZATION)),
    ),
    both((u) => u.lambdaRequests),
    both((u) => u.lambdaGbSeconds.arm64 + u.lambdaGbSeconds.x86_64, 2),
    both((u) => u.sqsStandardRequests),
    both((u) => u.sqsFifoRequests),
    both((u) => u.dynamoWriteUnits),
    ...BATCHED_KINDS.map((k) => meanBatch(play, k)),
  ];
}

function printLoaded(out: Out, result: CostResult): void {
  const inFlight = result.loaded[0]?.inFlight ?? 0;
  out(
    `Loaded: ${fmtInt(inFlight)} flows of one kind started at once, per flow (alone → loaded), and the mean records per invocation of each kind of function (its batch):`,
  );
  const cols = [
    ...["flow", "$/M flows", "$/M without λ duration", "vs alone", "provisioned", "λ req"],
    "λ GB-s",
    ...["SQS std", "SQS FIFO", "WU", ...BATCHED_KINDS.map((k) => `${k} batch`)],
  ];
  const rows = result.loaded.map((play) =>
    loadedRow(play, result.flows.find((f) => f.shape.flow === play.flow)?.usage ?? zeroUsage()),
  );
  for (const line of renderTable(cols, rows, ["l", ...cols.slice(1).map(() => "r" as const)]))
    out(line);
  out();
  printUsage(
    out,
    result.loaded.map((p) => ({ shape: { flow: p.flow }, usage: p.usage })),
    `What one flow used with ${fmtInt(inFlight)} of its kind in flight (the play's usage divided by ${fmtInt(inFlight)}):`,
  );
  const seconds = result.loaded.map((p) => `${p.flow} ${fmt(p.seconds, 1)} s`).join(", ");
  out(
    `Played on the local stack (${seconds}): one poller per event source mapping, which receives up to its batch size (at most 10) of what waits, as soon as anything does (no batching window); a group with a batch size of 1 (the model-calling and sending roles) never batches. Lambda duration is each handler's wall-clock time against one emulator process, which slows as more calls wait on it and with the machine's load; AWS's services do not slow at this load, so the loaded play's duration is an upper bound, and the column without it shows what the batches change.`,
  );
  out(
    `Provisioned: the loaded flow without λ duration on tables deployed with \`tablesCapacity: { mode: "provisioned", ... }\`, auto scaling keeping ${DEFAULT_TARGET_UTILIZATION_PERCENT}% of each table's and index's capacity in use under a sustained load of such flows (a unit-hour serves 3,600 units: $${fmt(PRICES.dynamoWriteCapacity.dollars, 5)} a write unit-hour, $${fmt(PRICES.dynamoReadCapacity.dollars, 5)} a read unit-hour); bursts faster than auto scaling follows are throttled and retried, and each table and index holds at least one read and one write unit, $${fmt(minimumCapacityMonth(), 2)} a month whatever the load.`,
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
