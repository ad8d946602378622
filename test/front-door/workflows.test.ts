import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { AwsClient } from "../../functions/adapters/aws/client";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import type { PublishFailure } from "../../functions/core/ports";
import { WORKFLOWS_ENV, workflowsEnvValue } from "../../functions/core/stack-workflows";
import { InMemoryAcceptedRequests } from "../../functions/front-door/accepted";
import { type FrontDoorPorts, handleRequest } from "../../functions/front-door/api";
import { InMemoryClientSequences } from "../../functions/front-door/client-seq";
import type { HttpRequest } from "../../functions/front-door/http";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import { createFrontDoorHandler } from "../../functions/handlers/front-door";
import { REFERENCE_WORKFLOWS } from "../../functions/roles/modules";
import { workflowCatalog } from "../../functions/roles/orchestrator/catalog";
import { type Envelope, registry } from "../../schemas";

/**
 * The front door's workflow routes in memory: a tenant registers a definition (`PUT`), with the
 * checks of `agentbus workflow put` and every problem named; lists and reads its own, the shared
 * and the stack's, never another tenant's; and a start's body must fit the workflow's
 * declared input.
 */

const ACME = { tenant_id: "acme", sub: "user-acme" };
const GLOBEX = { tenant_id: "globex", sub: "user-globex" };
const STEP_ROLES = ["summarize", "tally"];

const SUMMARY = {
  name: "summary",
  nodes: [
    { id: "count", role: "tally" },
    { id: "sum", role: "summarize" },
  ],
  edges: [{ from: "count", to: "sum" }],
  input: {
    type: "object",
    properties: {
      subject: { type: "string", minLength: 1, maxLength: 100, description: "what to summarize" },
      depth: { type: "integer", minimum: 1, maximum: 5 },
      tone: { type: "string", enum: ["plain", "formal"] },
    },
    required: ["subject"],
  },
};

/** A workflow the stack was given (`new AgentBus(app, id, { workflows })`), at two versions. */
const STACK_TALLY = defineWorkflow({
  name: "stack-tally",
  version: 1,
  nodes: [{ id: "count", role: "tally" }],
  edges: [],
});
const STACK_TALLY_V2 = defineWorkflow({
  ...STACK_TALLY,
  version: 2,
  input: { type: "object", properties: { subject: { type: "string" } }, required: ["subject"] },
});

/** The reference stack's workflows as a list shows them (content production's). */
const REFERENCE_LISTED = [
  { name: "content.quick-news", alias: "quick-news", scope: "stack", versions: [1, 2, 3] },
  { name: "content.long-form", alias: "long-form", scope: "stack", versions: [1, 2, 3, 4] },
  { name: "content.fact-check", scope: "stack", versions: [1] },
];

/** The front door of the reference stack, given `stack` besides its workflows. */
function world(stack: readonly WorkflowDefinition[] = []) {
  const published: Envelope[] = [];
  const workflows = new InMemoryWorkflowRegistry();
  const clock = { now: () => new Date("2026-12-02T10:00:00.000Z") };
  const ports: FrontDoorPorts = {
    publisher: {
      async publish(_topic, envelopes): Promise<PublishFailure[]> {
        published.push(...envelopes);
        return [];
      },
    },
    store: { load: async () => ({ inboxHit: false, checkpoint: 0, state: undefined }) },
    accepted: new InMemoryAcceptedRequests(),
    sequences: new InMemoryClientSequences(),
    tasks: { eventsByTask: async () => [] },
    limits: new InMemoryTenantLimits(),
    controls: new InMemoryModelControls(),
    runs: new InMemoryRunsInFlight(),
    states: { loadStates: async () => [] },
    registry,
    workflows: {
      registry: workflows,
      stepRoles: STEP_ROLES,
      compiled: workflowCatalog([...REFERENCE_WORKFLOWS, ...stack]),
    },
    ids: { next: () => ulid() },
    clock,
  };
  const send = (request: Partial<HttpRequest> & Pick<HttpRequest, "method" | "path">) =>
    handleRequest({ headers: {}, requestId: "req-1", ...request }, ports);
  const put = (name: string, body: unknown, claims: Record<string, unknown> = ACME) =>
    send({
      method: "PUT",
      path: `/v1/workflows/${name}`,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      claims,
    });
  const start = (name: string, body: unknown, claims: Record<string, unknown> = ACME) =>
    send({
      method: "POST",
      path: `/v1/workflows/${name}/runs`,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      claims,
    });
  return { send, put, start, published, workflows };
}

const json = (response: { body: string }) => JSON.parse(response.body) as Record<string, unknown>;

describe("PUT /v1/workflows/{workflow_name}", () => {
  it("registers version 1 in the caller's tenant (201), the same again is unchanged (200), a change is v2", async () => {
    const { put, workflows } = world();
    const first = await put("summary", SUMMARY);
    expect(first.statusCode).toBe(201);
    expect(json(first)).toEqual({
      outcome: "stored",
      name: "summary",
      version: 1,
      scope: "tenant",
      links: { workflow: "/v1/workflows/summary" },
    });
    const again = await put("summary", SUMMARY);
    expect(again.statusCode).toBe(200);
    expect(json(again)).toMatchObject({ outcome: "unchanged", version: 1 });
    const changed = await put("summary", { ...SUMMARY, edges: [], nodes: [SUMMARY.nodes[0]] });
    expect(json(changed)).toMatchObject({ outcome: "stored", version: 2 });
    expect(await workflows.list("acme")).toEqual([{ name: "summary", versions: [1, 2] }]);
    expect(await workflows.list(EVERY_TENANT)).toEqual([]);
    expect(await workflows.list("globex")).toEqual([]);
  });

  it("refuses a definition naming every problem (400), and stores nothing", async () => {
    const { put, workflows } = world();
    const bad = {
      name: "summary",
      nodes: [
        { id: "count", role: "poet" },
        { id: "count", role: "tally" },
      ],
      edges: [{ from: "count", to: "nowhere" }],
      input: {
        type: "object",
        properties: { n: { type: "boolean", minimum: 1 } },
        required: ["m"],
      },
    };
    const refused = await put("summary", bad);
    expect(refused.statusCode).toBe(400);
    const body = json(refused);
    expect(body.code).toBe("invalid_request");
    const errors = body.errors as { path: string; message: string }[];
    const text = errors.map((e) => `${e.path}: ${e.message}`).join("\n");
    expect(text).toContain("minimum and maximum bound a number, not a boolean");
    expect(text).toContain("m is required but not among the properties (n)");
    expect(await workflows.list("acme")).toEqual([]);
    // The schema is sound, the structure is not: every structural problem is named.
    const structural = await put("summary", { ...bad, input: undefined });
    const codes = (json(structural).errors as { message: string }[]).map((e) => e.message);
    expect(codes.some((m) => m.includes("[dag.duplicate_node]"))).toBe(true);
    expect(codes.some((m) => m.includes("[dag.unknown_role]"))).toBe(true);
    expect(codes.some((m) => m.includes("[dag.unknown_node]"))).toBe(true);
    expect(json(structural).detail).toContain("this stack's step roles: summarize, tally");
  });

  it("refuses a body whose name is not the path's, a stack workflow's alias, and a taken version (409)", async () => {
    const { put } = world();
    const other = await put("other", SUMMARY);
    expect(other.statusCode).toBe(400);
    expect(json(other).errors).toEqual([{ path: "(body).name", message: 'must be "other"' }]);
    const reserved = await put("quick-news", { ...SUMMARY, name: "quick-news" });
    expect(reserved.statusCode).toBe(400);
    expect(JSON.stringify(json(reserved).errors)).toContain("workflow.reserved_name");
    expect((await put("summary", { ...SUMMARY, version: 3 })).statusCode).toBe(201);
    const taken = await put("summary", { ...SUMMARY, version: 3, edges: [] });
    expect(taken.statusCode).toBe(409);
    expect(json(taken).code).toBe("version_taken");
  });
});

describe("GET /v1/workflows and /v1/workflows/{workflow_name}", () => {
  it("lists the stack's, the tenant's own and the shared workflows; another tenant's never", async () => {
    const { put, send, workflows } = world();
    await put("summary", SUMMARY, GLOBEX);
    await putWorkflow(
      workflows,
      EVERY_TENANT,
      { ...SUMMARY, name: "digest" },
      { roles: STEP_ROLES },
    );
    const listed = await send({ method: "GET", path: "/v1/workflows", claims: ACME });
    expect(json(listed)).toEqual({
      workflows: [...REFERENCE_LISTED, { name: "digest", scope: "shared", versions: [1] }],
    });
    const foreign = await send({ method: "GET", path: "/v1/workflows/summary", claims: ACME });
    expect(foreign.statusCode).toBe(404);
    const own = await send({ method: "GET", path: "/v1/workflows/summary", claims: GLOBEX });
    expect(json(own)).toMatchObject({
      name: "summary",
      scope: "tenant",
      versions: [1],
      definition: { name: "summary", version: 1, input: { required: ["subject"] } },
    });
    // A tenant cannot overwrite the shared one: its put goes to its own scope.
    await put("digest", { ...SUMMARY, name: "digest", edges: [], nodes: [SUMMARY.nodes[0]] });
    expect(await workflows.list(EVERY_TENANT)).toEqual([{ name: "digest", versions: [1] }]);
    expect(await workflows.list("acme")).toEqual([{ name: "digest", versions: [1] }]);
  });

  it("shows a version with ?version=N, and refuses a version that is not one (400) or not there (404)", async () => {
    const { put, send } = world();
    await put("summary", SUMMARY);
    await put("summary", { ...SUMMARY, input: undefined });
    const get = (query: string) =>
      send({
        method: "GET",
        path: "/v1/workflows/summary",
        query: Object.fromEntries(new URLSearchParams(query)),
        claims: ACME,
      });
    expect(json(await get(""))).toMatchObject({ scope: "tenant", versions: [1, 2] });
    expect((json(await get("")).definition as { version: number }).version).toBe(2);
    const first = json(await get("version=1"));
    expect(first).toMatchObject({ name: "summary", scope: "tenant", versions: [1, 2] });
    expect(first.definition).toMatchObject({ version: 1, input: { required: ["subject"] } });
    const builtIn = await send({
      method: "GET",
      path: "/v1/workflows/quick-news",
      query: { version: "1" },
      claims: ACME,
    });
    expect(json(builtIn).definition).toMatchObject({ name: "content.quick-news", version: 1 });
    for (const bad of ["version=0", "version=two", "version=1.5"]) {
      const refused = await get(bad);
      expect(refused.statusCode, bad).toBe(400);
      expect(json(refused).errors).toEqual([
        { path: "(query).version", message: "must be a whole number, at least 1" },
      ]);
    }
    const missing = await get("version=7");
    expect(missing.statusCode).toBe(404);
    expect(json(missing).detail).toContain('no workflow "summary" v7');
  });

  it("serves the same routes to a service under its tenant's prefix", async () => {
    const { send } = world();
    const principal = "arn:aws:iam::123456789012:role/partner";
    const put = await send({
      method: "PUT",
      path: "/v1/tenants/acme/workflows/summary",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(SUMMARY),
      principal,
    });
    expect(put.statusCode).toBe(201);
    const read = await send({ method: "GET", path: "/v1/workflows/summary", claims: ACME });
    expect(read.statusCode).toBe(200);
  });
});

describe("POST /v1/workflows/{workflow_name}/runs against the declared input", () => {
  it("starts a registered workflow whose input fits; refuses one that does not, naming every problem", async () => {
    const { put, start, published } = world();
    await put("summary", SUMMARY);
    const refused = await start("summary", { depth: 9, tone: "angry", extra: true });
    expect(refused.statusCode).toBe(400);
    expect(json(refused).errors).toEqual([
      { path: "subject", message: "required" },
      { path: "depth", message: "must be at most 5 (got 9)" },
      { path: "tone", message: 'must be one of "plain", "formal" (got "angry")' },
    ]);
    expect(published).toEqual([]);
    const started = await start("summary", { subject: "tides", depth: 2, extra: true });
    expect(started.statusCode).toBe(202);
    expect(published[0]?.payload).toMatchObject({
      workflow_name: "summary",
      request: { subject: "tides", depth: 2, extra: true },
    });
    expect((await start("summary", { subject: "x" }, GLOBEX)).statusCode).toBe(404);
  });

  it("checks a content workflow's declared input: a topic hint", async () => {
    const { start, published } = world();
    const refused = await start("quick-news", { topic: "no hint" });
    expect(json(refused).errors).toEqual([{ path: "topic_hint", message: "required" }]);
    expect((await start("quick-news", { topic_hint: "tides" })).statusCode).toBe(202);
    expect(published).toHaveLength(1);
  });
});

describe("the stack's workflows at the front door (WORKFLOWS, the orchestrator's value)", () => {
  it("lists, shows and starts them as scope stack, beside the registered ones", async () => {
    const { send, start, published, put } = world([STACK_TALLY, STACK_TALLY_V2]);
    await put("summary", SUMMARY);
    const listed = json(await send({ method: "GET", path: "/v1/workflows", claims: ACME }));
    expect(listed.workflows).toEqual([
      ...REFERENCE_LISTED,
      { name: "stack-tally", scope: "stack", versions: [1, 2] },
      { name: "summary", scope: "tenant", versions: [1] },
    ]);
    const shown = json(
      await send({ method: "GET", path: "/v1/workflows/stack-tally", claims: GLOBEX }),
    );
    expect(shown).toMatchObject({ name: "stack-tally", scope: "stack", versions: [1, 2] });
    expect(shown.definition).toEqual(JSON.parse(JSON.stringify(STACK_TALLY_V2)));
    const v1 = await send({
      method: "GET",
      path: "/v1/workflows/stack-tally",
      query: { version: "1" },
      claims: ACME,
    });
    expect(json(v1).definition).toEqual(JSON.parse(JSON.stringify(STACK_TALLY)));
    // A start runs the newest version: its declared input is checked.
    const refused = await start("stack-tally", {});
    expect(json(refused).errors).toEqual([{ path: "subject", message: "required" }]);
    const started = await start("stack-tally", { subject: "tides" }, GLOBEX);
    expect(started.statusCode).toBe(202);
    expect(published.map((e) => [e.tenant_id, e.payload])).toEqual([
      ["globex", expect.objectContaining({ workflow_name: "stack-tally" })],
    ]);
  });

  it("refuses a put of a stack workflow's name, and shadows one registered before the stack took it", async () => {
    const before = world();
    await before.put("stack-tally", { ...SUMMARY, name: "stack-tally" });
    expect(await before.workflows.list("acme")).toEqual([{ name: "stack-tally", versions: [1] }]);
    // The same registry, behind a stack now given stack-tally.
    const { send, put, workflows } = world([STACK_TALLY]);
    await putWorkflow(
      workflows,
      "acme",
      { ...SUMMARY, name: "stack-tally" },
      { roles: STEP_ROLES },
    );
    const refused = await put("stack-tally", { ...SUMMARY, name: "stack-tally", version: 2 });
    expect(refused.statusCode).toBe(400);
    expect(JSON.stringify(json(refused).errors)).toContain("workflow.reserved_name");
    expect(await workflows.list("acme")).toEqual([{ name: "stack-tally", versions: [1] }]);
    const listed = json(await send({ method: "GET", path: "/v1/workflows", claims: ACME }));
    expect(listed.workflows).toContainEqual({ name: "stack-tally", scope: "stack", versions: [1] });
    expect(JSON.stringify(listed.workflows)).not.toContain('"tenant"');
    const shown = json(
      await send({ method: "GET", path: "/v1/workflows/stack-tally", claims: ACME }),
    );
    expect(shown).toMatchObject({ scope: "stack", definition: { nodes: [{ id: "count" }] } });
    expect((shown.definition as { input?: unknown }).input).toBeUndefined();
  });
});

describe("the front door's function given the stack's WORKFLOWS", () => {
  /** A state table with no item: every registry read finds nothing. */
  const emptyTable: AwsClient = {
    send: async <_I extends object, O extends object>() =>
      ({ $metadata: {} }) as unknown as O & { readonly $metadata: Record<string, never> },
  };
  const env = (workflows: string) => ({
    STATE_TABLE: "state",
    EVENTS_TABLE: "events",
    BUS_EVENTS: "events-bus",
    [WORKFLOWS_ENV]: workflows,
  });
  const event = (path: string, query?: Record<string, string>) =>
    ({
      rawPath: path,
      headers: {},
      isBase64Encoded: false,
      ...(query ? { queryStringParameters: query } : {}),
      requestContext: {
        requestId: "req-1",
        http: { method: "GET" },
        authorizer: { jwt: { claims: ACME } },
      },
    }) as unknown as Parameters<ReturnType<typeof createFrontDoorHandler>>[0];

  it("lists and shows them, a version from the query, as the orchestrator was given them", async () => {
    const value = workflowsEnvValue([STACK_TALLY, STACK_TALLY_V2]);
    const handler = createFrontDoorHandler({ env: env(value), dynamodb: emptyTable });
    const listed = await handler(event("/v1/workflows"));
    expect(JSON.parse(listed.body ?? "{}").workflows).toContainEqual({
      name: "stack-tally",
      scope: "stack",
      versions: [1, 2],
    });
    const first = await handler(event("/v1/workflows/stack-tally", { version: "1" }));
    expect(first.statusCode).toBe(200);
    expect(JSON.parse(first.body ?? "{}").definition).toEqual(
      JSON.parse(JSON.stringify(STACK_TALLY)),
    );
  });

  it("refuses to start on a WORKFLOWS that is not the stack's workflows, naming it", () => {
    expect(() => createFrontDoorHandler({ env: env("[1]"), dynamodb: emptyTable })).toThrow(
      /WORKFLOWS/,
    );
  });
});
