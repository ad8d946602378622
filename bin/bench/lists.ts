import {
  BatchWriteItemCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { ulid } from "ulid";
import { stateItem } from "../../functions/adapters/dynamodb/items";
import { type PageOptions, type SummaryPage, summaryPage } from "../../lib/operator/lists";
import type { OpsStack } from "../../lib/operator/stack";
import { createTables } from "../../test/support/tables";
import { fmt, fmtInt, summarize } from "./stats";

/**
 * `npm run bench -- lists`: 100,000 run summaries of several tenants and statuses in a state table
 * on moto (BatchWriteItem, as the commit writes them: stateItem), then a page of one tenant's runs
 * of one status, newest first, and the page after it: from by-tenant-status (one Query a page and
 * the BatchGetItem of the summaries) and by the look-through a stack without it does (the kind's
 * list, the other tenants and statuses read and left out), timed in the same run. moto's Query
 * reads every item of the table, so a page's time there grows with the table; DynamoDB reads the
 * partition's page only. The calls each way makes are counted too.
 */

const TENANTS = ["acme", "globex", "initech", "umbrella", "default"] as const;
const STATUSES = ["RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"] as const;
const RUNS = 100_000;
const PAGE = 50;
const REPEATS = 3;
/** BatchWriteItem calls in flight while the table fills. */
const WRITERS = 8;

export interface ListsResult {
  readonly runs: number;
  readonly writeSeconds: number;
  readonly indexed: PagePair;
  readonly lookThrough: PagePair;
}

/** The median milliseconds and calls of a first page and of the page after it. */
interface PagePair {
  readonly firstMs: number;
  readonly nextMs: number;
  readonly firstCalls: number;
  readonly nextCalls: number;
}

/** Run i: its tenant, its status, listed a millisecond after run i - 1. */
function runItem(i: number, start: number) {
  const tenant = TENANTS[i % TENANTS.length] ?? "default";
  const status = STATUSES[Math.floor(i / TENANTS.length) % STATUSES.length] ?? "RUNNING";
  const at = new Date(start + i);
  const summary = { kind: "run", status, ...(tenant === "default" ? {} : { tenant }) };
  const listing = { listedAt: at.toISOString() };
  const id = `run_${String(i).padStart(6, "0")}`;
  return stateItem({ type: "dag_run", id }, 1, 1, { i }, at, null, { summary, listing });
}

async function fill(client: DynamoDBClient, table: string): Promise<void> {
  const start = Date.parse("2026-12-01T00:00:00.000Z");
  let next = 0;
  const writer = async () => {
    while (next < RUNS) {
      const from = next;
      next = Math.min(RUNS, next + 25);
      let requests: WriteRequest[] = [];
      for (let i = from; i < next; i++)
        requests.push({ PutRequest: { Item: marshall(runItem(i, start)) } });
      while (requests.length > 0) {
        const answer = await client.send(
          new BatchWriteItemCommand({ RequestItems: { [table]: requests } }),
        );
        requests = answer.UnprocessedItems?.[table] ?? [];
      }
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, writer));
}

/** The client's calls, counted. */
function counted(config: DynamoDBClientConfig) {
  const client = new DynamoDBClient(config);
  const counter = { calls: 0 };
  client.middlewareStack.add(
    (next) => async (args) => {
      counter.calls += 1;
      return next(args);
    },
    { step: "initialize", name: "benchCallCounter" },
  );
  return { client, counter };
}

async function timedPages(
  stack: OpsStack,
  counter: { calls: number },
  options: PageOptions,
): Promise<PagePair & { first: SummaryPage; next: SummaryPage }> {
  const firstMs: number[] = [];
  const nextMs: number[] = [];
  let first: SummaryPage = { rows: [] };
  let next: SummaryPage = { rows: [] };
  let calls = { first: 0, next: 0 };
  for (let r = 0; r < REPEATS; r++) {
    const c0 = counter.calls;
    const t0 = performance.now();
    first = await summaryPage(stack, { kind: "run" }, options);
    const t1 = performance.now();
    const c1 = counter.calls;
    next = await summaryPage(stack, { kind: "run" }, { ...options, after: first.next });
    firstMs.push(t1 - t0);
    nextMs.push(performance.now() - t1);
    calls = { first: c1 - c0, next: counter.calls - c1 };
  }
  const median = (values: number[]) => summarize(values).median;
  return {
    firstMs: median(firstMs),
    nextMs: median(nextMs),
    firstCalls: calls.first,
    nextCalls: calls.next,
    first,
    next,
  };
}

/** Both ways must list the same runs, each of the tenant and status, newest first. */
function check(
  a: readonly SummaryPage[],
  b: readonly SummaryPage[],
  tenant: string,
  status: string,
) {
  const ids = (pages: readonly SummaryPage[]) => pages.flatMap((p) => p.rows.map((r) => r.id));
  const rows = a.flatMap((p) => p.rows);
  const ordered = rows.every((r, i) => i === 0 || (rows[i - 1]?.id ?? "") > r.id);
  if (rows.length !== 2 * PAGE || !ordered || JSON.stringify(ids(a)) !== JSON.stringify(ids(b)))
    throw new Error("the two ways listed different runs, or not two pages newest first");
  if (!rows.every((r) => r.tenant === tenant && r.status === status))
    throw new Error(`a row of another tenant or status than ${tenant} ${status}`);
}

export async function runListsSection(
  out: (line?: string) => void,
  endpoint: string,
): Promise<ListsResult> {
  const config: DynamoDBClientConfig = {
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  };
  const { client, counter } = counted(config);
  try {
    const tables = await createTables(client, `bench-lists-${ulid().toLowerCase()}`);
    const mark = performance.now();
    await fill(client, tables.state);
    const writeSeconds = (performance.now() - mark) / 1000;
    out(
      `${fmtInt(RUNS)} runs written in ${fmt(writeSeconds, 1)} s (BatchWriteItem, ${WRITERS} in flight): ${TENANTS.length} tenants × ${STATUSES.length} statuses, ${fmtInt(RUNS / TENANTS.length / STATUSES.length)} runs each`,
    );
    const stack = { dynamodb: client, names: { tables } } as unknown as OpsStack;
    const filter = { tenant: "globex", status: "FAILED" };
    const indexed = await timedPages(stack, counter, { limit: PAGE, filter });
    const lookThrough = await timedPages(stack, counter, {
      limit: PAGE,
      filter,
      lookThrough: true,
    });
    check([indexed.first, indexed.next], [lookThrough.first, lookThrough.next], "globex", "FAILED");
    const row = (name: string, p: PagePair) =>
      out(
        `${name.padEnd(36)} ${fmt(p.firstMs, 1).padStart(9)} ms ${String(p.firstCalls).padStart(6)} calls ${fmt(p.nextMs, 1).padStart(9)} ms ${String(p.nextCalls).padStart(6)} calls`,
      );
    out();
    out(`a page of ${PAGE} of globex's FAILED runs, newest first (median of ${REPEATS}):`);
    out(
      `${"".padEnd(36)} ${"first page".padStart(12)} ${"".padStart(12)} ${"next page".padStart(12)}`,
    );
    row("by-tenant-status", indexed);
    row("look-through of by-kind-listed", lookThrough);
    out(
      `by-tenant-status is ${fmt(lookThrough.firstMs / indexed.firstMs, 1)}× faster on the first page, ${fmt(lookThrough.nextMs / indexed.nextMs, 1)}× on the next (moto on this machine, not AWS latency)`,
    );
    return { runs: RUNS, writeSeconds, indexed, lookThrough };
  } finally {
    client.destroy();
  }
}

export function listsSummary(r: ListsResult): string {
  return `8. Of ${fmtInt(r.runs)} runs on moto, a page of ${PAGE} of one tenant's runs of one status takes ${fmt(r.indexed.firstMs, 1)} ms (next page ${fmt(r.indexed.nextMs, 1)} ms) from by-tenant-status, ${fmt(r.lookThrough.firstMs / r.indexed.firstMs, 1)}× faster than the look-through of by-kind-listed (${fmt(r.lookThrough.firstMs, 1)} ms, ${r.lookThrough.firstCalls} calls vs ${r.indexed.firstCalls}).`;
}
