import { fmt, fmtInt, renderTable } from "./stats";

/**
 * How far the reference scenario scales before one of AWS's per-account (or per-partition)
 * ceilings stops it, from what the local stack counted while playing it: the events the relay
 * published, the deliveries the groups' queues handed out, the DynamoDB units the commits took.
 * The ceilings are AWS's published defaults in us-east-1 (lib/infra/README.md's Scale and limits says
 * what to change past each); "today's load" is the rate the local stack played the scenario at.
 */

export interface ScenarioCounts {
  /** Events the relay published (every stored event, once: PutEvents takes 10 per call). */
  readonly published: number;
  /** Deliveries the groups' queues handed out (each a rule target invocation upstream). */
  readonly deliveries: number;
  /** DynamoDB write and read units of the whole scenario, index entries included. */
  readonly writeUnits: number;
  readonly readUnits: number;
  /** The write units of one delivery to the costliest aggregate (one partition key). */
  readonly hottestWritesPerDelivery: { readonly group: string; readonly writeUnits: number };
  /** Seconds the local stack took to play it. */
  readonly seconds: number;
  /** US$ of DynamoDB units per million deliveries (on-demand, billed per request). */
  readonly dollarsPerMillion: number;
}

interface Hop {
  readonly hop: string;
  /** What one scenario takes of the hop's quota. */
  readonly perScenario: number;
  readonly unit: string;
  /** The quota, per second. */
  readonly ceiling: number;
}

/** AWS defaults in us-east-1 (adjustable ones marked so in lib/infra/README.md). */
const QUOTAS = {
  putEventsRequests: 10_000,
  entriesPerPutEvents: 10,
  targetInvocations: 18_750,
  /** An on-demand table's default maximum throughput, per table. */
  tableWriteUnits: 40_000,
  tableReadUnits: 40_000,
  partitionWriteUnits: 1_000,
} as const;

const LOADS = [10, 100, 1_000] as const;

function hopsOf(c: ScenarioCounts): Hop[] {
  return [
    {
      hop: "relay -> bus (PutEvents requests)",
      perScenario: c.published / QUOTAS.entriesPerPutEvents,
      unit: "requests",
      ceiling: QUOTAS.putEventsRequests,
    },
    {
      hop: "bus -> queues (target invocations)",
      perScenario: c.deliveries,
      unit: "invocations",
      ceiling: QUOTAS.targetInvocations,
    },
    {
      // The quota is per table; the three tables' units summed understate the ceiling.
      hop: "DynamoDB writes, all tables",
      perScenario: c.writeUnits,
      unit: "WU",
      ceiling: QUOTAS.tableWriteUnits,
    },
    {
      hop: "DynamoDB reads, all tables",
      perScenario: c.readUnits,
      unit: "RU",
      ceiling: QUOTAS.tableReadUnits,
    },
  ];
}

/** Prints the table, and returns the scenarios per second at the first ceiling reached. */
export function printCeilings(out: (line?: string) => void, c: ScenarioCounts): number {
  const today = 1 / Math.max(c.seconds, 1e-9);
  const hops = hopsOf(c);
  const lines = renderTable(
    [
      "hop",
      "per scenario",
      "ceiling/s (us-east-1)",
      "scenarios/s at ceiling",
      ...LOADS.map((n) => `use at ${fmtInt(n)}×`),
    ],
    hops.map((h) => [
      h.hop,
      `${fmt(h.perScenario, 1)} ${h.unit}`,
      fmtInt(h.ceiling),
      fmt(h.ceiling / h.perScenario, 1),
      ...LOADS.map((n) => `${fmt((100 * n * today * h.perScenario) / h.ceiling, 2)}%`),
    ]),
    ["l", "r", "r", "r", "r", "r", "r"],
  );
  for (const line of lines) out(line);
  const first = Math.min(...hops.map((h) => h.ceiling / h.perScenario));
  const hot = c.hottestWritesPerDelivery;
  out();
  out(
    `Today's load: the scenario once per ${fmt(c.seconds, 1)} s (the local stack's pace). The first account-wide ceiling allows ${fmt(first, 1)} scenarios/s, ${fmtInt(first / today)}× today's load. One aggregate (one partition key) takes at most ${fmtInt(QUOTAS.partitionWriteUnits)} WU/s: ${fmtInt(QUOTAS.partitionWriteUnits / Math.max(hot.writeUnits, 1e-9))} deliveries/s to one ${hot.group} state at its ${fmt(hot.writeUnits, 2)} WU per delivery. DynamoDB units per delivery: $${fmt(c.dollarsPerMillion, 2)} per million, the same at any load until a ceiling throttles (on-demand bills per unit); what SQS and Lambda bill per batch falls as batches fill, measured by section 6's loaded column.`,
  );
  return first;
}
