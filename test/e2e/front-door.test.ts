import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { decodeProtectedHeader } from "jose";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { loadConversation } from "../../lib/dev/local/scenario/customer-support";
import { tenantConversationId } from "../../schemas/ids";
import { undocumented } from "../support/openapi";
import { serviceSignedHeaders } from "../support/sigv4";
import { openEventStream, type ServerSentEvent } from "../support/sse";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * The front door on the local stack, through real HTTP: the HTTP API as API Gateway serves it
 * (routes, the JWT authorizer with the local issuer) in front of the stack's front-door function,
 * whose messages go through the whole support conversation.
 */

const execFileAsync = promisify(execFile);
const SERVICE_SCOPE = "agentbus/service";

/** A server-sent event of a stream, as the tests read it. */
type StreamEvent = ServerSentEvent<{
  readonly turns?: readonly { task_id: string; status: string; reply_text?: string }[];
  readonly run_id?: string;
  readonly status?: string;
}>;

describe("the front door on the local stack, over HTTP", () => {
  // One run in flight per tenant, so that the cap shows with two starts; tokens with the scope
  // SERVICE_SCOPE are a service's.
  const local = localSupportStack("fd", {
    envOverrides: { TENANT_RUNS_IN_FLIGHT: "1" },
    context: { "agentbus:serviceScope": SERVICE_SCOPE },
  });
  const door = () => {
    const frontDoor = local.env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    return frontDoor;
  };
  /** A tenant's conversation (keyed by the tenant and its id) once its turn reaches `status`. */
  const turnReaches = (tenant: string, conversation: string, taskId: string, status: string) =>
    local.turnReaches(tenantConversationId(tenant, conversation), taskId, status);
  const tokenOf = (tenant: string, sub = `u-${tenant}`) =>
    door().issuer.token({ tenant_id: tenant, sub });
  /**
   * A request to the door (`path` under `/v1`, or from the root when it does not start with `/`);
   * every error it answers must be one the OpenAPI document describes.
   */
  const call = async (
    method: string,
    path: string,
    options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) => {
    const url = path.startsWith("/") ? `${door().url}${path}` : `${door().url.slice(0, -3)}${path}`;
    const response = await fetch(url, {
      method,
      headers: {
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
        ...options.headers,
      },
      ...(options.body !== undefined
        ? { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }
        : {}),
    });
    const text = await response.text();
    const answer = { method, path: new URL(url).pathname, status: response.status };
    if (response.status >= 400)
      expect(undocumented({ ...answer, headers: response.headers, text }), text).toEqual([]);
    return {
      status: response.status,
      headers: response.headers,
      body: text ? JSON.parse(text) : undefined,
    };
  };

  /** A stream route's server-sent events, read as they come (until `close`). */
  const stream = (path: string, token?: string, lastEventId?: string) =>
    openEventStream<StreamEvent["data"]>(`${door().url}${path}`, {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(lastEventId ? { "last-event-id": lastEventId } : {}),
    });

  it(
    "the reply arrives on the conversation's stream, and a reconnect resumes where it left",
    async () => {
      const conversation = `conv_${ulid()}`;
      const acme = await tokenOf("acme");
      // Opened before the message exists: the stream waits for the conversation.
      const live = await stream(`/conversations/${conversation}/stream`, acme);
      expect(live.response.status).toBe(200);
      expect(live.response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      const sent = await call("POST", `/conversations/${conversation}/messages`, {
        token: acme,
        body: { text: "Where is my order 123?" },
      });
      expect(sent.status).toBe(202);
      const delivered = await live.until(
        (e) => e.data.turns?.some((t) => t.status === "delivered") === true,
      );
      live.close();
      expect(delivered.event).toBe("conversation");
      expect(delivered.data.turns).toEqual([
        expect.objectContaining({ task_id: sent.body.task_id, reply_text: expect.any(String) }),
      ]);

      // Reconnected with the last event id and nothing new: nothing until a second message.
      const resumed = await stream(`/conversations/${conversation}/stream`, acme, delivered.id);
      await call("POST", `/conversations/${conversation}/messages`, {
        token: acme,
        body: { text: "And order 456?" },
      });
      const first = await resumed.next();
      resumed.close();
      expect(Number(first.id)).toBeGreaterThan(Number(delivered.id));
      expect(first.data.turns?.map((t) => t.task_id)).not.toContain(sent.body.task_id);

      // Another tenant's stream of the same id is its own conversation, which has no message yet:
      // it opens and waits, with nothing of acme's. No token: the stream does not open.
      const foreign = await stream(
        `/conversations/${conversation}/stream`,
        await tokenOf("globex"),
      );
      const anonymous = await stream(`/conversations/${conversation}/stream`);
      expect([foreign.response.status, anonymous.response.status]).toEqual([200, 401]);
      const nothing = await Promise.race([
        foreign.next().then(
          () => "an event",
          () => "closed",
        ),
        new Promise((r) => setTimeout(() => r("nothing"), 1500)),
      ]);
      expect(nothing).toBe("nothing");
      expect(anonymous.response.headers.get("www-authenticate")).toContain("no bearer token");
      foreign.close();
      anonymous.close();
    },
    TIMEOUT * 2,
  );

  it(
    "a message posted is answered: the reply shows on the conversation, for its tenant only",
    async () => {
      expect(door().url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      const conversation = `conv_${ulid()}`;
      const acme = await tokenOf("acme");
      const sent = await call("POST", `/conversations/${conversation}/messages`, {
        token: acme,
        body: { text: "Where is my order 123?" },
        headers: { "idempotency-key": `key-${conversation}` },
      });
      expect(sent.status, JSON.stringify(sent.body)).toBe(202);
      const taskId = sent.body.task_id as string;
      // The same key again: the same answer, one task.
      const again = await call("POST", `/conversations/${conversation}/messages`, {
        token: acme,
        body: { text: "Where is my order 123?" },
        headers: { "idempotency-key": `key-${conversation}` },
      });
      expect(again).toMatchObject({ status: 202, body: sent.body });

      const view = await turnReaches("acme", conversation, taskId, "delivered");
      expect(view.tenant_id).toBe("acme");
      expect(Object.keys(view.turns)).toEqual([taskId]);
      const task = await call("GET", `/tasks/${taskId}`, { token: acme });
      expect(task.status).toBe(200);
      expect(task.body.events.map((e: { event_type: string }) => e.event_type)).toEqual(
        expect.arrayContaining(["conversation.message.accepted", "notification.delivered"]),
      );
      expect(
        (await call("GET", `/tasks/${taskId}`, { token: await tokenOf("globex") })).status,
      ).toBe(404);
      const read = await call("GET", `/conversations/${conversation}`, { token: acme });
      expect(read.status).toBe(200);
      expect(read.body.turns).toEqual([
        expect.objectContaining({
          task_id: taskId,
          status: "delivered",
          reply_text: expect.any(String),
        }),
      ]);

      // Another tenant: 404 to a read, as for a conversation that does not exist; its post to the
      // same id opens a conversation of its own, and acme's has its one turn.
      const globex = await tokenOf("globex");
      const foreign = await call("GET", `/conversations/${conversation}`, { token: globex });
      const missing = await call("GET", `/conversations/conv_${ulid()}`, { token: globex });
      expect([foreign.status, missing.status]).toEqual([404, 404]);
      const own = await call("POST", `/conversations/${conversation}/messages`, {
        token: globex,
        body: { text: "Where is my order 456?" },
      });
      expect(own.status).toBe(202);
      const theirs = await turnReaches("globex", conversation, own.body.task_id, "delivered");
      expect(theirs.tenant_id).toBe("globex");
      expect(theirs.turn_order).toEqual([own.body.task_id]);
      const ours = await loadConversation(local.env, tenantConversationId("acme", conversation));
      expect(ours?.turn_order).toEqual([taskId]);
    },
    TIMEOUT * 2,
  );

  it("bad input and bad tokens get their errors, and nothing is written", async () => {
    const conversation = `conv_${ulid()}`;
    const acme = await tokenOf("acme");
    const path = `/conversations/${conversation}/messages`;
    const expired = await door().issuer.token({ tenant_id: "acme", sub: "u-1" }, -60);
    const checks: [Promise<{ status: number; body: unknown }>, number, unknown][] = [
      [call("POST", path, { token: acme, body: "{oops" }), 400, { code: "invalid_json" }],
      [
        call("POST", path, { token: acme, body: { text: "hi", admin: true } }),
        400,
        { code: "invalid_request" },
      ],
      [
        call("POST", path, { token: acme, body: { text: "x".repeat(20_000) } }),
        413,
        { code: "payload_too_large" },
      ],
      [call("POST", path, { body: { text: "hi" } }), 401, { message: "Unauthorized" }],
      [
        call("POST", path, { token: expired, body: { text: "hi" } }),
        401,
        { message: "Unauthorized" },
      ],
      [
        call("POST", path, { token: `${acme}x`, body: { text: "hi" } }),
        401,
        { message: "Unauthorized" },
      ],
      [
        call("POST", path, {
          token: await door().issuer.token({ sub: "u-1" }),
          body: { text: "hi" },
        }),
        403,
        { code: "forbidden" },
      ],
      [call("POST", "/nowhere", { token: acme, body: {} }), 404, { code: "not_found" }],
    ];
    for (const [pending, status, body] of checks) {
      const response = await pending;
      expect(response.status, JSON.stringify(response.body)).toBe(status);
      expect(response.body).toMatchObject(body as object);
    }
    const expiredAnswer = await fetch(`${door().url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${expired}`, "content-type": "application/json" },
      body: "{}",
    });
    expect(expiredAnswer.headers.get("www-authenticate")).toContain("the token has expired");
    await local.env.runtime.idle();
    expect(
      await loadConversation(local.env, tenantConversationId("acme", conversation)),
    ).toBeUndefined();
  });

  it(
    "a workflow run started over HTTP completes, and its nodes' outputs are read back",
    async () => {
      const acme = await tokenOf("acme");
      const started = await call("POST", "/workflows/quick-news/runs", {
        token: acme,
        body: { topic_hint: "grid storage" },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(202);
      const runPath = (started.body.links.run as string).replace(/^\/v1/, "");
      // Its progress on the run's stream, until it ends.
      const progress = await stream(`${runPath}/stream`, acme);
      const end = await progress.until((e) => e.event === "end");
      progress.close();
      expect(end.data).toEqual({ run_id: started.body.run_id, status: "COMPLETED" });
      const run = await call("GET", runPath, { token: acme });
      expect(run.body).toMatchObject({ run_id: started.body.run_id, status: "COMPLETED" });
      expect(
        Object.values(run.body.nodes as Record<string, { state: string; output?: unknown }>),
      ).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ state: "COMPLETED", output: expect.anything() }),
        ]),
      );
      const foreign = await call("GET", runPath, { token: await tokenOf("globex") });
      expect(foreign.status).toBe(404);
    },
    TIMEOUT + 30_000,
  );

  it(
    "a tenant registers a workflow over HTTP, reads it, and runs it with an input that fits its declared input",
    async () => {
      const acme = await tokenOf("acme");
      const brief = {
        name: "brief",
        nodes: [
          { id: "topic-selection", role: "topic-selection" },
          { id: "writing", role: "writing" },
        ],
        edges: [{ from: "topic-selection", to: "writing" }],
        input: {
          type: "object",
          properties: {
            topic_hint: { type: "string", minLength: 1 },
            audience: { type: "string", enum: ["experts", "everyone"] },
          },
          required: ["topic_hint", "audience"],
        },
      };
      const refused = await call("PUT", "/workflows/brief", {
        token: acme,
        body: { ...brief, nodes: [...brief.nodes, { id: "poem", role: "poet" }] },
      });
      expect(refused.status).toBe(400);
      expect(JSON.stringify(refused.body.errors)).toContain("dag.unknown_role");
      const put = await call("PUT", "/workflows/brief", { token: acme, body: brief });
      expect(put.status, JSON.stringify(put.body)).toBe(201);
      expect((await call("PUT", "/workflows/brief", { token: acme, body: brief })).status).toBe(
        200,
      );
      const listed = await call("GET", "/workflows", { token: acme });
      expect(listed.body.workflows).toContainEqual({
        name: "brief",
        scope: "tenant",
        versions: [1],
      });
      const globex = await tokenOf("globex");
      expect((await call("GET", "/workflows/brief", { token: globex })).status).toBe(404);
      const unfit = await call("POST", "/workflows/brief/runs", {
        token: acme,
        body: { topic_hint: "ferries" },
      });
      expect(unfit.status).toBe(400);
      expect(unfit.body.errors).toEqual([{ path: "audience", message: "required" }]);
      const started = await call("POST", "/workflows/brief/runs", {
        token: acme,
        body: { topic_hint: "ferries", audience: "everyone" },
      });
      expect(started.status, JSON.stringify(started.body)).toBe(202);
      const runPath = (started.body.links.run as string).replace(/^\/v1/, "");
      const progress = await stream(`${runPath}/stream`, acme);
      const end = await progress.until((e) => e.event === "end");
      progress.close();
      expect(end.data).toEqual({ run_id: started.body.run_id, status: "COMPLETED" });
    },
    TIMEOUT + 30_000,
  );

  it(
    "a service signs with AWS credentials and calls for the tenant its path names",
    async () => {
      const conversation = `conv_${ulid()}`;
      const base = door().url.replace(/\/v1$/, "");
      const path = `/v1/tenants/acme/conversations/${conversation}/messages`;
      const body = JSON.stringify({ text: "Where is my order 123?", customer_id: "cust_svc1" });
      const url = new URL(`${base}${path}`);
      const signed = { headers: await serviceSignedHeaders(url, "POST", body) };
      const sent = await fetch(url, { method: "POST", headers: signed.headers, body });
      expect(sent.status, await sent.clone().text()).toBe(202);
      const { task_id: taskId } = (await sent.json()) as { task_id: string };
      const view = await turnReaches("acme", conversation, taskId, "delivered");
      expect(view.tenant_id).toBe("acme");

      // curl signs the same way (--aws-sigv4): the service reads the conversation back.
      const { stdout } = await execFileAsync(
        "curl",
        [
          "-s",
          "--aws-sigv4",
          "aws:amz:us-east-1:execute-api",
          "--user",
          "testing:testing",
          `${base}/v1/tenants/acme/conversations/${conversation}`,
        ],
        { encoding: "utf8", timeout: 10_000 },
      );
      expect(JSON.parse(stdout)).toMatchObject({ conversation_id: conversation });

      // Unsigned, signed by other credentials, or tampered with after signing: API Gateway's 403.
      const [unsigned, foreign, tampered] = [
        await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body }),
        await fetch(url, {
          method: "POST",
          headers: {
            ...signed.headers,
            authorization: String(signed.headers.authorization).replace("testing/", "AKIDOTHER/"),
          },
          body,
        }),
        await fetch(url, {
          method: "POST",
          headers: signed.headers,
          body: body.replace("123", "456"),
        }),
      ];
      expect([unsigned.status, foreign.status, tampered.status]).toEqual([403, 403, 403]);
      expect(((await tampered.json()) as { message: string }).message).toContain(
        "signature we calculated does not match",
      );
      // The JWT routes still take no signature, and the service routes no token.
      const withToken = await call("GET", `/tenants/acme/conversations/${conversation}`, {
        token: await tokenOf("acme"),
      });
      expect(withToken.status).toBe(403);
    },
    TIMEOUT * 2,
  );

  it(
    "over its runs in flight a tenant's start gets 429 with Retry-After, until its run has ended",
    async () => {
      const initech = await tokenOf("initech");
      const start = (key: string) =>
        call("POST", "/workflows/quick-news/runs", {
          token: initech,
          body: { topic_hint: "grid storage" },
          headers: { "idempotency-key": key },
        });
      const first = await start(`first-${ulid()}`);
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      const refusedKey = `second-${ulid()}`;
      const refused = await start(refusedKey);
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("30");
      expect(refused.body).toMatchObject({ code: "too_many_requests" });
      const runPath = (first.body.links.run as string).replace(/^\/v1/, "");
      const deadline = Date.now() + TIMEOUT;
      while ((await call("GET", runPath, { token: initech })).body?.status !== "COMPLETED") {
        if (Date.now() > deadline) throw new Error(`${runPath} did not complete`);
        await new Promise((r) => setTimeout(r, 500));
      }
      // The refused key was not kept: the same key now starts a new run.
      const later = await start(refusedKey);
      expect(later.status, JSON.stringify(later.body)).toBe(202);
      expect(later.body.run_id).not.toBe(first.body.run_id);
    },
    TIMEOUT + 30_000,
  );

  it("serves its OpenAPI document without a token, to HEAD as to GET", async () => {
    const doc = await call("GET", "/openapi.json");
    expect(doc.status).toBe(200);
    expect(doc.body).toMatchObject({ openapi: "3.1.0", paths: expect.any(Object) });
    const head = await call("HEAD", "/openapi.json");
    expect([head.status, head.headers.get("content-type"), head.body]).toEqual([
      200,
      doc.headers.get("content-type"),
      undefined,
    ]);
  });

  it(
    "a user's token speaks for its own customer; only a token with the service scope names another",
    async () => {
      const conversation = `conv_${ulid()}`;
      const path = `/conversations/${conversation}/messages`;
      const user = await tokenOf("acme", "u-shopper");
      const foreign = await call("POST", path, {
        token: user,
        body: { text: "Where is my order 123?", customer_id: "cust_someone-else" },
      });
      expect(foreign.status, JSON.stringify(foreign.body)).toBe(403);
      expect(foreign.body).toMatchObject({ code: "forbidden" });
      // Naming the customer it is, is the same as naming none.
      const own = await call("POST", path, {
        token: user,
        body: { text: "Where is my order 123?", customer_id: "cust_u-shopper" },
      });
      expect(own.status, JSON.stringify(own.body)).toBe(202);
      const service = await door().issuer.token({
        tenant_id: "acme",
        sub: "crm-backend",
        scope: `openid ${SERVICE_SCOPE}`,
      });
      // A conversation is its customer's: the service speaks for the other one in another.
      const theirs = `conv_${ulid()}`;
      const forCustomer = await call("POST", `/conversations/${theirs}/messages`, {
        token: service,
        body: { text: "Where is my order 123?", customer_id: "cust_someone-else" },
      });
      expect(forCustomer.status, JSON.stringify(forCustomer.body)).toBe(202);
      const ours = await turnReaches("acme", conversation, own.body.task_id, "delivered");
      expect(ours.turn_order).toEqual([own.body.task_id]);
      await turnReaches("acme", theirs, forCustomer.body.task_id, "delivered");
    },
    TIMEOUT * 2,
  );

  it("a malformed path is a 400 or 404, and the door goes on answering", async () => {
    const acme = await tokenOf("acme");
    const answers = [
      await call("GET", "/conversations/%ZZ/stream", { token: acme }),
      await call("GET", "/runs/%E0%A4%A/stream", { token: acme }),
      await call("GET", "//"),
      await call("GET", "/conversations/%ZZ", { token: acme }),
      await call("GET", "/tasks/conv_%", { token: acme }),
      await call("POST", "/conversations/conv_%/messages", { token: acme, body: { text: "hi" } }),
    ];
    expect(answers.map((a) => [a.status, a.body?.code])).toEqual([
      [400, "invalid_request"],
      [400, "invalid_request"],
      [404, "not_found"],
      [400, "invalid_request"],
      [400, "invalid_request"],
      [400, "invalid_request"],
    ]);
    expect((await call("GET", "/openapi.json")).status).toBe(200);
  });

  it("an unknown path is 404 and another method 405 with Allow, as problem details", async () => {
    const acme = await tokenOf("acme");
    const conversation = `/conversations/conv_${ulid()}`;
    const answers = {
      nowhere: await call("GET", "/nowhere", { token: acme }),
      delete: await call("DELETE", conversation, { token: acme }),
      put: await call("PUT", "/openapi.json"),
      getMessages: await call("GET", `${conversation}/messages`, { token: acme }),
      postStream: await call("POST", `${conversation}/stream`, { token: acme, body: {} }),
    };
    expect(
      Object.fromEntries(
        Object.entries(answers).map(([name, a]) => [
          name,
          [a.status, a.headers.get("content-type"), a.body?.code, a.headers.get("allow")],
        ]),
      ),
    ).toEqual({
      nowhere: [404, "application/problem+json", "not_found", null],
      delete: [405, "application/problem+json", "method_not_allowed", "GET, HEAD"],
      put: [405, "application/problem+json", "method_not_allowed", "GET, HEAD"],
      getMessages: [405, "application/problem+json", "method_not_allowed", "POST"],
      postStream: [405, "application/problem+json", "method_not_allowed", "GET, HEAD"],
    });
  });

  it("a token is refused as API Gateway refuses it: one without exp, and the stream's 401 names the problem", async () => {
    const acme = await tokenOf("acme");
    // The local issuer signs as the issuers an HTTP API's JWT authorizer takes: RSA.
    expect(decodeProtectedHeader(acme).alg).toBe("RS256");
    expect((await door().issuer.jwks()).keys).toEqual([
      expect.objectContaining({ kty: "RSA", alg: "RS256" }),
    ]);
    const forever = await door().issuer.sign({
      iss: door().issuer.issuer,
      aud: door().issuer.audience,
      sub: "u-1",
      tenant_id: "acme",
    });
    const conversation = `/conversations/conv_${ulid()}`;
    const read = await call("GET", conversation, { token: forever });
    expect(read.status).toBe(401);
    expect(read.headers.get("www-authenticate")).toContain("exp");
    const streamed = await call("GET", `${conversation}/stream`, { token: forever });
    expect(streamed.status).toBe(401);
    // Its challenge's parameters are comma-separated (RFC 9110 §11.6.1).
    const anonymous = await call("GET", `${conversation}/stream`);
    expect(anonymous.headers.get("www-authenticate")).toMatch(
      /^Bearer error="invalid_token", error_description="[^"]+"$/,
    );
  });
});
