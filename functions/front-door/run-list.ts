import { DEFAULT_TENANT, tenantOf } from "../../schemas";
import { TenantId } from "../../schemas/ids";
import { Identifier } from "../core/dag/definition";
import { RUN_STATUSES, type RunStatus } from "../core/dag/run";
import type { StateReader, StateSummary, StoredState } from "../core/ports";
import type { OrchestratorState } from "../roles/orchestrator/state";
import { fail } from "./http";
import { DAG_RUN } from "./runs-in-flight";
import type { FrontDoorWorkflows } from "./workflows";

/**
 * A tenant's runs, newest first, a page at a time: `GET /v1/runs` and A2A's `ListTasks` both list
 * from here. What is stored answers it: the state table's by-tenant-status index
 * (functions/adapters/dynamodb/tables.ts), whose partition is one tenant's runs of one status
 * (`<tenant>#run#<status>`) sorted by when each run was first summarized (`listed_at`), keys
 * only. A page reads each status asked for (one Query per status partition, merged newest first)
 * and then the runs' states (one BatchGetItem of at most 100 keys), which say the rest: the run's
 * tenant (checked again), its current status and its workflow. So a filter by status is one
 * Query; no filter, five (RUN_STATUSES); a filter the index does not key (the workflow, a task
 * state) leaves runs out after the read, and a page looks through at most MAX_ROUNDS index pages
 * to fill itself: it may hold fewer than asked, its cursor says where the next begins.
 *
 * Where a page ends is a position in the list (the last entry it looked at: `listed_at` and run
 * id), which never moves as runs change status, so a run is on one page at most however its
 * status moves between pages. The cursor a client gets is that position with the tenant, checked
 * when it comes back: a cursor that is not one, or is another tenant's, is refused before
 * anything is read (RunCursorError), and every read is of the caller's own partitions anyway.
 *
 * Not listed: a run whose start the orchestrator refused (its state null, never summarized), a run
 * not yet stored (its start on the bus), and runs summarized before `tenant_list` was written and
 * not backfilled (`agentbus lists backfill`).
 */

/** Where a list stands: the entry a page looked at last (the entries after it come next). */
export interface RunPosition {
  readonly listedAt: string;
  readonly runId: string;
}

/** One run in the index: its id and when it was first summarized (ISO 8601). */
export type RunIndexEntry = RunPosition;

export interface RunIndexPage {
  /** Newest first (by `listedAt`, then run id), each run once. */
  readonly entries: readonly RunIndexEntry[];
  /** Whether the index has entries after the last of these. */
  readonly more: boolean;
}

/** The index of each tenant's runs by status (by-tenant-status), newest first. */
export interface TenantRunIndex {
  /** At most `limit` of `tenant`'s runs of `statuses`, after `after` (from the newest without). */
  page(
    tenant: string,
    statuses: readonly RunStatus[],
    limit: number,
    after?: RunPosition,
  ): Promise<RunIndexPage>;
}

/** The most runs a page holds, and how many without a `limit`. */
export const MAX_RUN_PAGE = 100;
export const DEFAULT_RUN_PAGE = 50;
/**
 * The most bytes of runs a page holds (as its answer shows them): a run's outputs may be large, and
 * a hundred of them must not pass what a Lambda function may answer (6 MB). A page stops before the
 * run that would pass it and its cursor begins there; a run larger alone is a page alone.
 */
export const MAX_PAGE_BYTES = 1_000_000;
/** How many index pages one list page reads at most while filters leave runs out. */
export const MAX_ROUNDS = 5;

/** Whether `a` comes before `b` in a list (newer first; at the same time, the greater id). */
export function newerFirst(a: RunPosition, b: RunPosition): number {
  if (a.listedAt !== b.listedAt) return a.listedAt < b.listedAt ? 1 : -1;
  return a.runId === b.runId ? 0 : a.runId < b.runId ? 1 : -1;
}

/** What to list: the statuses, the filters the index does not key, how many, after where. */
export interface RunListQuery {
  /** The run statuses listed (all of RUN_STATUSES for no filter). */
  readonly statuses: readonly RunStatus[];
  /** The runs kept of those the index gives, by their state (the workflow, a task's state). */
  readonly keep?: (runId: string, state: OrchestratorState) => boolean;
  readonly limit: number;
  readonly after?: RunPosition;
}

export interface ListedRun {
  readonly runId: string;
  readonly listedAt: string;
  readonly state: OrchestratorState;
}

export interface RunListPage<T> {
  /** Each listed run as the page answers it. */
  readonly runs: readonly T[];
  /** Where the next page begins; absent on the last page. */
  readonly next?: RunPosition;
}

/**
 * One page of `tenant`'s runs (see top), each as `show` answers it: what it shows is what the
 * page's bytes count (MAX_PAGE_BYTES).
 */
export async function listRuns<T>(
  ports: { readonly runIndex: TenantRunIndex; readonly states: StateReader },
  tenant: string,
  query: RunListQuery,
  show: (run: ListedRun) => T,
): Promise<RunListPage<T>> {
  const runs: T[] = [];
  let position = query.after;
  let more = true;
  let bytes = 0;
  let full = false;
  for (let round = 0; round < MAX_ROUNDS && more && !full && runs.length < query.limit; round++) {
    const page = await ports.runIndex.page(tenant, query.statuses, query.limit, position);
    const states = await ports.states.loadStates(
      page.entries.map((entry) => ({ type: DAG_RUN, id: entry.runId })),
    );
    const byId = new Map(states.map((state) => [state.aggregate.id, state]));
    let looked = 0;
    for (const entry of page.entries) {
      if (runs.length >= query.limit) break;
      const state = byId.get(entry.runId)?.data as OrchestratorState | null | undefined;
      if (state && isListed(state, tenant, query, entry.runId)) {
        const shown = show({ runId: entry.runId, listedAt: entry.listedAt, state });
        const size = Buffer.byteLength(JSON.stringify(shown));
        // The run that would pass the page's bytes begins the next page (the first is taken).
        full = runs.length > 0 && bytes + size > MAX_PAGE_BYTES;
        if (full) break;
        bytes += size;
        runs.push(shown);
      }
      looked++;
      position = entry;
    }
    more = full || page.more || looked < page.entries.length;
  }
  return { runs, ...(more && position ? { next: position } : {}) };
}

/** Whether a run's state (as read now) belongs on the list: the tenant's, of a status, kept. */
function isListed(
  state: OrchestratorState,
  tenant: string,
  query: RunListQuery,
  runId: string,
): boolean {
  // The index may lag the item (a status moved since): the item's status is the one listed.
  return (
    tenantOf(state) === tenant &&
    query.statuses.includes(state.run.status) &&
    (query.keep?.(runId, state) ?? true)
  );
}

/** A cursor that is not one a list of the caller's gave. */
export class RunCursorError extends Error {
  override readonly name = "RunCursorError";
}

const CURSOR_VERSION = 1;
const MAX_CURSOR_LENGTH = 1024;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/;
const RUN_ID = /^[A-Za-z0-9_.:-]{1,256}$/;

/** The cursor of a position in `tenant`'s list: opaque to the client (base64url JSON). */
export function runCursor(tenant: string, position: RunPosition): string {
  const value = { v: CURSOR_VERSION, t: tenant, at: position.listedAt, run: position.runId };
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64url");
}

/** The position a cursor of `tenant`'s list names; RunCursorError for any other text. */
export function positionOfCursor(cursor: string, tenant: string): RunPosition {
  const refuse = (why: string): never => {
    throw new RunCursorError(
      `the cursor is not one this list gave (${why}): start from the first page`,
    );
  };
  if (cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor))
    refuse("not base64url");
  let value: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (parsed !== null && typeof parsed === "object") value = parsed as Record<string, unknown>;
  } catch {
    refuse("not JSON");
  }
  const { v, t, at, run } = value;
  if (v !== CURSOR_VERSION || !TenantId.safeParse(t).success) refuse("no list's position");
  if (typeof at !== "string" || !ISO_TIME.test(at)) refuse("no time");
  if (typeof run !== "string" || !RUN_ID.test(run)) refuse("no run id");
  if (t !== tenant) throw new RunCursorError("the cursor is of another tenant's list");
  return { listedAt: at as string, runId: run as string };
}

/** The run statuses a filter names: one, or all of them. */
export function statusesOf(status: RunStatus | undefined): readonly RunStatus[] {
  return status === undefined ? RUN_STATUSES : [status];
}

/** What an in-memory store keeps of summarized states (functions/core/memory.ts). */
export interface SummarizedStates {
  readonly states: ReadonlyMap<string, StoredState>;
  readonly summaries: ReadonlyMap<string, StateSummary>;
}

/**
 * The in-memory twin of by-tenant-status, over an in-memory store's summaries and list keys: a
 * tenant's runs of the statuses asked, newest first, as the DynamoDB adapter answers.
 */
export class InMemoryTenantRunIndex implements TenantRunIndex {
  /** The index pages read, as Queries would be (one per status asked). */
  queries = 0;

  constructor(private readonly store: SummarizedStates) {}

  async page(
    tenant: string,
    statuses: readonly RunStatus[],
    limit: number,
    after?: RunPosition,
  ): Promise<RunIndexPage> {
    this.queries += statuses.length;
    const entries = [...this.store.summaries].flatMap(([key, summary]) => {
      const stored = this.store.states.get(key);
      const listed =
        summary.kind === "run" &&
        (summary.tenant ?? DEFAULT_TENANT) === tenant &&
        (statuses as readonly string[]).includes(summary.status) &&
        stored?.aggregate.type === DAG_RUN &&
        stored.listing !== undefined;
      if (!listed || !stored?.listing) return [];
      const entry = { runId: stored.aggregate.id, listedAt: stored.listing.listedAt };
      return after === undefined || newerFirst(after, entry) < 0 ? [entry] : [];
    });
    entries.sort(newerFirst);
    return { entries: entries.slice(0, limit), more: entries.length > limit };
  }
}

/** The names a run of the workflow `name` has: the name, and the name its alias starts. */
export function workflowNamesOf(
  name: string,
  workflows: FrontDoorWorkflows | undefined,
): ReadonlySet<string> {
  const started = workflows?.compiled?.forStart(name)?.name;
  return new Set(started === undefined ? [name] : [name, started]);
}

/**
 * `GET /v1/runs`'s query: `workflow` (a name or alias), `status` (a run status), `limit` (1 to
 * MAX_RUN_PAGE) and `cursor` (a `next_cursor` of the caller's list); 400 naming each that does not
 * fit, before anything is read.
 */
export function runListQueryOf(
  query: Readonly<Record<string, string | undefined>>,
  tenant: string,
  workflows: FrontDoorWorkflows | undefined,
): RunListQuery {
  const problems: { path: string; message: string }[] = [];
  const { workflow, status, limit = String(DEFAULT_RUN_PAGE), cursor } = query;
  if (workflow !== undefined && !Identifier.safeParse(workflow).success)
    problems.push({ path: "(query).workflow", message: "must be a workflow's name or alias" });
  const statuses = RUN_STATUSES as readonly string[];
  if (status !== undefined && !statuses.includes(status))
    problems.push({ path: "(query).status", message: `must be one of ${statuses.join(", ")}` });
  const size = Number(limit);
  if (!/^\d{1,3}$/.test(limit) || size < 1 || size > MAX_RUN_PAGE)
    problems.push({
      path: "(query).limit",
      message: `must be a whole number, 1 to ${MAX_RUN_PAGE}`,
    });
  let after: RunPosition | undefined;
  try {
    if (cursor !== undefined) after = positionOfCursor(cursor, tenant);
  } catch (error) {
    if (!(error instanceof RunCursorError)) throw error;
    problems.push({ path: "(query).cursor", message: error.message });
  }
  if (problems.length > 0)
    fail("invalid_request", problems.map((p) => `${p.path}: ${p.message}`).join("; "), {
      errors: problems,
    });
  const names = workflow === undefined ? undefined : workflowNamesOf(workflow, workflows);
  return {
    statuses: statusesOf(status as RunStatus | undefined),
    ...(names
      ? { keep: (_id: string, state: OrchestratorState) => names.has(state.run.workflow.name) }
      : {}),
    limit: size,
    ...(after ? { after } : {}),
  };
}
