import { type ListTasksRequest, type ListTasksResponse, TaskState } from "@a2a-js/sdk";
import { RequestMalformedError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import type { StateSummary, StoredState } from "../../functions/core/ports";
import { listTasks } from "../../functions/front-door/a2a/list-tasks";
import { runIdOfTask } from "../../functions/front-door/a2a/task";
import { InMemoryAcceptedRequests } from "../../functions/front-door/accepted";
import { type FrontDoorPorts, handleRequest } from "../../functions/front-door/api";
import { InMemoryClientSequences } from "../../functions/front-door/client-seq";
import type { HttpRequest } from "../../functions/front-door/http";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import {
  InMemoryTenantRunIndex,
  MAX_PAGE_BYTES,
  positionOfCursor,
  RunCursorError,
  runCursor,
} from "../../functions/front-door/run-list";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { registry } from "../../schemas";
import { Bus } from "../core/workflow-bus";
import { REFERENCE_FRONT_DOOR_WORKFLOWS } from "../support/reference";

/**
 * `GET /v1/runs` in memory (functions/front-door/run-list.ts): a tenant's runs newest first, a page
 * at a time, over the in-memory twin of the by-tenant-status index and the runs' states. The same
 * list through A2A's `ListTasks` with the SDK's client, on the local stack:
 * test/e2e/a2a-agent.test.ts.
 */

process.env.POWERTOOLS_METRICS_DISABLED = "true";

const ACME = { tenant_id: "acme", sub: "7b0c2a4e-5d1f-4c3b-9a8e-2f6d1c0b9e7a" };
const GLOBEX = { tenant_id: "globex", sub: "0d2c6a51-8c55-4a5e-9b2f-1f0e7d3c4b5a" };
type Status = OrchestratorState["run"]["status"];

/** A run's stored state, summary and list keys, as the orchestrator's commit leaves them. */
function storedRun(
  runId: string,
  tenant: string,
  status: Status,
  listedAt: string,
  name: string,
  output: unknown = { n: 1 },
) {
  const data = {
    tenant_id: tenant,
    workflow: name,
    run: {
      run_id: runId,
      workflow: { name, version: 1 },
      status,
      generation: 0,
      input: {},
      nodes: {
        review: { state: "COMPLETED", remaining_upstreams: 0, attempt: 1, output },
      },
    },
  } as unknown as OrchestratorState;
  const state: StoredState = {
    aggregate: { type: "dag_run", id: runId },
    revision: 1,
    version: 1,
    data,
    listing: { listedAt },
  };
  const summary: StateSummary = { kind: "run", status, tenant };
  return { state, summary };
}

function world() {
  const states = new Map<string, StoredState>();
  const summaries = new Map<string, StateSummary>();
  const index = new InMemoryTenantRunIndex({ states, summaries });
  let batchGets = 0;
  const add = (
    runId: string,
    tenant: string,
    status: Status,
    minute: number,
    name = "content.long-form",
    output?: unknown,
  ) => {
    const listedAt = new Date(Date.UTC(2026, 11, 5, 10, minute)).toISOString();
    const { state, summary } = storedRun(runId, tenant, status, listedAt, name, output);
    states.set(`dag_run#${runId}`, state);
    summaries.set(`dag_run#${runId}`, summary);
  };
  const setStatus = (runId: string, status: Status) => {
    const key = `dag_run#${runId}`;
    const state = states.get(key) as StoredState<OrchestratorState>;
    const data = { ...state.data, run: { ...state.data.run, status } };
    states.set(key, { ...state, data });
    summaries.set(key, { ...(summaries.get(key) as StateSummary), status });
  };
  const ports = {
    publisher: { publish: async () => [] },
    store: { load: async () => ({ inboxHit: false, checkpoint: 0, state: undefined }) },
    accepted: new InMemoryAcceptedRequests(),
    sequences: new InMemoryClientSequences(),
    tasks: { eventsByTask: async () => [] },
    limits: new InMemoryTenantLimits(),
    runs: new InMemoryRunsInFlight(),
    controls: new InMemoryModelControls(),
    states: {
      loadStates: async (refs) => {
        batchGets++;
        expect(refs.length).toBeLessThanOrEqual(100);
        return refs.flatMap((ref) => states.get(`${ref.type}#${ref.id}`) ?? []);
      },
    },
    runIndex: index,
    registry,
    workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
    ids: { next: () => ulid() },
    clock: { now: () => new Date("2026-12-05T12:00:00Z") },
  } satisfies FrontDoorPorts;
  const list = async (query: Record<string, string> = {}, claims = ACME) => {
    const request: HttpRequest = {
      method: "GET",
      path: "/v1/runs",
      headers: {},
      query,
      claims,
      requestId: "r",
    };
    const response = await handleRequest(request, ports);
    return { status: response.statusCode, body: JSON.parse(response.body) as ListBody };
  };
  return { add, setStatus, list, index, ports, batchGets: () => batchGets };
}

interface ListBody {
  runs: { run_id: string; status: string; listed_at: string; workflow: { name: string } }[];
  next_cursor?: string;
  code?: string;
  errors?: { path: string; message: string }[];
}

/** Every page of a list, following `next_cursor`. */
async function allPages(w: ReturnType<typeof world>, query: Record<string, string>) {
  const pages: ListBody["runs"][] = [];
  let cursor: string | undefined;
  do {
    const { status, body } = await w.list({ ...query, ...(cursor ? { cursor } : {}) });
    expect(status).toBe(200);
    pages.push(body.runs);
    cursor = body.next_cursor;
  } while (cursor && pages.length < 20);
  return pages;
}

describe("GET /v1/runs", () => {
  it("lists the caller's runs newest first, a page at a time, each once, none of another tenant's", async () => {
    const w = world();
    for (let i = 0; i < 7; i++) w.add(`run_a${i}`, "acme", i % 2 ? "COMPLETED" : "RUNNING", i);
    w.add("run_g0", "globex", "RUNNING", 30);
    const pages = await allPages(w, { limit: "3" });
    expect(pages.map((p) => p.map((r) => r.run_id))).toEqual([
      ["run_a6", "run_a5", "run_a4"],
      ["run_a3", "run_a2", "run_a1"],
      ["run_a0"],
    ]);
    const first = pages[0]?.[0];
    expect(first).toMatchObject({ status: "RUNNING", workflow: { name: "content.long-form" } });
    expect(first).toHaveProperty("nodes.review.output", { n: 1 });
    expect(first?.listed_at).toBe("2026-12-05T10:06:00.000Z");
    const globex = await w.list({}, GLOBEX);
    expect(globex.body.runs.map((r) => r.run_id)).toEqual(["run_g0"]);
    expect(globex.body.next_cursor).toBeUndefined();
  });

  it("a page stops before its runs pass MAX_PAGE_BYTES, the next begins there; a larger run is a page alone", async () => {
    const w = world();
    const article = (kb: number) => ({ body: "x".repeat(kb * 1000) });
    for (let i = 0; i < 5; i++)
      w.add(`run_a${i}`, "acme", "COMPLETED", i, "content.long-form", article(300));
    w.add("run_big", "acme", "COMPLETED", 10, "content.long-form", article(1500));
    const pages = await allPages(w, { limit: "50" });
    expect(pages.map((p) => p.map((r) => r.run_id))).toEqual([
      ["run_big"],
      ["run_a4", "run_a3", "run_a2"],
      ["run_a1", "run_a0"],
    ]);
    for (const page of pages.slice(1))
      expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThanOrEqual(MAX_PAGE_BYTES);
  });

  it("a run whose status moves between two pages is on one of them, once", async () => {
    const w = world();
    for (let i = 0; i < 6; i++) w.add(`run_a${i}`, "acme", "RUNNING", i);
    const first = await w.list({ limit: "3" });
    w.setStatus("run_a4", "COMPLETED");
    w.setStatus("run_a1", "COMPLETED");
    const second = await w.list({ limit: "3", cursor: first.body.next_cursor ?? "" });
    const seen = [...first.body.runs, ...second.body.runs].map((r) => r.run_id);
    expect(seen).toEqual(["run_a5", "run_a4", "run_a3", "run_a2", "run_a1", "run_a0"]);
    expect(second.body.runs.find((r) => r.run_id === "run_a1")?.status).toBe("COMPLETED");
  });

  it("filters by status with one index Query a page, and by workflow, its name or its alias", async () => {
    const w = world();
    w.add("run_a0", "acme", "RUNNING", 0);
    w.add("run_a1", "acme", "COMPLETED", 1);
    w.add("run_a2", "acme", "COMPLETED", 2, "content.quick-news");
    w.add("run_a3", "acme", "FAILED", 3);
    const completed = await w.list({ status: "COMPLETED" });
    expect(completed.body.runs.map((r) => r.run_id)).toEqual(["run_a2", "run_a1"]);
    expect(w.index.queries).toBe(1);
    const all = await w.list();
    expect(all.body.runs).toHaveLength(4);
    expect(w.index.queries).toBe(1 + 5);
    const byAlias = await w.list({ workflow: "long-form" });
    expect(byAlias.body.runs.map((r) => r.run_id)).toEqual(["run_a3", "run_a1", "run_a0"]);
    const byName = await w.list({ workflow: "content.quick-news", status: "COMPLETED" });
    expect(byName.body.runs.map((r) => r.run_id)).toEqual(["run_a2"]);
    expect((await w.list({ workflow: "nothing-like-it" })).body.runs).toEqual([]);
  });

  it("a filter the index does not key fills a page from a few index pages, and says where it stopped", async () => {
    const w = world();
    // 300 quick-news runs, newer than the one long-form run: more than a page reads (5 x 50).
    w.add("run_long", "acme", "COMPLETED", 0);
    for (let i = 0; i < 300; i++)
      w.add(
        `run_q${String(i).padStart(3, "0")}`,
        "acme",
        "COMPLETED",
        1 + i / 10,
        "content.quick-news",
      );
    const first = await w.list({ workflow: "long-form", status: "COMPLETED" });
    expect(first.body.runs).toEqual([]);
    expect(first.body.next_cursor).toBeDefined();
    expect(w.batchGets()).toBe(5);
    const second = await w.list({
      workflow: "long-form",
      status: "COMPLETED",
      cursor: first.body.next_cursor ?? "",
    });
    expect(second.body.runs.map((r) => r.run_id)).toEqual(["run_long"]);
    expect(second.body.next_cursor).toBeUndefined();
  });

  it("refuses a cursor it did not give, another tenant's, and a limit out of 1-100, reading nothing", async () => {
    const w = world();
    w.add("run_g0", "globex", "RUNNING", 0);
    w.add("run_g1", "globex", "RUNNING", 1);
    const globexPage = await w.list({ limit: "1" }, GLOBEX);
    const globexCursor = globexPage.body.next_cursor ?? "";
    expect(globexCursor).not.toBe("");
    const queried = w.index.queries;
    for (const cursor of [globexCursor, "not a cursor", "eyJ2IjoxfQ", "x".repeat(2000)]) {
      const { status, body } = await w.list({ cursor });
      expect(status, cursor).toBe(400);
      expect(body.code).toBe("invalid_request");
      expect(body.errors?.map((e) => e.path)).toEqual(["(query).cursor"]);
    }
    const foreign = await w.list({ cursor: globexCursor });
    expect(foreign.body.errors?.[0]?.message).toMatch(/another tenant/);
    for (const limit of ["0", "101", "ten", "-1", "1.5"]) {
      const { status, body } = await w.list({ limit });
      expect(status, limit).toBe(400);
      expect(body.errors?.map((e) => e.path)).toEqual(["(query).limit"]);
    }
    const bad = await w.list({ status: "DONE", workflow: "no spaces" });
    expect(bad.body.errors?.map((e) => e.path)).toEqual(["(query).workflow", "(query).status"]);
    expect(w.index.queries).toBe(queried);
    expect((await w.list({ limit: "100" })).status).toBe(200);
    expect((await w.list({ limit: "1" })).status).toBe(200);
  });

  it("a cursor names its tenant and a position, and nothing else reads as one", () => {
    const position = { listedAt: "2026-12-05T10:00:00.000Z", runId: "run_a1" };
    const cursor = runCursor("acme", position);
    expect(positionOfCursor(cursor, "acme")).toEqual(position);
    expect(() => positionOfCursor(cursor, "globex")).toThrow(RunCursorError);
    const forged = Buffer.from(
      JSON.stringify({ v: 1, t: "acme", at: "yesterday", run: "run_a1" }),
    ).toString("base64url");
    expect(() => positionOfCursor(forged, "acme")).toThrow(/no time/);
  });

  it("the service twin lists the path's tenant; a stack without the index answers not_served", async () => {
    const w = world();
    w.add("run_g0", "globex", "RUNNING", 0);
    const request: HttpRequest = {
      method: "GET",
      path: "/v1/tenants/globex/runs",
      headers: {},
      principal: "arn:aws:sts::123456789012:assumed-role/partner/s",
      requestId: "r",
    };
    const served = await handleRequest(request, w.ports);
    expect(JSON.parse(served.body).runs.map((r: { run_id: string }) => r.run_id)).toEqual([
      "run_g0",
    ]);
    const { runIndex: _none, ...without } = w.ports;
    const refused = await handleRequest({ ...request, path: "/v1/runs", claims: ACME }, without);
    expect(refused.statusCode).toBe(404);
    expect(JSON.parse(refused.body).code).toBe("not_served");
  });

  it("lists the runs the orchestrator stores, by what its commits write", async () => {
    const bus = new Bus();
    const index = new InMemoryTenantRunIndex(bus.store);
    bus.start("run_one", "quick-news");
    await bus.drain((d) => d.group === "orchestrator");
    bus.start("run_two", "long-form");
    await bus.drain((d) => d.group === "orchestrator");
    const page = await index.page("default", ["RUNNING"], 10);
    expect(page.entries.map((e) => e.runId).sort()).toEqual(["run_one", "run_two"]);
    expect(page.more).toBe(false);
    expect((await index.page("acme", ["RUNNING"], 10)).entries).toEqual([]);
  });
});

describe("A2A ListTasks (functions/front-door/a2a/list-tasks.ts)", () => {
  const task = (n: number) => `0b1c2d3e-4f50-4617-8899-aabbccddee${String(n).padStart(2, "0")}`;
  const request = (params: Partial<ListTasksRequest> = {}): ListTasksRequest => ({
    tenant: "",
    contextId: "",
    status: TaskState.TASK_STATE_UNSPECIFIED,
    pageToken: "",
    statusTimestampAfter: undefined,
    ...params,
  });
  /** Acme's A2A tasks 0-3, an A2A task of another workflow, a run started otherwise, globex's task. */
  function tasksWorld() {
    const w = world();
    const runOf = (n: number) => runIdOfTask(task(n)) ?? "";
    w.add(runOf(0), "acme", "COMPLETED", 0);
    w.add(runOf(1), "acme", "PARTIAL", 1);
    w.add(runOf(2), "acme", "RUNNING", 2);
    w.add(runOf(3), "acme", "FAILED", 3);
    w.add(runOf(4), "acme", "COMPLETED", 4, "content.quick-news");
    w.add("run_01JAAAAAAAAAAAAAAAAAAAAAAA", "acme", "COMPLETED", 5);
    w.add(runOf(6), "globex", "COMPLETED", 6);
    const ports = (tenant: string) => ({
      tenant,
      workflow: "long-form",
      workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
      runIndex: w.index,
      states: w.ports.states,
      at: "2026-12-05T12:00:00.000Z",
    });
    return { w, ports };
  }
  const ids = (response: ListTasksResponse) => response.tasks.map((t) => t.id);

  it("a page of tasks with their artifacts stops before MAX_PAGE_BYTES; without them it need not", async () => {
    const w = world();
    const runOf = (n: number) => runIdOfTask(task(n)) ?? "";
    const article = { body: "x".repeat(400_000) };
    for (let n = 0; n < 4; n++)
      w.add(runOf(n), "acme", "COMPLETED", n, "content.long-form", article);
    const ports = {
      tenant: "acme",
      workflow: "long-form",
      workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
      runIndex: w.index,
      states: w.ports.states,
      at: "2026-12-05T12:00:00.000Z",
    };
    const first = await listTasks(ports, request({ includeArtifacts: true }));
    expect(ids(first)).toEqual([task(3), task(2)]);
    const rest = await listTasks(
      ports,
      request({ includeArtifacts: true, pageToken: first.nextPageToken }),
    );
    expect(ids(rest)).toEqual([task(1), task(0)]);
    expect(rest.nextPageToken).toBe("");
    expect(ids(await listTasks(ports, request()))).toEqual([task(3), task(2), task(1), task(0)]);
  });

  it("lists the caller's tasks of the agent's workflow, newest first, as GetTask maps each run", async () => {
    const { ports } = tasksWorld();
    const acme = await listTasks(ports("acme"), request());
    expect(ids(acme)).toEqual([task(3), task(2), task(1), task(0)]);
    expect(acme.tasks.map((t) => t.status?.state)).toEqual([
      TaskState.TASK_STATE_FAILED,
      TaskState.TASK_STATE_WORKING,
      TaskState.TASK_STATE_COMPLETED,
      TaskState.TASK_STATE_COMPLETED,
    ]);
    expect(acme.tasks[0]?.metadata?.agentbus).toMatchObject({ run_status: "FAILED" });
    expect(acme).toMatchObject({ nextPageToken: "", pageSize: 50, totalSize: 4 });
    // Artifacts only when asked.
    expect(acme.tasks.every((t) => t.artifacts.length === 0)).toBe(true);
    const withArtifacts = await listTasks(ports("acme"), request({ includeArtifacts: true }));
    expect(withArtifacts.tasks[3]?.artifacts.map((a) => a.artifactId)).toEqual(["review"]);
    expect(ids(await listTasks(ports("globex"), request()))).toEqual([task(6)]);
  });

  it("filters by task state, reading only the run statuses it comes from, and by context", async () => {
    const { w, ports } = tasksWorld();
    const completed = await listTasks(
      ports("acme"),
      request({ status: TaskState.TASK_STATE_COMPLETED }),
    );
    expect(ids(completed)).toEqual([task(1), task(0)]);
    expect(w.index.queries).toBe(2);
    const working = request({ status: TaskState.TASK_STATE_WORKING });
    expect(ids(await listTasks(ports("acme"), working))).toEqual([task(2)]);
    const waiting = request({ status: TaskState.TASK_STATE_INPUT_REQUIRED });
    expect(ids(await listTasks(ports("acme"), waiting))).toEqual([]);
    const rejected = request({ status: TaskState.TASK_STATE_REJECTED });
    expect(ids(await listTasks(ports("acme"), rejected))).toEqual([]);
    const context = request({ contextId: task(1) });
    expect(ids(await listTasks(ports("acme"), context))).toEqual([task(1)]);
    expect(ids(await listTasks(ports("globex"), context))).toEqual([]);
    expect(ids(await listTasks(ports("acme"), request({ contextId: task(6) })))).toEqual([]);
  });

  it("pages with the list's cursor; another tenant's, a bad one or a status time is refused", async () => {
    const { ports } = tasksWorld();
    const first = await listTasks(ports("acme"), request({ pageSize: 3 }));
    expect(ids(first)).toEqual([task(3), task(2), task(1)]);
    const second = await listTasks(
      ports("acme"),
      request({ pageSize: 3, pageToken: first.nextPageToken }),
    );
    expect(ids(second)).toEqual([task(0)]);
    expect(second.nextPageToken).toBe("");
    const globex = listTasks(ports("globex"), request({ pageToken: first.nextPageToken }));
    await expect(globex).rejects.toThrow(RequestMalformedError);
    await expect(globex).rejects.toThrow(/another tenant/);
    await expect(listTasks(ports("acme"), request({ pageToken: "garbage!" }))).rejects.toThrow(
      RequestMalformedError,
    );
    await expect(
      listTasks(ports("acme"), request({ statusTimestampAfter: "2026-12-05T10:00:00Z" })),
    ).rejects.toThrow(UnsupportedOperationError);
    const { runIndex: _none, ...without } = ports("acme");
    await expect(listTasks(without, request())).rejects.toThrow(UnsupportedOperationError);
  });
});
