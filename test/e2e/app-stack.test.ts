import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { type LocalEnvironment, startLocal } from "../../lib/local";
import { status } from "../../lib/operator/status";
import type { Envelope } from "../../schemas";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";
import { emulator } from "../support/aws";
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
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
