import { createHash } from "node:crypto";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import { TransientError } from "../../functions/core/errors";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import { InMemoryCustomerKeys } from "../../functions/core/personal-data/customer-keys";
import { localKeyWrapping } from "../../functions/core/personal-data/local-key-wrapping";
import { isSealed, Vault } from "../../functions/core/personal-data/vault";
import type { PublishFailure } from "../../functions/core/ports";
import { RETENTION } from "../../functions/core/retention";
import type { Role } from "../../functions/core/role";
import { parseTraceparent, ulidHex } from "../../functions/core/trace-context";
import { InMemoryAcceptedRequests } from "../../functions/front-door/accepted";
import {
  type FrontDoorPorts,
  type FrontDoorSettings,
  handleRequest,
} from "../../functions/front-door/api";
import { BacklogGate } from "../../functions/front-door/backlog";
import { InMemoryClientSequences } from "../../functions/front-door/client-seq";
import type { HttpRequest } from "../../functions/front-door/http";
import { userIdOf } from "../../functions/front-door/identity";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import openapi from "../../functions/front-door/openapi.json";
import {
  InMemoryRunsInFlight,
  UNSTARTED_RUN_SECONDS,
} from "../../functions/front-door/runs-in-flight";
import { conversationRole } from "../../functions/roles/customer-support/conversation/conversation";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { Feature } from "../../functions/roles/features";
import { type Envelope, registry } from "../../schemas";
import { tenantConversationId } from "../../schemas/ids";
import { Bus } from "../core/workflow-bus";
import {
  REFERENCE_FRONT_DOOR_WORKFLOWS,
  REFERENCE_STEP_ROLES,
  referenceOrchestrator,
} from "../support/reference";

/**
 * The front door in memory: what each route answers, what it puts on the bus, and that a tenant
 * only ever sees its own conversations. The same routes run behind real HTTP on the local stack
 * (test/e2e/front-door.test.ts).
 */

const ACME_CONV_A1 = tenantConversationId("acme", "conv_a1");
const ACME = { tenant_id: "acme", sub: "7b0c2a4e-5d1f-4c3b-9a8e-2f6d1c0b9e7a" };
const GLOBEX = { tenant_id: "globex", sub: "auth0|5f7c8ec7c33c6c004bbafe82" };

interface WorldOptions {
  readonly failPublish?: "transient" | "entry";
  readonly perMinute?: number;
  readonly backlog?: FrontDoorPorts["backlog"];
}

/** The runs' states the views hold (what `loadStates` reads when a tenant is at its cap). */
function statesIn(views: Map<string, unknown>): FrontDoorPorts["states"] {
  return {
    async loadStates(refs) {
      return refs.flatMap((ref) => {
        const key = `${ref.type}#${ref.id}`;
        return views.has(key)
          ? [{ aggregate: ref, revision: 1, version: 1, data: views.get(key) }]
          : [];
      });
    },
  };
}

function world(options: WorldOptions = {}) {
  const published: Envelope[] = [];
  const logged: { message: string; details: Record<string, unknown> }[] = [];
  const views = new Map<string, unknown>();
  const tasks = new Map<string, Envelope[]>();
  const accepted = new InMemoryAcceptedRequests();
  const limits = new InMemoryTenantLimits();
  const runs = new InMemoryRunsInFlight();
  const controls = new InMemoryModelControls();
  const clock = { at: new Date("2026-12-02T10:00:00.000Z"), now: () => clock.at };
  const ports: FrontDoorPorts = {
    publisher: {
      async publish(_topic, envelopes): Promise<PublishFailure[]> {
        if (options.failPublish === "transient")
          throw new TransientError("eventbridge.throttled", "slow down");
        if (options.failPublish === "entry")
          return envelopes.map((e) => ({
            eventId: e.event_id,
            code: "ThrottlingException",
            message: "x",
          }));
        published.push(...envelopes);
        return [];
      },
    },
    store: {
      async load({ state }) {
        const data = state && views.get(`${state.type}#${state.id}`);
        return {
          inboxHit: false,
          checkpoint: 0,
          state: data && state ? { aggregate: state, revision: 1, version: 1, data } : undefined,
        };
      },
    },
    accepted,
    sequences: new InMemoryClientSequences(),
    tasks: { eventsByTask: async (taskId) => tasks.get(taskId) ?? [] },
    limits,
    runs,
    controls,
    ...(options.backlog ? { backlog: options.backlog } : {}),
    states: statesIn(views),
    registry,
    workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
    ids: { next: () => ulid() },
    clock,
    log: { info: (message, details) => logged.push({ message, details }) },
  };
  const send = (
    request: Partial<HttpRequest> & Pick<HttpRequest, "method" | "path">,
    settings: FrontDoorSettings = {},
  ) =>
    handleRequest({ headers: {}, requestId: "req-1", ...request }, ports, {
      requestsPerMinute: options.perMinute ?? 100,
      ...settings,
    });
  return { ports, published, logged, views, tasks, accepted, limits, runs, controls, clock, send };
}

/**
 * A conversation's state as the conversation role keeps it (what says whose it is: its first
 * message's customer), under `views` with the projections.
 */
function opened(
  views: Map<string, unknown>,
  key: string,
  customer: string,
  tenant: string | null = "acme",
) {
  views.set(`conversation#${key}`, {
    conversation_id: key,
    customer_id: customer,
    ...(tenant === null ? {} : { tenant_id: tenant }),
    version: 1,
    messages: [],
  });
}

const post = (conversation: string, body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  path: `/v1/conversations/${conversation}/messages`,
  headers: { "content-type": "application/json", ...headers },
  body: typeof body === "string" ? body : JSON.stringify(body),
  claims: ACME,
});

function bodyOf(response: { body: string }) {
  return JSON.parse(response.body) as Record<string, unknown>;
}

describe("POST /v1/conversations/{id}/messages", () => {
  it("puts the message on the bus with the caller's tenant and user, and gives the ids to follow", async () => {
    const { send, published } = world();
    const response = await send(post("conv_a1", { text: "Where is order 123?" }));
    expect(response.statusCode).toBe(202);
    const answer = bodyOf(response);
    expect(published).toHaveLength(1);
    const event = published[0] as Envelope;
    expect(answer).toEqual({
      event_id: event.event_id,
      task_id: `task_${event.event_id}`,
      correlation_id: `corr_${event.event_id}`,
      conversation_id: "conv_a1",
      client_seq: 1,
      links: { conversation: "/v1/conversations/conv_a1" },
    });
    expect(response.headers.location).toBe("/v1/conversations/conv_a1");
    expect(event).toMatchObject({
      event_type: "conversation.message.received",
      tenant_id: "acme",
      user_id: `user_${ACME.sub}`,
      // Keyed by the tenant and the client's id (schemas/ids.ts tenantConversationId).
      conversation_id: ACME_CONV_A1,
      aggregate: { type: "conversation", id: ACME_CONV_A1, version: 0 },
      order_key: ACME_CONV_A1,
      producer: "front-door",
      payload: {
        text: "Where is order 123?",
        customer_id: `cust_${ACME.sub}`,
        channel: "chat",
        client_seq: 1,
      },
    });
    expect(registry.parse(event).ok).toBe(true);
  });

  it("continues the caller's W3C trace context, and starts one without it (or with a bad one)", async () => {
    const { send, published } = world();
    const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    await send(post("conv_a1", { text: "traced" }, { traceparent: caller }));
    await send(post("conv_a1", { text: "untraced" }));
    await send(
      post("conv_a1", { text: "bad" }, { traceparent: `00-${"0".repeat(32)}-00f067aa0ba902b7-01` }),
    );
    const [traced, untraced, bad] = published as Envelope[];
    expect(traced?.traceparent).toBe(caller);
    for (const event of [untraced, bad]) {
      expect(parseTraceparent(event?.traceparent)?.traceId).toBe(ulidHex(event?.event_id ?? ""));
      expect(registry.parse(event).ok).toBe(true);
    }
  });

  it("with the customers' keys, puts and keeps the customer's words sealed under their key", async () => {
    const { ports, published, accepted } = world();
    const keys = new InMemoryCustomerKeys();
    const vault = new Vault({ keys, wrapping: localKeyWrapping() });
    const send = (request: Parameters<typeof post>) =>
      handleRequest({ requestId: "req-1", ...post(...request) }, { ...ports, sealer: vault }, {});
    const words = "Where is order 123? MARKER-door-3c9a";
    const response = await send(["conv_a1", { text: words }, { "idempotency-key": "k-s" }]);
    expect(response.statusCode, response.body).toBe(202);
    const event = published[0] as Envelope;
    expect(isSealed((event.payload as { text: unknown }).text)).toBe(true);
    expect(JSON.stringify(published)).not.toContain("MARKER-door-3c9a");
    // Kept under the tenant and a hash of the user and the key: the key is the user's own.
    const key = createHash("sha256").update(`user_${ACME.sub}\nk-s`).digest("hex");
    const kept = await accepted.find(`acme#${key}`);
    expect(kept?.envelope).toEqual(event);
    expect((await vault.open(event)).payload).toMatchObject({ text: words });
    expect(await keys.ownerOf(ACME_CONV_A1)).toEqual({
      tenant: "acme",
      customer: `cust_${ACME.sub}`,
    });
  });

  it("gives each message of a conversation the next client_seq, in the order it takes them", async () => {
    const { send, published } = world();
    const answers = [];
    for (const text of ["one", "two", "three"])
      answers.push(bodyOf(await send(post("conv_a1", { text }))).client_seq);
    // Another conversation counts on its own; a sent number is kept, and the next follows it.
    answers.push(bodyOf(await send(post("conv_a2", { text: "other" }))).client_seq);
    answers.push(bodyOf(await send(post("conv_a1", { text: "five", client_seq: 5 }))).client_seq);
    answers.push(bodyOf(await send(post("conv_a1", { text: "six" }))).client_seq);
    expect(answers).toEqual([1, 2, 3, 1, 5, 6]);
    expect(published.map((e) => (e.payload as { client_seq: number }).client_seq)).toEqual(answers);
  });

  it("a client_seq sent again with the same message is the same request; with another, 409", async () => {
    const { send, published } = world();
    const first = await send(post("conv_a1", { text: "hi", client_seq: 1 }));
    const again = await send(post("conv_a1", { text: "hi", client_seq: 1 }));
    expect(again.statusCode).toBe(202);
    expect(again.body).toBe(first.body);
    // Put again under the same event id: the conversation takes it as a duplicate.
    expect(published.map((e) => e.event_id)).toEqual([
      bodyOf(first).event_id,
      bodyOf(first).event_id,
    ]);
    const other = await send(post("conv_a1", { text: "bye", client_seq: 1 }));
    expect(other.statusCode).toBe(409);
    expect(bodyOf(other)).toMatchObject({
      code: "client_seq_taken",
      detail: "client_seq 1 was sent before with another message",
      errors: [{ path: "(body).client_seq" }],
    });
    expect(published).toHaveLength(2);
  });

  it("refuses a client_seq far ahead of the conversation's or older than the door keeps (409)", async () => {
    const { send, published } = world();
    const ahead = await send(post("conv_a1", { text: "far", client_seq: 101 }));
    expect(bodyOf(ahead)).toMatchObject({ status: 409, code: "client_seq_ahead" });
    expect(bodyOf(ahead).detail).toContain("more than 100 above the conversation's highest (0)");
    expect((await send(post("conv_a1", { text: "near", client_seq: 100 }))).statusCode).toBe(202);
    const stale = await send(post("conv_a1", { text: "old", client_seq: 84 }));
    expect(bodyOf(stale)).toMatchObject({ status: 409, code: "client_seq_stale" });
    // One below the highest never sent is taken (the client sent 100 first).
    expect((await send(post("conv_a1", { text: "late", client_seq: 99 }))).statusCode).toBe(202);
    expect(published.map((e) => (e.payload as { text: string }).text)).toEqual(["near", "late"]);
    const zero = await send(post("conv_a1", { text: "zero", client_seq: 0 }));
    expect(bodyOf(zero)).toMatchObject({ status: 400, code: "invalid_request" });
  });

  it("a retry under an accepted Idempotency-Key takes no second client_seq", async () => {
    const { send } = world();
    const first = await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-seq" }));
    await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-seq" }));
    const next = await send(post("conv_a1", { text: "next" }));
    expect([bodyOf(first).client_seq, bodyOf(next).client_seq]).toEqual([1, 2]);
  });

  it("the same Idempotency-Key again is the same request: one event id, the same answer", async () => {
    const { send, published } = world();
    const first = await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-1" }));
    const again = await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-1" }));
    expect(first.statusCode).toBe(202);
    expect(again.statusCode).toBe(202);
    expect(again.body).toBe(first.body);
    // Put again (the first put may have been lost), under the same event id: one task downstream.
    expect(new Set(published.map((e) => e.event_id)).size).toBe(1);
    // Another tenant's same key is its own.
    const other = await send({
      ...post("conv_g1", { text: "hi" }, { "idempotency-key": "k-1" }),
      claims: GLOBEX,
    });
    expect(bodyOf(other).event_id).not.toBe(bodyOf(first).event_id);
  });

  it("the same Idempotency-Key with another request is refused (409), nothing put", async () => {
    const { send, published } = world();
    await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-2" }));
    const reused = await send(post("conv_a1", { text: "bye" }, { "idempotency-key": "k-2" }));
    expect(reused.statusCode).toBe(409);
    expect(bodyOf(reused)).toMatchObject({ code: "idempotency_key_reused", status: 409 });
    expect(published).toHaveLength(1);
  });

  it("bad input gets its status and a problem naming it, and nothing is put", async () => {
    const { send, published } = world();
    const cases: [Parameters<typeof send>[0], number, string][] = [
      [post("conv_a1", "{not json"), 400, "invalid_json"],
      [post("conv_a1", { text: "", extra: 1 }), 400, "invalid_request"],
      [post("conv_a1", { text: "x".repeat(20_000) }), 413, "payload_too_large"],
      // A personal field that looks sealed would travel unsealed (the vault takes it for sealed).
      [post("conv_a1", { text: "sealed:v1:my card is 4111 1111" }), 400, "invalid_request"],
      [
        { ...post("conv_a1", { text: "hi" }), headers: { "content-type": "text/plain" } },
        415,
        "unsupported_media_type",
      ],
      [post("user@example.com", { text: "hi" }), 400, "invalid_request"],
      [post("conv_a1", { text: "hi" }, { "idempotency-key": "bad key" }), 400, "invalid_request"],
      [{ ...post("conv_a1", { text: "hi" }), claims: undefined }, 401, "unauthorized"],
      [{ ...post("conv_a1", { text: "hi" }), claims: { sub: "u-1" } }, 403, "forbidden"],
      [
        { ...post("conv_a1", { text: "hi" }), claims: { sub: "u-1", tenant_id: "Not A Slug" } },
        403,
        "forbidden",
      ],
      [{ method: "POST", path: "/v1/nowhere" }, 404, "not_found"],
      [{ method: "DELETE", path: "/v1/conversations/conv_a1/messages" }, 405, "method_not_allowed"],
    ];
    for (const [request, status, code] of cases) {
      const response = await send(request);
      expect(response.statusCode, `${code}: ${response.body}`).toBe(status);
      expect(response.headers["content-type"]).toBe("application/problem+json");
      expect(bodyOf(response)).toMatchObject({ status, code, detail: expect.any(String) });
    }
    const invalid = bodyOf(await send(post("conv_a1", { text: "", extra: 1 })));
    expect((invalid.errors as { path: string }[]).map((e) => e.path).sort()).toEqual([
      "(body)",
      "text",
    ]);
    expect(published).toEqual([]);
  });

  it("a bus that cannot take the message answers 503 with Retry-After; a retry with the key goes through", async () => {
    for (const failPublish of ["transient", "entry"] as const) {
      const { send } = world({ failPublish });
      const response = await send(post("conv_a1", { text: "hi" }, { "idempotency-key": "k-3" }));
      expect(response.statusCode).toBe(503);
      expect(response.headers["retry-after"]).toBe("1");
    }
  });
});

describe("whose message it is", () => {
  const SERVICE = { settings: { serviceScope: "agentbus/service" } };

  it("a user's token speaks for its own customer: naming another is refused (403), nothing put", async () => {
    const { send, published } = world();
    const other = await send(post("conv_a1", { text: "hi", customer_id: "cust_someone-else" }));
    expect([other.statusCode, bodyOf(other).code]).toEqual([403, "forbidden"]);
    // Even where a service scope is set, a token without it is a user's.
    const unscoped = await send(
      post("conv_a1", { text: "hi", customer_id: "cust_someone-else" }),
      SERVICE.settings,
    );
    expect(unscoped.statusCode).toBe(403);
    expect(published).toEqual([]);
    const own = await send(post("conv_a1", { text: "hi", customer_id: `cust_${ACME.sub}` }));
    expect(own.statusCode).toBe(202);
    expect(published[0]?.payload).toMatchObject({ customer_id: `cust_${ACME.sub}` });
  });

  it("a token with the deployment's service scope names the customer, and that is logged", async () => {
    const { send, published, logged } = world();
    const crm = { tenant_id: "acme", sub: "crm-backend", scope: "openid agentbus/service" };
    const request = {
      ...post("conv_a1", { text: "hi", customer_id: "cust_42" }),
      claims: crm,
    };
    // Without a service scope deployed, no token is a service's.
    expect((await send(request)).statusCode).toBe(403);
    const response = await send(request, SERVICE.settings);
    expect(response.statusCode, response.body).toBe(202);
    expect(published[0]?.payload).toMatchObject({ customer_id: "cust_42" });
    expect(logged).toEqual([
      {
        message: "a service acts for a customer",
        details: {
          tenant_id: "acme",
          caller: "user_crm-backend",
          customer_id: "cust_42",
          conversation_id: "conv_a1",
        },
      },
    ]);
  });
});

describe("a conversation is its customer's", () => {
  const ALICE = { tenant_id: "acme", sub: "alice" };
  const BOB = { tenant_id: "acme", sub: "bob" };
  const CONV_1 = tenantConversationId("acme", "conv_1");
  const PARTNER = "arn:aws:iam::123456789012:role/partner-backend";
  const get = (claims: Record<string, unknown>) =>
    ({ method: "GET", path: "/v1/conversations/conv_1", claims }) as const;
  const alices = (views: Map<string, unknown>) => {
    views.set(`conversation_view#${CONV_1}`, {
      conversation_id: CONV_1,
      tenant_id: "acme",
      version: 1,
      turn_order: ["task_A"],
      turns: {
        task_A: {
          task_id: "task_A",
          status: "delivered",
          text: "my order 123",
          reply_text: "refund issued",
        },
      },
    });
    opened(views, CONV_1, "cust_alice");
  };

  it("another customer of the tenant reads it as one that does not exist (404); its own reads it", async () => {
    const { send, views } = world();
    alices(views);
    const bob = await send(get(BOB));
    const missing = await send({ ...get(BOB), path: "/v1/conversations/conv_2" });
    expect([bob.statusCode, bodyOf(bob).code, bodyOf(bob).detail]).toEqual([
      404,
      "not_found",
      "no conversation conv_1",
    ]);
    expect(bob.body).not.toContain("my order");
    // The same answer as an id nobody used, so a guessed id tells nothing.
    expect(bodyOf(missing).detail).toBe("no conversation conv_2");
    expect((await send({ ...get(BOB), method: "HEAD" })).statusCode).toBe(404);
    const alice = await send(get(ALICE));
    expect(alice.statusCode).toBe(200);
    expect(bodyOf(alice).turns).toEqual([expect.objectContaining({ text: "my order 123" })]);
    // A view whose conversation records no customer is nobody's to read.
    views.delete(`conversation#${CONV_1}`);
    expect((await send(get(ALICE))).statusCode).toBe(404);
  });

  it("another customer's message is refused (404) before anything is counted, claimed, kept or put", async () => {
    const { send, views, published, accepted, limits, ports } = world();
    alices(views);
    const sequences = ports.sequences as InMemoryClientSequences;
    const refused = await send({
      ...post("conv_1", { text: "refund it to me", client_seq: 100 }, { "idempotency-key": "k" }),
      claims: BOB,
    });
    expect([refused.statusCode, bodyOf(refused).code, bodyOf(refused).detail]).toEqual([
      404,
      "not_found",
      "no conversation conv_1",
    ]);
    expect(published).toEqual([]);
    expect(accepted.records.size).toBe(0);
    expect(sequences.records.size).toBe(0);
    expect(limits.counts.size).toBe(0);
    // Bob claimed none of Alice's numbers: her next message is the conversation's next.
    const hers = await send({ ...post("conv_1", { text: "and my refund?" }), claims: ALICE });
    expect([hers.statusCode, bodyOf(hers).client_seq]).toEqual([202, 1]);
    expect(published.map((e) => e.user_id)).toEqual(["user_alice"]);
  });

  it("a conversation not opened yet is opened by its first message, whoever's", async () => {
    const { send, published } = world();
    const first = await send({ ...post("conv_1", { text: "hi" }), claims: BOB });
    expect(first.statusCode).toBe(202);
    expect(published[0]?.payload).toMatchObject({ customer_id: "cust_bob" });
  });

  it("a service reads any of its tenant's, and writes into one only for its customer (else 403)", async () => {
    const { send, views, published } = world();
    alices(views);
    const read = await send({
      method: "GET",
      path: "/v1/tenants/acme/conversations/conv_1",
      principal: PARTNER,
    });
    expect(read.statusCode).toBe(200);
    const write = (customer: string) =>
      send({
        method: "POST",
        path: "/v1/tenants/acme/conversations/conv_1/messages",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "hi", customer_id: customer }),
        principal: PARTNER,
      });
    const other = await write("cust_bob");
    expect([other.statusCode, bodyOf(other).code]).toEqual([403, "forbidden"]);
    expect(bodyOf(other).detail).toContain("is not customer cust_bob's");
    expect(published).toEqual([]);
    expect((await write("cust_alice")).statusCode).toBe(202);
  });

  it("with the conversation's roles in memory: one customer's conversation is nobody else's to read or write", async () => {
    const bus = new Bus({
      roles: [conversationRole() as Role<unknown>, conversationProjection as Role<unknown>],
    });
    const { ports } = world();
    const published: Envelope[] = [];
    const withRoles: FrontDoorPorts = {
      ...ports,
      publisher: {
        async publish(_topic, envelopes) {
          published.push(...envelopes);
          for (const envelope of envelopes) bus.send(envelope);
          return [];
        },
      },
      store: bus.store,
    };
    const send = (request: Partial<HttpRequest> & Pick<HttpRequest, "method" | "path">) =>
      handleRequest({ headers: {}, requestId: "req-1", ...request }, withRoles, {});
    const first = await send({ ...post("conv_1", { text: "my order 123" }), claims: ALICE });
    expect(first.statusCode).toBe(202);
    await bus.drain();
    expect((await send(get(ALICE))).statusCode).toBe(200);
    const read = await send(get(BOB));
    const write = await send({ ...post("conv_1", { text: "mine now" }), claims: BOB });
    expect([read.statusCode, write.statusCode]).toEqual([404, 404]);
    await bus.drain();
    // Nothing of Bob's reached the conversation, so nothing was dead-lettered either.
    expect(published).toHaveLength(1);
    expect(bus.deadLettered).toEqual([]);
  });
});

describe("an Idempotency-Key is its caller's", () => {
  const ALICE = { tenant_id: "acme", sub: "alice" };
  const BOB = { tenant_id: "acme", sub: "bob" };
  const start = (send: ReturnType<typeof world>["send"], sub: string, key = "k1") =>
    send({
      method: "POST",
      path: "/v1/workflows/long-form/runs",
      claims: { tenant_id: "acme", sub },
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify({ topic_hint: "grid" }),
    });

  it("another user of the tenant sending the same key and body starts a run of their own", async () => {
    const { send, published } = world();
    const alice = await start(send, "alice");
    const bob = await start(send, "bob");
    expect([alice.statusCode, bob.statusCode]).toEqual([202, 202]);
    expect(bodyOf(bob).run_id).not.toBe(bodyOf(alice).run_id);
    expect(published.map((e) => [e.user_id, e.aggregate.id])).toEqual([
      ["user_alice", bodyOf(alice).run_id],
      ["user_bob", bodyOf(bob).run_id],
    ]);
    // Each one's retry is still their own request.
    expect((await start(send, "alice")).body).toBe(alice.body);
    expect((await start(send, "bob")).body).toBe(bob.body);
  });

  it("another user's same key on a message puts their own message, not the first user's", async () => {
    const { send, published } = world();
    const message = (claims: Record<string, unknown>, conversation: string) =>
      send({ ...post(conversation, { text: "hello" }, { "idempotency-key": "1" }), claims });
    const alice = await message(ALICE, "conv_a");
    const bob = await message(BOB, "conv_b");
    expect([alice.statusCode, bob.statusCode]).toEqual([202, 202]);
    expect(bodyOf(bob).event_id).not.toBe(bodyOf(alice).event_id);
    expect(
      published.map((e) => [e.user_id, (e.payload as { customer_id: string }).customer_id]),
    ).toEqual([
      ["user_alice", "cust_alice"],
      ["user_bob", "cust_bob"],
    ]);
  });

  it("a service signing with AWS credentials keeps its tenant's keys, whichever session signs", async () => {
    const { send } = world();
    const startAs = (principal: string) =>
      send({
        method: "POST",
        path: "/v1/tenants/acme/workflows/long-form/runs",
        headers: { "content-type": "application/json", "idempotency-key": "k1" },
        body: JSON.stringify({ topic_hint: "grid" }),
        principal,
      });
    const first = await startAs("arn:aws:sts::123456789012:assumed-role/partner/session-1");
    const retried = await startAs("arn:aws:sts::123456789012:assumed-role/partner/session-2");
    expect(first.statusCode).toBe(202);
    expect(retried.body).toBe(first.body);
  });
});

describe("each tenant's cap", () => {
  it("over its requests per minute a tenant gets 429 with Retry-After, others go on", async () => {
    const { send, published } = world({ perMinute: 2 });
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await send(post("conv_a1", { text: `hi ${i}` }))).statusCode);
    expect(statuses).toEqual([202, 202, 429]);
    const refused = await send(post("conv_a1", { text: "again" }));
    expect(bodyOf(refused)).toMatchObject({ status: 429, code: "too_many_requests" });
    // 10:00:00 in the test's clock: the whole minute is left.
    expect(refused.headers["retry-after"]).toBe("60");
    const other = await send({ ...post("conv_g1", { text: "hi" }), claims: GLOBEX });
    expect(other.statusCode).toBe(202);
    expect(published).toHaveLength(3);
  });

  it("a tenant with requests per minute of its own gets them; the others keep the stack's", async () => {
    const { send } = world({ perMinute: 2 });
    const settings = { tenantLimits: { acme: { requestsPerMinute: 3 } } };
    const statuses = async (claims: Record<string, unknown>, conversation: string) => {
      const answers = [];
      for (let i = 0; i < 4; i++)
        answers.push(await send({ ...post(conversation, { text: `hi ${i}` }), claims }, settings));
      return answers;
    };
    const acme = await statuses(ACME, "conv_a1");
    expect(acme.map((r) => r.statusCode)).toEqual([202, 202, 202, 429]);
    expect(bodyOf(acme[3] as { body: string }).detail).toBe(
      "tenant acme is over its 3 requests per minute",
    );
    expect((await statuses(GLOBEX, "conv_g1")).map((r) => r.statusCode)).toEqual([
      202, 202, 429, 429,
    ]);
  });
});

describe("the backlog of the groups new work enters", () => {
  /** A backlog gate whose conversation group is `depth` deep (threshold 100, 5 a second). */
  const backedUp = (depth: { value: number | Error }) =>
    new BacklogGate({
      queues: {
        conversations: { conversation: ["q-conv.fifo"] },
        runs: { orchestrator: ["q-orch.fifo"] },
      },
      clock: { now: () => new Date() },
      settings: { threshold: 100, drainPerSecond: 5, cacheSeconds: 0 },
      read: async (url) => {
        if (url !== "q-conv.fifo") return 0;
        if (depth.value instanceof Error) throw depth.value;
        return depth.value;
      },
    });

  it("refuses a message with 429 backlog and Retry-After while its group is over, counting and putting nothing", async () => {
    const depth = { value: 150 };
    const { send, published, limits } = world({ backlog: backedUp(depth) });
    const refused = await send(post("conv_a1", { text: "hi" }));
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toBe("10");
    expect(bodyOf(refused)).toMatchObject({
      status: 429,
      code: "backlog",
      detail: expect.stringContaining("consumer group conversation has 150 messages queued"),
    });
    expect(published).toEqual([]);
    expect(limits.counts.size).toBe(0);
    // A run enters the orchestrator's queue, which is not backed up.
    const run = await send({
      method: "POST",
      path: "/v1/workflows/quick-news/runs",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ topic_hint: "grid storage" }),
      claims: ACME,
    });
    expect(run.statusCode).toBe(202);
    depth.value = 100;
    expect((await send(post("conv_a1", { text: "hi" }))).statusCode).toBe(202);
  });

  it("admits when the depth cannot be read", async () => {
    const { send, published } = world({ backlog: backedUp({ value: new Error("AccessDenied") }) });
    expect((await send(post("conv_a1", { text: "hi" }))).statusCode).toBe(202);
    expect(published).toHaveLength(1);
  });
});

describe("a tenant's stop and model call rate", () => {
  it("refuses a stopped tenant's new work with 403 tenant_stopped, saying who stopped it; a resume lets it in", async () => {
    const { send, published, controls } = world();
    await controls.stop({
      scope: "tenant",
      id: "acme",
      by: "ops_anna",
      at: "2026-12-02T09:59:00Z",
      reason: "runaway agent",
    });
    const refused = await send(post("conv_a1", { text: "hi" }));
    expect(refused.statusCode).toBe(403);
    expect(bodyOf(refused)).toMatchObject({
      code: "tenant_stopped",
      detail:
        "tenant acme was stopped by ops_anna at 2026-12-02T09:59:00Z (runaway agent); nothing new starts for it until `agentbus resume --tenant acme`",
    });
    const other = await send({ ...post("conv_g1", { text: "hi" }), claims: GLOBEX });
    expect(other.statusCode).toBe(202);
    expect(published).toHaveLength(1);
    await controls.resume("tenant", "acme", "ops_anna", new Date());
    expect((await send(post("conv_a1", { text: "hi" }))).statusCode).toBe(202);
  });

  it("slows a tenant whose model calls this minute are at its budget: 429 with Retry-After, others go on", async () => {
    const { send, published, controls, clock } = world();
    controls.budgets = { ...controls.budgets, tenantCallsPerMinute: 2 };
    const call = { tokens: 10, micros: 10 };
    clock.at = new Date("2026-12-02T10:00:15.000Z");
    await controls.spend({ tenant: "acme" }, call, clock.at);
    expect((await send(post("conv_a1", { text: "one" }))).statusCode).toBe(202);
    await controls.spend({ tenant: "acme" }, call, clock.at);
    const slowed = await send(post("conv_a1", { text: "two" }));
    expect(slowed.statusCode).toBe(429);
    expect(slowed.headers["retry-after"]).toBe("45");
    expect(bodyOf(slowed).detail).toBe(
      "tenant acme started 2 model calls this minute, its budget is 2: new work waits for the next minute",
    );
    expect((await send({ ...post("conv_g1", { text: "hi" }), claims: GLOBEX })).statusCode).toBe(
      202,
    );
    // The next minute starts from none.
    clock.at = new Date("2026-12-02T10:01:00.000Z");
    expect((await send(post("conv_a1", { text: "three" }))).statusCode).toBe(202);
    expect(published).toHaveLength(3);
  });
});

describe("tenants", () => {
  it("each tenant's conversation ids are its own: another's reads 404, and its post opens its own", async () => {
    const { send, views, published } = world();
    opened(views, ACME_CONV_A1, `cust_${ACME.sub}`);
    views.set(`conversation_view#${ACME_CONV_A1}`, {
      conversation_id: "conv_a1",
      tenant_id: "acme",
      version: 1,
      turns: { task_1: { task_id: "task_1", status: "replied", text: "hi", reply_text: "hello" } },
      turn_order: ["task_1"],
    });
    const own = await send({ method: "GET", path: "/v1/conversations/conv_a1", claims: ACME });
    expect(own.statusCode).toBe(200);
    expect(bodyOf(own)).toEqual({
      conversation_id: "conv_a1",
      version: 1,
      turns: [{ task_id: "task_1", status: "replied", text: "hi", reply_text: "hello" }],
    });
    const foreign = await send({
      method: "GET",
      path: "/v1/conversations/conv_a1",
      claims: GLOBEX,
    });
    const missing = await send({
      method: "GET",
      path: "/v1/conversations/conv_zz",
      claims: GLOBEX,
    });
    expect(foreign.statusCode).toBe(404);
    expect(missing.statusCode).toBe(404);
    expect(bodyOf(foreign).detail).toBe("no conversation conv_a1");
    // Globex's conv_a1 is another conversation: its message goes there, acme's is untouched.
    const own2 = await send({ ...post("conv_a1", { text: "mine" }), claims: GLOBEX });
    expect(own2.statusCode).toBe(202);
    expect(published.map((e) => [e.tenant_id, e.aggregate.id])).toEqual([
      ["globex", tenantConversationId("globex", "conv_a1")],
    ]);
    expect(tenantConversationId("globex", "conv_a1")).not.toBe(ACME_CONV_A1);
    // A view under the caller's key that names another tenant (it cannot, but reads check) is 404.
    views.set(`conversation_view#${ACME_CONV_A1}`, {
      ...(views.get(`conversation_view#${ACME_CONV_A1}`) as object),
      tenant_id: "globex",
    });
    expect(
      (await send({ method: "GET", path: "/v1/conversations/conv_a1", claims: ACME })).statusCode,
    ).toBe(404);
  });

  it("a held reply is not shown to the customer until a person approves it, nor why it was held", async () => {
    const { send, views } = world();
    const turn = (status: string, extra: Record<string, string> = {}) => ({
      task_id: `task_${status}`,
      status,
      text: "hi",
      reply_text: "draft [withheld: secret]",
      held_reason: "output_guard.refused: secret (AWS access key id) at 6-26",
      ...extra,
    });
    views.set(`conversation_view#${ACME_CONV_A1}`, {
      conversation_id: "conv_a1",
      tenant_id: "acme",
      version: 3,
      turns: {
        task_held_for_review: turn("held_for_review"),
        task_rejected: turn("rejected", { reviewed_by: "ops_anna" }),
        task_approved: turn("approved", { reviewed_by: "ops_anna", reply_text: "Approved text" }),
      },
      turn_order: ["task_held_for_review", "task_rejected", "task_approved"],
    });
    opened(views, ACME_CONV_A1, `cust_${ACME.sub}`);
    const response = await send({ method: "GET", path: "/v1/conversations/conv_a1", claims: ACME });
    expect(bodyOf(response).turns).toEqual([
      { task_id: "task_held_for_review", status: "held_for_review", text: "hi" },
      { task_id: "task_rejected", status: "rejected", text: "hi", reviewed_by: "ops_anna" },
      {
        task_id: "task_approved",
        status: "approved",
        text: "hi",
        reviewed_by: "ops_anna",
        reply_text: "Approved text",
      },
    ]);
  });

  it("the default tenant's conversation ids are kept as they are (the AWS CLI's, those from before tenants)", () => {
    expect(tenantConversationId("default", "conv_a1")).toBe("conv_a1");
    expect(ACME_CONV_A1).toMatch(/^conv_[a-p]{26}$/);
  });

  it("GET /v1/tasks/{id} lists the task's steps without payloads, for its tenant only", async () => {
    const { send, tasks } = world();
    const step = (type: string, tenant?: string) =>
      ({
        event_id: ulid(),
        event_type: type,
        occurred_at: "2026-12-02T10:00:01.000Z",
        producer: "conversation",
        aggregate: { type: "conversation", id: "conv_a1", version: 1 },
        payload: { text: "personal words" },
        ...(tenant ? { tenant_id: tenant } : {}),
      }) as unknown as Envelope;
    const accepted = step("conversation.message.accepted", "acme");
    tasks.set("task_1", [accepted]);
    const read = await send({ method: "GET", path: "/v1/tasks/task_1", claims: ACME });
    expect(bodyOf(read)).toEqual({
      task_id: "task_1",
      events: [
        {
          event_id: accepted.event_id,
          event_type: "conversation.message.accepted",
          occurred_at: "2026-12-02T10:00:01.000Z",
          producer: "conversation",
          aggregate: { type: "conversation", id: "conv_a1", version: 1 },
        },
      ],
    });
    expect(read.body).not.toContain("personal words");
    const foreign = await send({ method: "GET", path: "/v1/tasks/task_1", claims: GLOBEX });
    const missing = await send({ method: "GET", path: "/v1/tasks/task_2", claims: ACME });
    expect([foreign.statusCode, missing.statusCode]).toEqual([404, 404]);
    // An event that names no tenant (what an operator's command caused) leaves the task its
    // tenant's; one that names another makes it nobody's.
    const get = (taskId: string, claims: Record<string, unknown>) =>
      send({ method: "GET", path: `/v1/tasks/${taskId}`, claims });
    tasks.set("task_3", [accepted, step("reply.approved")]);
    expect((await get("task_3", ACME)).statusCode).toBe(200);
    tasks.set("task_4", [accepted, step("support.route.requested", "globex")]);
    expect([
      (await get("task_4", ACME)).statusCode,
      (await get("task_4", GLOBEX)).statusCode,
    ]).toEqual([404, 404]);
  });

  it("a view from before tenants belongs to the default tenant", async () => {
    const { send, views } = world();
    views.set("conversation_view#conv_old", {
      conversation_id: "conv_old",
      version: 1,
      turns: {},
      turn_order: [],
    });
    opened(views, "conv_old", "cust_ops", null);
    const acme = await send({ method: "GET", path: "/v1/conversations/conv_old", claims: ACME });
    const fallback = { tenant_id: "default", sub: "ops" };
    const own = await send({ method: "GET", path: "/v1/conversations/conv_old", claims: fallback });
    expect([acme.statusCode, own.statusCode]).toEqual([404, 200]);
  });

  it("a subject that is not an id becomes a stable pseudonymous user id", () => {
    expect(userIdOf(ACME.sub)).toBe(`user_${ACME.sub}`);
    const hashed = userIdOf(GLOBEX.sub);
    expect(hashed).toMatch(/^user_[a-p]{26}$/);
    expect(userIdOf(GLOBEX.sub)).toBe(hashed);
    expect(userIdOf("alice@example.com")).toMatch(/^user_[a-p]{26}$/);
  });
});

describe("workflow runs", () => {
  it("POST /v1/workflows/{name}/runs starts a run of the caller's tenant; GET /v1/runs/{id} reads it", async () => {
    const { send, published, views } = world();
    const started = await send({
      method: "POST",
      path: "/v1/workflows/quick-news/runs",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ topic_hint: "grid storage" }),
      claims: ACME,
    });
    expect(started.statusCode).toBe(202);
    const answer = bodyOf(started);
    const event = published[0] as Envelope;
    expect(answer).toEqual({
      event_id: event.event_id,
      run_id: `run_${event.event_id}`,
      task_id: `task_${event.event_id}`,
      correlation_id: `corr_${event.event_id}`,
      links: { run: `/v1/runs/run_${event.event_id}` },
    });
    expect(event).toMatchObject({
      event_type: "workflow.start.requested",
      tenant_id: "acme",
      aggregate: { type: "dag_run", id: answer.run_id, version: 0 },
      payload: {
        run_id: answer.run_id,
        workflow_name: "quick-news",
        request: { topic_hint: "grid storage" },
      },
    });
    expect(registry.parse(event).ok).toBe(true);

    views.set(`dag_run#${answer.run_id}`, {
      workflow: "quick-news",
      tenant_id: "acme",
      run: {
        run_id: answer.run_id,
        workflow: { name: "quick-news", version: 2 },
        status: "COMPLETED",
        generation: 0,
        input: {},
        nodes: {
          write: { state: "COMPLETED", remaining_upstreams: 0, attempt: 1, output: { title: "t" } },
        },
      },
      held: [],
      timeline: [],
    });
    const read = await send({ method: "GET", path: `/v1/runs/${answer.run_id}`, claims: ACME });
    expect(bodyOf(read)).toEqual({
      run_id: answer.run_id,
      workflow: { name: "quick-news", version: 2 },
      status: "COMPLETED",
      nodes: { write: { state: "COMPLETED", output: { title: "t" } } },
    });
    const foreign = await send({
      method: "GET",
      path: `/v1/runs/${answer.run_id}`,
      claims: GLOBEX,
    });
    expect(foreign.statusCode).toBe(404);
  });

  it("an unknown workflow or a request that does not fit is refused, nothing put", async () => {
    const { send, published } = world();
    const start = (name: string, body: unknown) =>
      send({
        method: "POST",
        path: `/v1/workflows/${name}/runs`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        claims: ACME,
      });
    const unknown = await start("poetry", { topic_hint: "x" });
    expect(unknown.statusCode).toBe(404);
    expect(bodyOf(unknown).detail).toContain("quick-news");
    expect((await start("long-form", { topic: "no hint" })).statusCode).toBe(400);
    expect(published).toEqual([]);
  });
});

describe("services (IAM-signed, under /v1/tenants/{tenant_id})", () => {
  const PARTNER = "arn:aws:iam::123456789012:role/partner-backend";
  const servicePost = (tenant: string, conversation: string, body: unknown) => ({
    method: "POST",
    path: `/v1/tenants/${tenant}/conversations/${conversation}/messages`,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    principal: PARTNER,
  });

  it("a service's message is the path's tenant's, names its customer, and carries no user", async () => {
    const { send, published } = world();
    const response = await send(
      servicePost("acme", "conv_s1", { text: "Where is order 123?", customer_id: "cust_42" }),
    );
    expect(response.statusCode, response.body).toBe(202);
    expect(published).toHaveLength(1);
    const [envelope] = published;
    expect(envelope).toMatchObject({ tenant_id: "acme", payload: { customer_id: "cust_42" } });
    expect(envelope).not.toHaveProperty("user_id");
  });

  it("refuses a message that names no customer, a bad tenant, and an unsigned request", async () => {
    const { send, published } = world();
    const noCustomer = await send(servicePost("acme", "conv_s1", { text: "hi" }));
    const badTenant = await send(
      servicePost("Not_A_Tenant", "conv_s1", { text: "hi", customer_id: "cust_1" }),
    );
    const unsigned = await send({
      ...servicePost("acme", "conv_s1", { text: "hi", customer_id: "cust_1" }),
      principal: undefined,
    });
    expect([noCustomer, badTenant, unsigned].map((r) => [r.statusCode, bodyOf(r).code])).toEqual([
      [400, "invalid_request"],
      [400, "invalid_request"],
      [401, "unauthorized"],
    ]);
    expect(bodyOf(noCustomer).errors).toEqual([
      { path: "(body).customer_id", message: "required when a service sends the message" },
    ]);
    expect(published).toEqual([]);
  });

  it("reads only the path's tenant's conversations: another tenant's is 404", async () => {
    const { send, views } = world();
    views.set(`conversation_view#${ACME_CONV_A1}`, {
      conversation_id: ACME_CONV_A1,
      tenant_id: "acme",
      version: 1,
      turns: {},
      turn_order: [],
    });
    const read = (tenant: string) =>
      send({
        method: "GET",
        path: `/v1/tenants/${tenant}/conversations/conv_a1`,
        principal: PARTNER,
      });
    expect([(await read("acme")).statusCode, (await read("globex")).statusCode]).toEqual([
      200, 404,
    ]);
  });
});

describe("each tenant's runs in flight", () => {
  const CAP = { runsInFlight: 2 };
  const startRun = (
    send: ReturnType<typeof world>["send"],
    claims: Record<string, unknown>,
    key?: string,
    settings: FrontDoorSettings = CAP,
  ) =>
    send(
      {
        method: "POST",
        path: "/v1/workflows/quick-news/runs",
        headers: {
          "content-type": "application/json",
          ...(key === undefined ? {} : { "idempotency-key": key }),
        },
        body: JSON.stringify({ topic_hint: "grid storage" }),
        claims,
      },
      settings,
    );
  const runIdOf = (response: { body: string }) => bodyOf(response).run_id as string;
  const runState = (runId: string, status: string) => ({
    workflow: "quick-news",
    tenant_id: "acme",
    run: { run_id: runId, workflow: { name: "quick-news", version: 2 }, status, nodes: {} },
  });

  it("over its cap a tenant's start gets 429 with Retry-After and writes nothing; others go on", async () => {
    const { send, published, accepted, runs } = world();
    expect((await startRun(send, ACME, "a-1")).statusCode).toBe(202);
    expect((await startRun(send, ACME)).statusCode).toBe(202);
    const refused = await startRun(send, ACME, "a-3");
    expect(refused.statusCode).toBe(429);
    expect(refused.headers["retry-after"]).toBe("30");
    expect(bodyOf(refused)).toMatchObject({
      status: 429,
      code: "too_many_requests",
      detail: "tenant acme has 2 workflow runs in flight",
    });
    // Nothing put, the key not kept (a retry later is a new request), the count unchanged.
    expect(published).toHaveLength(2);
    expect(accepted.records.size).toBe(1);
    expect(runs.counted.get("acme")?.map((r) => r.runId)).toEqual(
      published.map((e) => e.aggregate.id),
    );
    // A message is no run; another tenant's runs are its own.
    expect((await send(post("conv_a1", { text: "hi" }), CAP)).statusCode).toBe(202);
    expect((await startRun(send, GLOBEX)).statusCode).toBe(202);
  });

  it("a tenant with runs in flight of its own gets them; the others keep the stack's", async () => {
    const { send } = world();
    const settings = { ...CAP, tenantLimits: { globex: { runsInFlight: 3 } } };
    const starts = async (claims: Record<string, unknown>) => {
      const statuses = [];
      for (let i = 0; i < 4; i++)
        statuses.push((await startRun(send, claims, undefined, settings)).statusCode);
      return statuses;
    };
    expect(await starts(GLOBEX)).toEqual([202, 202, 202, 429]);
    expect(await starts(ACME)).toEqual([202, 202, 429, 429]);
  });

  it("a retry of an accepted start is the same run: not refused at the cap, not counted twice", async () => {
    const { send, published, runs } = world();
    const first = await startRun(send, ACME, "k-run");
    const retried = await startRun(send, ACME, "k-run");
    expect(retried.body).toBe(first.body);
    expect(runs.counted.get("acme")).toHaveLength(1);
    expect((await startRun(send, ACME)).statusCode).toBe(202);
    // At the cap, the retry still gets its answer and puts its run again.
    const atCap = await startRun(send, ACME, "k-run");
    expect(atCap.statusCode).toBe(202);
    expect(atCap.body).toBe(first.body);
    expect(published.at(-1)?.aggregate.id).toBe(runIdOf(first));
    expect(runs.counted.get("acme")).toHaveLength(2);
    // The same key with another request is still refused as such.
    const other = await send(
      {
        method: "POST",
        path: "/v1/workflows/long-form/runs",
        headers: { "content-type": "application/json", "idempotency-key": "k-run" },
        body: JSON.stringify({ topic_hint: "grid storage" }),
        claims: ACME,
      },
      CAP,
    );
    expect(other.statusCode).toBe(409);
    expect((await startRun(send, ACME, "k-new")).statusCode).toBe(429);
  });

  it("a start refused for its key (409) is not counted", async () => {
    const { send, runs } = world();
    const start = (key: string | undefined, topic: string) =>
      send(
        {
          method: "POST",
          path: "/v1/workflows/long-form/runs",
          claims: ACME,
          headers: {
            "content-type": "application/json",
            ...(key === undefined ? {} : { "idempotency-key": key }),
          },
          body: JSON.stringify({ topic_hint: topic }),
        },
        CAP,
      );
    const first = await start("k", "a");
    expect(first.statusCode).toBe(202);
    expect((await start("k", "b")).statusCode).toBe(409);
    expect(runs.counted.get("acme")?.map((r) => r.runId)).toEqual([runIdOf(first)]);
    expect((await start(undefined, "c")).statusCode).toBe(202);
    expect((await start(undefined, "d")).statusCode).toBe(429);
  });

  it("a run stops counting once its state says it ended, its start was refused, or it never started", async () => {
    const { send, views, runs, clock } = world();
    const ended = runIdOf(await startRun(send, ACME));
    const unstarted = runIdOf(await startRun(send, ACME));
    views.set(`dag_run#${ended}`, runState(ended, "COMPLETED"));
    const third = runIdOf(await startRun(send, ACME));
    const counted = () => runs.counted.get("acme")?.map((r) => r.runId);
    expect(counted()).toEqual([unstarted, third]);
    views.set(`dag_run#${third}`, runState(third, "RUNNING"));
    expect((await startRun(send, ACME)).statusCode).toBe(429);
    expect(counted()).toEqual([unstarted, third]);
    // A start with no state an hour on was lost (never put on the bus): it no longer counts.
    clock.at = new Date(clock.at.getTime() + UNSTARTED_RUN_SECONDS * 1000 + 1000);
    const fourth = runIdOf(await startRun(send, ACME));
    expect(counted()).toEqual([third, fourth]);
    // A start the orchestrator refused leaves a null state.
    views.set(`dag_run#${fourth}`, null);
    const fifth = runIdOf(await startRun(send, ACME));
    expect(counted()).toEqual([third, fifth]);
    for (const status of ["FAILED", "PARTIAL", "CANCELLED"]) {
      const [oldest = ""] = counted() ?? [];
      views.set(`dag_run#${oldest}`, runState(oldest, status));
      expect((await startRun(send, ACME)).statusCode, status).toBe(202);
      expect(counted()).toHaveLength(2);
      expect(counted(), status).not.toContain(oldest);
    }
  });

  it("a start the bus did not take stops counting, unless a retry with its key can put it", async () => {
    const { send, runs } = world({ failPublish: "entry" });
    expect((await startRun(send, ACME)).statusCode).toBe(503);
    expect(runs.counted.get("acme")).toEqual([]);
    const keyed = await startRun(send, ACME, "k-503");
    expect(keyed.statusCode).toBe(503);
    // The retry will put the run the key keeps: that is the run counted.
    const retried = await startRun(send, ACME, "k-503");
    expect(retried.statusCode).toBe(503);
    expect(runs.counted.get("acme")).toHaveLength(1);
  });

  it("with the orchestrator in memory: runs count until they end, an operator's runs never", async () => {
    const bus = new Bus({ duplicate: true });
    const runs = new InMemoryRunsInFlight();
    const ports: FrontDoorPorts = {
      controls: new InMemoryModelControls(),
      publisher: {
        async publish(_topic, envelopes) {
          for (const envelope of envelopes) bus.send(envelope);
          return [];
        },
      },
      store: bus.store,
      accepted: new InMemoryAcceptedRequests(),
      sequences: new InMemoryClientSequences(),
      tasks: bus.store,
      limits: new InMemoryTenantLimits(),
      runs,
      states: bus.store,
      registry,
      workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
      ids: { next: () => ulid() },
      clock: bus.clock,
    };
    const send = (request: HttpRequest, settings: FrontDoorSettings) =>
      handleRequest(request, ports, settings);
    const DEFAULT_USER = { tenant_id: "default", sub: "0d2c6a51-8c55-4a5e-9b2f-1f0e7d3c4b5a" };
    const ONE = { runsInFlight: 1 };
    const orchestratorOnly = (d: { group: string }) => d.group === "orchestrator";
    // An operator's run (the CLI's, of the default tenant) is in flight and is not counted.
    bus.start("run_operator", "quick-news");
    await bus.drain(orchestratorOnly);
    expect(bus.state("run_operator").run.status).toBe("RUNNING");
    const first = await startRun(send as never, DEFAULT_USER, undefined, ONE);
    expect(first.statusCode).toBe(202);
    await bus.drain(orchestratorOnly);
    expect(bus.state(runIdOf(first)).run.status).toBe("RUNNING");
    expect((await startRun(send as never, DEFAULT_USER, undefined, ONE)).statusCode).toBe(429);
    // Every event delivered twice: the runs end once, and nothing counts them out twice.
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runIdOf(first)).run.status).toBe("COMPLETED");
    expect(bus.state("run_operator").run.status).toBe("COMPLETED");
    const second = await startRun(send as never, DEFAULT_USER, undefined, ONE);
    expect(second.statusCode).toBe(202);
    expect(runs.counted.get("default")?.map((r) => r.runId)).toEqual([runIdOf(second)]);
  });

  it("a start the orchestrator refuses after its 202 is a run that ended REJECTED, with why, to its tenant only", async () => {
    // The front door checks a definition's role names; this stack's writing carries out no map
    // items, which only the orchestrator checks, at the start.
    const workflows = new InMemoryWorkflowRegistry();
    const writing = REFERENCE_STEP_ROLES.writing;
    if (!writing) throw new Error("the reference stack has a writing role");
    const { items: _, ...writingWithoutItems } = writing;
    const bus = new Bus({
      orchestrator: referenceOrchestrator({
        registry: workflows,
        stepRoles: { ...REFERENCE_STEP_ROLES, writing: writingWithoutItems },
      }),
    });
    const { ports } = world();
    const withOrchestrator: FrontDoorPorts = {
      ...ports,
      publisher: {
        async publish(_topic, envelopes) {
          for (const envelope of envelopes) bus.send(envelope);
          return [];
        },
      },
      store: bus.store,
      runEvents: bus.store,
      workflows: { ...REFERENCE_FRONT_DOOR_WORKFLOWS, registry: workflows },
    };
    const send = (request: Partial<HttpRequest> & Pick<HttpRequest, "method" | "path">) =>
      handleRequest({ headers: {}, requestId: "req-1", ...request }, withOrchestrator, {});
    const json = { "content-type": "application/json" };
    const put = await send({
      method: "PUT",
      path: "/v1/workflows/drafts-per-claim",
      headers: json,
      body: JSON.stringify({
        name: "drafts-per-claim",
        nodes: [
          { id: "topic", role: "topic-selection" },
          { id: "drafts", role: "writing", map: { items: { node: "topic", path: "claims" } } },
        ],
        edges: [{ from: "topic", to: "drafts" }],
      }),
      claims: ACME,
    });
    expect(put.statusCode, put.body).toBe(201);
    const started = await send({
      method: "POST",
      path: "/v1/workflows/drafts-per-claim/runs",
      headers: json,
      body: JSON.stringify({ topic_hint: "grid storage" }),
      claims: ACME,
    });
    expect(started.statusCode).toBe(202);
    const runId = String(bodyOf(started).run_id);
    await bus.drain();
    expect(bus.emitted("workflow.rejected")).toHaveLength(1);

    const read = await send({ method: "GET", path: `/v1/runs/${runId}`, claims: ACME });
    expect(read.statusCode).toBe(200);
    expect(bodyOf(read)).toEqual({
      run_id: runId,
      status: "REJECTED",
      nodes: {},
      error: {
        code: "workflow.map_role_without_items",
        message: expect.stringContaining("map node drafts runs writing"),
      },
    });
    const foreign = await send({ method: "GET", path: `/v1/runs/${runId}`, claims: GLOBEX });
    expect(foreign.statusCode).toBe(404);
  });
});

describe("a service erases a customer (POST /v1/tenants/{tenant_id}/customers/{customer_id}/erasure)", () => {
  const PRIVACY = "arn:aws:sts::123456789012:assumed-role/privacy-desk/session-1";
  const erase = (tenant: string, customer: string, body?: unknown) => ({
    method: "POST" as const,
    path: `/v1/tenants/${tenant}/customers/${customer}/erasure`,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    principal: PRIVACY,
  });

  /** A world whose customer keys know cust_42 of acme (erased on the first request). */
  function withErasure() {
    const w = world();
    const erasures: { subject: unknown; by: string; reason?: string }[] = [];
    let erased: { at: string; by: string; reason?: string } | undefined;
    w.ports = {
      ...w.ports,
      erasure: {
        async erase(subject, erasure) {
          erasures.push({ subject, by: erasure.by, reason: erasure.reason });
          if (subject.tenant !== "acme" || subject.customer !== "cust_42")
            return { outcome: "unknown", subject, conversations: 0, overwritten: 0 };
          const outcome = erased ? "already_erased" : "erased";
          erased ??= erasure;
          return { outcome, subject, erasure: erased, conversations: 2, overwritten: 0 };
        },
      },
    };
    const send = (request: ReturnType<typeof erase>) =>
      handleRequest({ requestId: "req-1", ...request }, w.ports);
    return { ...w, send, erasures };
  }

  it("erases the path's tenant's customer, records it once however often asked", async () => {
    const { send, published, erasures } = withErasure();
    const first = await send(erase("acme", "cust_42", { reason: "ticket 7" }));
    expect(first.statusCode, first.body).toBe(200);
    expect(bodyOf(first)).toMatchObject({
      tenant_id: "acme",
      customer_id: "cust_42",
      outcome: "erased",
      erased_by: PRIVACY,
      conversations: 2,
    });
    expect(bodyOf(first).unreachable).toEqual(
      expect.arrayContaining([{ where: RETENTION.clientMessages.where, days: 30 }]),
    );
    const again = await send(erase("acme", "cust_42"));
    expect(bodyOf(again)).toMatchObject({ outcome: "already_erased", erased_by: PRIVACY });
    expect(erasures[0]).toMatchObject({
      subject: { tenant: "acme", customer: "cust_42" },
      reason: "ticket 7",
    });
    // The same record both times (its id is the erasure's): the audit group keeps it once.
    expect(published.map((e) => e.event_type)).toEqual([
      "operator.action.recorded",
      "operator.action.recorded",
    ]);
    expect(published[0]).toEqual(published[1]);
    expect(published[0]).toMatchObject({
      tenant_id: "acme",
      payload: {
        action: "customer.erase",
        target: "customer/acme/cust_42",
        reason: "ticket 7",
        // Who acted, as IAM names the request's signer.
        principal: PRIVACY,
        via: "front-door",
      },
    });
  });

  it("answers 404 for a customer it never saw, in this tenant or at all, and records nothing", async () => {
    const { send, published } = withErasure();
    const elsewhere = await send(erase("globex", "cust_42"));
    const never = await send(erase("acme", "cust_nobody"));
    expect([elsewhere.statusCode, never.statusCode]).toEqual([404, 404]);
    expect(bodyOf(never).detail).toContain("cust_nobody");
    expect(published).toEqual([]);
  });

  it("refuses an unsigned request, a bad customer id, a long reason and a client's token", async () => {
    const { send, erasures } = withErasure();
    const unsigned = await send({ ...erase("acme", "cust_42"), principal: undefined as never });
    const badId = await send(erase("acme", "4915112345678"));
    const long = await send(erase("acme", "cust_42", { reason: "x".repeat(1001) }));
    const client = await handleRequest(
      {
        requestId: "r",
        method: "POST",
        path: "/v1/customers/cust_42/erasure",
        headers: {},
        claims: ACME,
      },
      withErasure().ports,
    );
    expect([unsigned, badId, long, client].map((r) => r.statusCode)).toEqual([401, 400, 400, 404]);
    expect(erasures).toEqual([]);
  });
});

describe("a deployment serves the routes of its features only", () => {
  const startRun = {
    method: "POST",
    path: "/v1/workflows/quick-news/runs",
    headers: { "content-type": "application/json", "idempotency-key": "start-1" },
    body: JSON.stringify({ topic_hint: "grid storage" }),
    claims: ACME,
  };
  const openApi = async (send: ReturnType<typeof world>["send"], features: Feature[]) => {
    const answer = await send({ method: "GET", path: "/v1/openapi.json" }, { features });
    expect(answer.statusCode).toBe(200);
    return Object.keys((bodyOf(answer) as { paths: object }).paths);
  };

  it("without a role that takes customers' messages: a message is 404 not_served, and nothing is put, kept or counted", async () => {
    const { send, published } = world({ perMinute: 1 });
    const keyed = post("conv_a1", { text: "hi" }, { "idempotency-key": "k-1" });
    const answers = [
      await send(keyed, { features: [] }),
      await send(keyed, { features: ["runs", "tasks"] }),
      await send(
        { method: "GET", path: "/v1/conversations/conv_a1", claims: ACME },
        { features: [] },
      ),
      await send(
        {
          method: "POST",
          path: "/v1/tenants/acme/conversations/conv_a1/messages",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ text: "hi", customer_id: "cust_1" }),
          principal: "arn:aws:iam::123456789012:role/partner",
        },
        { features: [] },
      ),
    ];
    expect(answers.map((a) => [a.statusCode, bodyOf(a).code])).toEqual([
      [404, "not_served"],
      [404, "not_served"],
      [404, "not_served"],
      [404, "not_served"],
    ]);
    expect(answers[0]?.headers["content-type"]).toBe("application/problem+json");
    expect(bodyOf(answers[0] as { body: string }).detail).toBe(
      "/v1/conversations/conv_a1/messages is not served here: this deployment has no customers' conversations: none of its roles takes conversation.message.received",
    );
    expect(published).toEqual([]);
    // Neither the key nor the tenant's one request a minute was taken: served, another body under
    // the same key is a first request.
    const served = await send(post("conv_a1", { text: "other" }, { "idempotency-key": "k-1" }));
    expect(served.statusCode).toBe(202);
  });

  it("without the orchestrator: a run's start and read are 404 not_served, and no run is counted in flight", async () => {
    const { send, published, runs } = world();
    const started = await send(startRun, { features: ["conversations", "tasks"] });
    const read = await send(
      { method: "GET", path: "/v1/runs/run_1", claims: ACME },
      { features: ["conversations"] },
    );
    expect([started, read].map((a) => [a.statusCode, bodyOf(a).code])).toEqual([
      [404, "not_served"],
      [404, "not_served"],
    ]);
    expect(bodyOf(started).detail).toContain("none of its roles takes workflow.start.requested");
    expect(published).toEqual([]);
    expect(runs.counted.get("acme") ?? []).toEqual([]);
  });

  it("serves what needs no feature: a task, the erasure route and the OpenAPI document", async () => {
    const { send } = world();
    const task = await send(
      { method: "GET", path: "/v1/tasks/task_unknown", claims: ACME },
      { features: [] },
    );
    expect([task.statusCode, bodyOf(task).code]).toEqual([404, "not_found"]);
    const unknownPath = await send({ method: "GET", path: "/v1/nothing" }, { features: [] });
    expect(bodyOf(unknownPath).code).toBe("not_found");
  });

  it("serves the routes of the features it has, and its OpenAPI document lists only those", async () => {
    const { send, published } = world();
    const accepted = await send(post("conv_a1", { text: "hi" }), { features: ["conversations"] });
    expect(accepted.statusCode).toBe(202);
    expect(published.map((e) => e.event_type)).toEqual(["conversation.message.received"]);
    const every = await openApi(send, ["conversations", "runs", "tasks"]);
    const none = await openApi(send, []);
    const conversations = await openApi(send, ["conversations"]);
    expect(every).toEqual(Object.keys(openapi.paths));
    expect(none.filter((p) => /conversations|runs/.test(p))).toEqual([]);
    expect(none).toEqual(
      expect.arrayContaining([
        "/v1/openapi.json",
        "/v1/tasks/{task_id}",
        "/v1/tenants/{tenant_id}/customers/{customer_id}/erasure",
      ]),
    );
    expect(conversations.filter((p) => /runs/.test(p))).toEqual([]);
    expect(conversations).toContain("/v1/conversations/{conversation_id}/stream");
  });
});
