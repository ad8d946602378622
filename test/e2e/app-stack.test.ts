import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { type LocalEnvironment, startLocal } from "../../lib/local";
import { startConsole } from "../../lib/operator/console/server";
import { useRoleModules } from "../../lib/operator/groups";
import { renderStatusText } from "../../lib/operator/render-text";
import { opsSource } from "../../lib/operator/source";
import { status } from "../../lib/operator/status";
import { type Envelope, registry } from "../../schemas";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";
import { emulator } from "../support/aws";
import { haveChromium, launchChromium, seen } from "../support/browser";
import { undocumented } from "../support/openapi";
import { serviceSignedHeaders } from "../support/sigv4";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * An application's own stack on the local runtime, started as `agentbus/local` starts it
 * (lib/local.ts, without the reference applications' defaults): the bookkeeping application of
 * test/fixtures/bookkeeping, one role outside functions/ with an integration of its own, records
 * one ledger entry for a refund made.
 */
describe("an application's stack on the local runtime", () => {
  const stage = `app${ulid().slice(-6).toLowerCase()}`;
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({ stack: BOOKKEEPING, endpoint: emulator().endpoint, stage });
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await env?.stop();
  });

  /** A refund appended to its stream through the outbox, once the bookkeeper has recorded it. */
  async function recordRefund(order: string): Promise<Envelope[]> {
    const refund = `refund_${ulid()}`;
    const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
    const emitted = await appendToStream(deps, {
      aggregate: { type: "refund", id: refund },
      producer: "payments-desk",
      correlationId: `corr_${ulid()}`,
      taskId: `task_${ulid()}`,
      decide: () => ({
        state: { refunded: true },
        emit: [
          {
            type: "payment.refunded",
            payload: { order_id: order, amount_cents: 990, refund_id: refund },
            orderKey: order,
          },
        ],
      }),
    });
    await waitUntil(
      "the bookkeeper's book of the refund",
      async () => (await env.store.load({ state: { type: "ledger_book", id: order } })).state,
      120_000,
    );
    await env.runtime.idle();
    return emitted;
  }

  it("runs the application's groups only, and its names have none of the reference applications'", () => {
    expect(env.groups).toEqual(["bookkeeper"]);
    expect(Object.keys(env.names.groups)).toEqual(["bookkeeper"]);
    expect(env.names.tables.orders).toBeUndefined();
    expect(env.names.repliesTopic).toBeUndefined();
    expect(env.ops.groups).toEqual(["bookkeeper"]);
  });

  it(
    "a refund made is recorded once in the application's ledger",
    async () => {
      const orderId = `ord_${ulid()}`;
      const refundId = `refund_${ulid()}`;
      const refunded: Envelope = {
        event_id: ulid(),
        event_type: "payment.refunded",
        schema_version: 1,
        occurred_at: new Date().toISOString(),
        correlation_id: `corr_${ulid()}`,
        causation_id: null,
        task_id: `task_${ulid()}`,
        // A fact is sequenced: the first of its stream, as the relay would publish it.
        aggregate: { type: "refund", id: refundId, version: 1 },
        order_key: orderId,
        producer: "payments-desk",
        attempt: 1,
        payload: { order_id: orderId, refund_id: refundId, amount_cents: 1250 },
      };
      await putOnBus(env, "events", [refunded]);

      const ledgerTable = env.deployment.outputs.LedgerTableName as string;
      const book = { type: "ledger_book", id: orderId };
      const state = await waitUntil(
        "the bookkeeper's book",
        async () => (await env.store.load({ state: book })).state,
        120_000,
      );
      expect(state.data).toEqual({ entries: 1 });
      await env.runtime.idle();
      const { Items } = await env.clients.dynamodb.send(
        new ScanCommand({ TableName: ledgerTable, ConsistentRead: true }),
      );
      expect(Items?.map((item) => [item.entry_key?.S, item.amount_cents?.N])).toEqual([
        [refundId, "1250"],
      ]);

      // The operator tools read the application's stack from its outputs, as they read any.
      const view = await status(env.ops);
      expect(view.groups.map((g) => g.group)).toEqual(["bookkeeper"]);
      expect(view.counts.unknownSideEffects).toBe(0);
      // It serves none of the reference applications' runs, conversations or tasks: status says
      // so, and prints no count of them.
      expect(view.features).toEqual([]);
      const lines = renderStatusText(view).split("\n");
      const shown = (start: string) => lines.some((line) => line.trim().startsWith(start));
      for (const absent of ["runs:", "sweeper:", "held replies", "handed off", "FAILED nodes"])
        expect(shown(absent), absent).toBe(false);
      expect(shown("NEEDS_HUMAN nodes")).toBe(true);
      expect(shown("not served: this deployment has no workflow runs")).toBe(true);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it("its front door refuses what no role of the stack takes, and serves the rest", async () => {
    const door = env.frontDoor;
    if (!door) throw new Error("the application's stack serves no front door");
    const token = await door.issuer.token({ tenant_id: "acme", sub: "alice" });
    // Every refusal is one the OpenAPI document (the whole one) describes.
    const call = async (method: string, path: string, body?: unknown) => {
      const url = new URL(`${door.url}${path}`);
      const response = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      const answer = {
        method,
        path: url.pathname,
        status: response.status,
        headers: response.headers,
        text,
      };
      if (response.status >= 400) expect(undocumented(answer)).toEqual([]);
      return { status: response.status, body: JSON.parse(text) as Record<string, unknown> };
    };
    const message = await call("POST", "/conversations/conv_1/messages", { text: "hello" });
    const run = await call("POST", "/workflows/quick-news/runs", { topic_hint: "ledgers" });
    expect([message.status, message.body.code, run.status, run.body.code]).toEqual([
      404,
      "not_served",
      404,
      "not_served",
    ]);
    expect(message.body.detail).toContain("none of its roles takes conversation.message.received");
    const document = await call("GET", "/openapi.json");
    expect(document.status).toBe(200);
    expect(Object.keys(document.body.paths as object).sort()).toEqual([
      "/v1/openapi.json",
      "/v1/tasks/{task_id}",
      "/v1/tenants/{tenant_id}/customers/{customer_id}/erasure",
      "/v1/tenants/{tenant_id}/tasks/{task_id}",
    ]);
    const erasure = new URL(`${door.url}/tenants/acme/customers/cust_nobody/erasure`);
    const erased = await fetch(erasure, {
      method: "POST",
      headers: await serviceSignedHeaders(erasure, "POST"),
    });
    expect([erased.status, ((await erased.json()) as { code: string }).code]).toEqual([
      404,
      "not_found",
    ]);
  });

  it.skipIf(!haveChromium)(
    "its console, in Chromium, shows the application's group, its dead letters and a trace, and says what it leaves out",
    async () => {
      useRoleModules(BOOKKEEPING.roles);
      const running = await startConsole({ source: opsSource(env.ops) });
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        const open = async (path: string) =>
          (await page.goto(new URL(path, running.url).href))?.status();
        expect(await open("/")).toBe(200);
        const groups = page.locator("tr[data-group]");
        expect(await groups.evaluateAll((rows) => rows.map((r) => r.dataset.group))).toEqual([
          "bookkeeper",
        ]);
        expect(await page.locator("[data-lacking-features]").isVisible()).toBe(true);
        expect(
          await page
            .locator("[data-lacking]")
            .evaluateAll((items) => items.map((i) => i.dataset.lacking)),
        ).toEqual(["conversations", "runs", "tasks"]);
        expect(await page.locator("h2").allTextContents()).toEqual([
          "Waiting for a person",
          "Queues by consumer group",
        ]);
        expect(await open("/dead-letters")).toBe(200);
        expect(await seen(page.locator("main"))).toContain("No dead letters");
        expect(await open(`/runs/run_1`)).toBe(404);
        expect(await seen(page.locator("[data-not-found]"))).toContain(
          "none of its roles takes workflow.start.requested",
        );
        // A refund the payments desk records through the outbox (so the event store has it), traced
        // with the application's roles, as `agentbus --app` gives them.
        const [recorded] = await recordRefund(`ord_${ulid()}`);
        expect(await open(`/trace?id=${recorded?.task_id}`)).toBe(200);
        const step = page.locator(
          `li[data-event-id="${recorded?.event_id}"] > .event > .details [data-group="bookkeeper"]`,
        );
        expect(await seen(step)).toMatch(/^bookkeeper applied/);
      } finally {
        await browser.close();
        await running.close();
        useRoleModules(ROLE_MODULES);
      }
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
