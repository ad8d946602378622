import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { LambdaFunctionURLEvent } from "aws-lambda";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EventStore, StoredState } from "../../functions/core/ports";
import { ProblemError } from "../../functions/front-door/http";
import type { Caller } from "../../functions/front-door/identity";
import { openStream, type StreamSettings } from "../../functions/front-door/stream";
import { createFrontDoorStreamHandler } from "../../functions/handlers/front-door-stream";
import type { Envelope } from "../../schemas";
import { tenantConversationId } from "../../schemas/ids";

/**
 * The streams in memory (functions/front-door/stream.ts): what a client is sent as a conversation
 * view or a run changes, how it resumes from `Last-Event-ID`, and that only the owning tenant
 * sees anything; and the stream function's own token check (its URL takes any request). The
 * same stream behind real HTTP on the local stack: test/e2e/front-door.test.ts.
 */

process.env.POWERTOOLS_METRICS_DISABLED = "true";

const ACME = { tenantId: "acme", userId: "user_1" };
const GLOBEX = { tenantId: "globex", userId: "user_2" };
const SETTINGS: StreamSettings = { pollMs: 1000, maxSeconds: 30, heartbeatSeconds: 10 };

/**
 * A state item per poll: each load returns the next of `states` (the last one repeats). Acme's
 * `conv_a` is ACME's own customer's unless `states` says whose it is.
 */
function world(given: Record<string, (StoredState | undefined)[]>) {
  const states = { [CONVERSATION_STATE]: [conversationState("cust_1")], ...given };
  let now = Date.parse("2026-12-02T10:00:00Z");
  const reads = new Map<string, number>();
  const store: Pick<EventStore, "load"> = {
    async load({ state }) {
      const key = `${state?.type}#${state?.id}`;
      const seq = states[key] ?? [];
      const at = reads.get(key) ?? 0;
      reads.set(key, at + 1);
      return { inboxHit: false, checkpoint: 0, state: seq[Math.min(at, seq.length - 1)] };
    },
  };
  const ports = {
    store,
    clock: { now: () => new Date(now) },
    sleep: async (ms: number) => {
      now += ms;
    },
  };
  return { ports, reads };
}

function view(revision: number, tenant: string | undefined, turns: Record<string, unknown>[]) {
  return {
    aggregate: { type: "conversation_view", id: "conv_a" },
    revision,
    version: revision,
    data: {
      conversation_id: "conv_a",
      ...(tenant ? { tenant_id: tenant } : {}),
      version: revision,
      turns: Object.fromEntries(turns.map((t) => [t.task_id, t])),
      turn_order: turns.map((t) => t.task_id),
    },
  } as StoredState;
}

/** Acme's `conv_a` as the conversation role keeps it: whose it is, its first message's customer. */
function conversationState(customer: string, tenant = "acme") {
  const id = tenantConversationId("acme", "conv_a");
  return {
    aggregate: { type: "conversation", id },
    revision: 1,
    version: 1,
    data: {
      conversation_id: id,
      customer_id: customer,
      tenant_id: tenant,
      version: 1,
      messages: [],
    },
  } as StoredState;
}

function run(revision: number, status: string, tenant = "acme") {
  return {
    aggregate: { type: "dag_run", id: "run_a" },
    revision,
    version: revision,
    data: {
      tenant_id: tenant,
      run: {
        run_id: "run_a",
        workflow: "quick-news",
        status,
        nodes: { write: { state: status === "RUNNING" ? "RUNNING" : "SUCCEEDED" } },
      },
    },
  } as unknown as StoredState;
}

const received = { task_id: "task_1", status: "received" };
const delivered = { task_id: "task_1", status: "delivered", reply_text: "It ships today." };
const second = { task_id: "task_2", status: "received" };

/** Everything a stream sends, as its frames (`event`, `id`, parsed `data`) and comments. */
async function collect(
  states: Record<string, (StoredState | undefined)[]>,
  path: string,
  headers: Record<string, string> = {},
  settings = SETTINGS,
) {
  const { ports } = world(states);
  const stream = await openStream({ method: "GET", path, headers }, ACME, ports, settings);
  let text = "";
  await stream.run({ write: (t) => (text += t), closed: () => false });
  return parseFrames(text);
}

function parseFrames(text: string) {
  return text
    .split("\n\n")
    .filter((block) => block !== "")
    .map((block) => {
      if (block.startsWith(":")) return { comment: block.slice(1).trim() };
      const fields: Record<string, string> = {};
      for (const line of block.split("\n")) {
        const at = line.indexOf(": ");
        fields[line.slice(0, at)] = line.slice(at + 2);
      }
      return {
        ...fields,
        ...(fields.data === undefined ? {} : { data: JSON.parse(fields.data) }),
      };
    }) as {
    event?: string;
    id?: string;
    data?: Record<string, unknown>;
    retry?: string;
    comment?: string;
  }[];
}

/** Acme's `conv_a`, keyed by the tenant and the client's id: its view and its state. */
const CONVERSATION = `conversation_view#${tenantConversationId("acme", "conv_a")}`;
const CONVERSATION_STATE = `conversation#${tenantConversationId("acme", "conv_a")}`;
const RUN = "dag_run#run_a";

describe("a conversation's stream", () => {
  it("sends each turn when it is new or changed, with the view's revision as the event id", async () => {
    const frames = await collect(
      {
        [CONVERSATION]: [
          view(1, "acme", [received]),
          view(1, "acme", [received]),
          view(3, "acme", [delivered]),
          view(4, "acme", [delivered, second]),
        ],
      },
      "/v1/conversations/conv_a/stream",
    );
    expect(frames[0]).toEqual({ retry: "1000" });
    const events = frames.filter((f) => f.event === "conversation");
    expect(events.map((f) => ({ id: f.id, turns: f.data?.turns }))).toEqual([
      { id: "1", turns: [received] },
      { id: "3", turns: [delivered] },
      { id: "4", turns: [second] },
    ]);
    // A keep-alive comment every ten seconds of the thirty the stream lasts.
    expect(frames.filter((f) => f.comment === "keep-alive")).toHaveLength(2);
  });

  it("resumes from Last-Event-ID: nothing while nothing changed, then only what changed", async () => {
    const frames = await collect(
      {
        [CONVERSATION]: [
          view(3, "acme", [delivered]),
          view(3, "acme", [delivered]),
          view(4, "acme", [delivered, second]),
        ],
      },
      "/v1/conversations/conv_a/stream",
      { "last-event-id": "3" },
    );
    expect(frames.filter((f) => f.event === "conversation").map((f) => f.data?.turns)).toEqual([
      [second],
    ]);
  });

  it("sends every turn again to a client that missed a change", async () => {
    const frames = await collect(
      { [CONVERSATION]: [view(4, "acme", [delivered, second])] },
      "/v1/conversations/conv_a/stream",
      { "last-event-id": "1" },
    );
    expect(frames.filter((f) => f.event === "conversation").map((f) => f.data?.turns)).toEqual([
      [delivered, second],
    ]);
  });

  it("waits for a view that is not there yet, and ends with not_found if it is another tenant's", async () => {
    const frames = await collect(
      { [CONVERSATION]: [undefined, undefined, view(2, "globex", [received])] },
      "/v1/conversations/conv_a/stream",
    );
    expect(frames.filter((f) => f.event)).toEqual([
      { event: "error", data: { code: "not_found", detail: "no conversation conv_a" } },
    ]);
  });

  it("answers 404 for another tenant's conversation before anything is sent, like GET", async () => {
    const { ports } = world({ [CONVERSATION]: [view(1, "globex", [received])] });
    const opened = openStream(
      { method: "GET", path: "/v1/conversations/conv_a/stream", headers: {} },
      ACME,
      ports,
      SETTINGS,
    );
    await expect(opened).rejects.toMatchObject({ problem: { code: "not_found" } });
  });

  it("answers 404 for another customer's conversation of the tenant before anything is sent; a service reads it", async () => {
    const { ports } = world({
      [CONVERSATION]: [view(1, "acme", [received])],
      [CONVERSATION_STATE]: [conversationState("cust_2")],
    });
    const open = (caller: Caller) =>
      openStream(
        { method: "GET", path: "/v1/conversations/conv_a/stream", headers: {} },
        caller,
        ports,
        SETTINGS,
      );
    await expect(open(ACME)).rejects.toMatchObject({
      problem: { code: "not_found", detail: "no conversation conv_a" },
    });
    const service = { tenantId: "acme", service: "arn:aws:iam::123456789012:role/partner" };
    await expect(open(service)).resolves.toBeDefined();
  });

  it("a conversation another customer opens after the stream did ends it with not_found, none of its turns sent", async () => {
    const frames = await collect(
      {
        [CONVERSATION]: [undefined, undefined, view(1, "acme", [received])],
        [CONVERSATION_STATE]: [undefined, conversationState("cust_2")],
      },
      "/v1/conversations/conv_a/stream",
    );
    expect(frames.filter((f) => f.event)).toEqual([
      { event: "error", data: { code: "not_found", detail: "no conversation conv_a" } },
    ]);
  });

  it("refuses a bad id or Last-Event-ID (400) and an unknown stream (404)", async () => {
    const { ports } = world({});
    const open = (path: string, headers: Record<string, string> = {}) =>
      openStream({ method: "GET", path, headers }, ACME, ports, SETTINGS).then(
        () => "opened",
        (error: ProblemError) => error.problem.code,
      );
    expect(await open("/v1/conversations/not-an-id/stream")).toBe("invalid_request");
    expect(await open("/v1/conversations/conv_a/stream", { "last-event-id": "x" })).toBe(
      "invalid_request",
    );
    expect(await open("/v1/conversations/conv_a/stream", { "last-event-id": "-1" })).toBe(
      "invalid_request",
    );
    expect(await open("/v1/conversations/conv_a/turns")).toBe("not_found");
  });

  it("stops reading when the client has gone", async () => {
    const { ports, reads } = world({ [CONVERSATION]: [view(1, "acme", [received])] });
    const stream = await openStream(
      { method: "GET", path: "/v1/conversations/conv_a/stream", headers: {} },
      ACME,
      ports,
      SETTINGS,
    );
    let writes = 0;
    await stream.run({ write: () => void writes++, closed: () => writes >= 2 });
    // The check before opening, then one poll: the retry and the turn were written, then it left.
    expect(reads.get(CONVERSATION)).toBe(2);
  });
});

describe("a run's stream", () => {
  it("sends the run at each revision, then `end` with its status, and closes", async () => {
    const frames = await collect(
      { [RUN]: [run(1, "RUNNING"), run(1, "RUNNING"), run(2, "RUNNING"), run(5, "COMPLETED")] },
      "/v1/runs/run_a/stream",
    );
    const events = frames.filter((f) => f.event);
    expect(events.map((f) => [f.event, f.id, f.data?.status])).toEqual([
      ["run", "1", "RUNNING"],
      ["run", "2", "RUNNING"],
      ["run", "5", "COMPLETED"],
      ["end", undefined, "COMPLETED"],
    ]);
    expect(events[2]?.data).toEqual({
      run_id: "run_a",
      workflow: "quick-news",
      status: "COMPLETED",
      nodes: { write: { state: "SUCCEEDED" } },
    });
  });

  it("resumed at the revision that ended it, only says `end`", async () => {
    const frames = await collect({ [RUN]: [run(5, "PARTIAL")] }, "/v1/runs/run_a/stream", {
      "last-event-id": "5",
    });
    expect(frames.filter((f) => f.event).map((f) => f.event)).toEqual(["end"]);
  });

  it("is 404 not_served where the stack runs no workflows, before anything is read", async () => {
    const { ports, reads } = world({ [RUN]: [run(1, "RUNNING")] });
    const opened = openStream(
      { method: "GET", path: "/v1/runs/run_a/stream", headers: {} },
      ACME,
      ports,
      { ...SETTINGS, features: ["conversations", "tasks"] },
    );
    await expect(opened).rejects.toMatchObject({
      problem: {
        code: "not_served",
        detail: expect.stringContaining("none of its roles takes workflow.start.requested"),
      },
    });
    expect(reads.size).toBe(0);
  });

  it("is 404 for another tenant's run", async () => {
    const { ports } = world({ [RUN]: [run(1, "RUNNING", "globex")] });
    await expect(
      openStream(
        { method: "GET", path: "/v1/runs/run_a/stream", headers: {} },
        ACME,
        ports,
        SETTINGS,
      ),
    ).rejects.toBeInstanceOf(ProblemError);
  });

  it("a start the orchestrator refused ends the stream at once: the run REJECTED with why, then `end`; another tenant's is 404", async () => {
    const refusal = {
      code: "workflow.map_role_without_items",
      message: "map node drafts runs writing",
    };
    // The orchestrator's refusal: a null state, and `workflow.rejected` on the run's stream.
    const refused = {
      aggregate: { type: "dag_run", id: "run_a" },
      revision: 1,
      version: 1,
      data: null,
    };
    const { ports } = world({ [RUN]: [refused as unknown as StoredState] });
    const rejected = {
      event_id: "01JREJECTED000000000000000",
      event_type: "workflow.rejected",
      tenant_id: "acme",
      aggregate: { type: "dag_run", id: "run_a", version: 1 },
      payload: { run_id: "run_a", request: "start", ...refusal },
    } as unknown as Envelope;
    const withStreams = {
      ...ports,
      events: { readStream: async () => [rejected] },
    };
    const path = "/v1/runs/run_a/stream";
    const started = ports.clock.now().getTime();
    const stream = await openStream(
      { method: "GET", path, headers: {} },
      ACME,
      withStreams,
      SETTINGS,
    );
    let text = "";
    await stream.run({ write: (t) => (text += t), closed: () => false });
    const events = parseFrames(text).filter((f) => f.event);
    expect(events).toEqual([
      {
        event: "run",
        id: "1",
        data: { run_id: "run_a", status: "REJECTED", nodes: {}, error: refusal },
      },
      { event: "end", data: { run_id: "run_a", status: "REJECTED" } },
    ]);
    // Ended at the refusal, not polled until the stream's time was up.
    expect(ports.clock.now().getTime() - started).toBe(0);
    await expect(
      openStream({ method: "GET", path, headers: {} }, GLOBEX, withStreams, SETTINGS),
    ).rejects.toMatchObject({ problem: { code: "not_found" } });
  });
});

describe("the stream function", () => {
  const ISSUER_PATH = "/issuer";
  let issuer = "";
  let sign: (
    claims: Record<string, unknown>,
    options?: { audience?: string; expires?: "expired" | "never" },
  ) => Promise<string>;
  let server: ReturnType<typeof createServer>;

  beforeAll(async () => {
    // RSA, as an HTTP API's JWT authorizer takes.
    const { publicKey, privateKey } = await generateKeyPair("RS256");
    const jwk = { ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256" };
    // An OIDC issuer on loopback: its discovery document and its JWKS.
    server = createServer((req, res) => {
      res.setHeader("content-type", "application/json");
      if (req.url === `${ISSUER_PATH}/.well-known/openid-configuration`)
        res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
      else if (req.url === `${ISSUER_PATH}/jwks`) res.end(JSON.stringify({ keys: [jwk] }));
      else res.writeHead(404).end("{}");
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}${ISSUER_PATH}`;
    sign = (claims, options = {}) => {
      const token = new SignJWT(claims)
        .setProtectedHeader({ alg: "RS256", kid: "k1" })
        .setIssuer(issuer)
        .setAudience(options.audience ?? "agentbus-api");
      if (options.expires !== "never")
        token.setExpirationTime(
          options.expires === "expired" ? Math.floor(Date.now() / 1000) - 60 : "1h",
        );
      return token.sign(privateKey);
    };
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  async function call(
    headers: Record<string, string>,
    query?: Record<string, string>,
    env: Record<string, string> = {},
  ) {
    const { ports } = world({
      [CONVERSATION]: [view(1, "acme", [received])],
      [CONVERSATION_STATE]: [conversationState("cust_u1")],
    });
    const handler = createFrontDoorStreamHandler({
      env: {
        STATE_TABLE: "state",
        JWT_ISSUER: issuer,
        JWT_AUDIENCE: "agentbus-api, agentbus-console",
        STREAM_MAX_SECONDS: "2",
        ...env,
      },
      store: ports.store,
      clock: ports.clock,
      sleep: ports.sleep,
    });
    let status = 0;
    let head: Record<string, string> = {};
    let body = "";
    const event = {
      rawPath: "/v1/conversations/conv_a/stream",
      headers,
      ...(query ? { queryStringParameters: query } : {}),
      requestContext: { http: { method: "GET" }, requestId: "r1" },
    } as unknown as LambdaFunctionURLEvent;
    await handler(event, (statusCode, headers) => {
      status = statusCode;
      head = headers;
      return {
        write: (text) => {
          body += text;
        },
        end: () => {},
        closed: () => false,
      };
    });
    return { status, head, body };
  }

  it("streams to a token of the issuer, found by OIDC discovery, in the header or the query", async () => {
    const token = await sign({ sub: "u1", tenant_id: "acme" });
    for (const answer of [
      await call({ authorization: `Bearer ${token}` }),
      await call({}, { access_token: token }),
    ]) {
      expect(answer.status).toBe(200);
      expect(answer.head["content-type"]).toBe("text/event-stream; charset=utf-8");
      expect(parseFrames(answer.body).find((f) => f.event === "conversation")?.data?.turns).toEqual(
        [received],
      );
    }
  });

  it("refuses a missing, expired, unexpiring or foreign token (401 naming the problem) and a token without a tenant (403)", async () => {
    const answers = {
      none: await call({}),
      expired: await call({
        authorization: `Bearer ${await sign({ sub: "u1", tenant_id: "acme" }, { expires: "expired" })}`,
      }),
      // RFC 9068 §2.2: an access token has an expiry; one without is refused, not taken for ever.
      never: await call({
        authorization: `Bearer ${await sign({ sub: "u1", tenant_id: "acme" }, { expires: "never" })}`,
      }),
      audience: await call({
        authorization: `Bearer ${await sign({ sub: "u1", tenant_id: "acme" }, { audience: "other" })}`,
      }),
      foreign: await call({
        authorization: `Bearer ${(await sign({ sub: "u1", tenant_id: "acme" })).slice(0, -4)}AAAA`,
      }),
      tenantless: await call({ authorization: `Bearer ${await sign({ sub: "u1" })}` }),
    };
    const summary = Object.fromEntries(
      Object.entries(answers).map(([name, a]) => [
        name,
        [a.status, (JSON.parse(a.body) as { code: string }).code, a.head["www-authenticate"]],
      ]),
    );
    expect(summary).toEqual({
      none: [401, "unauthorized", expect.stringContaining("no bearer token")],
      expired: [401, "unauthorized", expect.stringContaining("the token has expired")],
      never: [401, "unauthorized", expect.stringContaining("exp claim")],
      audience: [401, "unauthorized", expect.stringContaining("aud claim")],
      foreign: [401, "unauthorized", expect.stringContaining("not signed by the issuer")],
      tenantless: [403, "forbidden", undefined],
    });
    // The challenge's parameters are comma-separated (RFC 9110 §11.6.1).
    expect(answers.none.head["www-authenticate"]).toMatch(
      /^Bearer error="invalid_token", error_description="[^"]+"$/,
    );
  });

  it("answers 404 not_served for a conversation's stream on a stack whose FEATURES has no conversations", async () => {
    const token = await sign({ sub: "u1", tenant_id: "acme" });
    const answer = await call({ authorization: `Bearer ${token}` }, undefined, { FEATURES: "" });
    expect(answer.status).toBe(404);
    expect(answer.head["content-type"]).toBe("application/problem+json");
    expect(JSON.parse(answer.body)).toMatchObject({ code: "not_served", status: 404 });
  });
});
