import { strict as assert } from "node:assert";
import { test } from "node:test";
import { type EventPayloads, payloadOf } from "agentbus";
import { testRole } from "agentbus/testing";
import { bookkeeperModule } from "./bookkeeper.js";
import { MemoryLedger } from "./ledger.js";

const task = {
  aggregate: { type: "order", id: "ord_A-1001" },
  taskId: "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y",
};
const refund = {
  order_id: "A-1001",
  conversation_id: "conv_1",
  amount_cents: 8900,
  refund_id: "rf_1",
};

test("one ledger entry per refund, however often the refund is delivered", async () => {
  const book = new MemoryLedger();
  const t = testRole(bookkeeperModule, { integrations: { ledger: book } });
  const [approved] = await t.append(task, { type: "refund.approved", payload: refund });
  assert.ok(approved);
  assert.equal((await t.deliver(approved)).status, "applied");
  assert.equal((await t.deliver(approved, { receiveCount: 2 })).status, "duplicate");
  assert.deepEqual([...book.entries.keys()], ["rf_1"]);
  // The application's own event type, once: typed by its augmentation of EventPayloads.
  assert.deepEqual(
    t.emitted.map((e) => e.event_type),
    ["ledger.entry_recorded"],
  );
  const [recorded] = t.emitted;
  assert.ok(recorded);
  const entry: EventPayloads["ledger.entry_recorded"] = payloadOf(
    recorded,
    "ledger.entry_recorded",
  );
  assert.deepEqual(entry, {
    order_id: "A-1001",
    refund_id: "rf_1",
    entry_id: "rf_1",
    amount_cents: 8900,
  });
  assert.deepEqual(await t.state({ type: "ledger_book", id: "book_A-1001" }), { entries: 1 });
});

test("the role is built on the ledger's twin when the test gives none", async () => {
  const t = testRole(bookkeeperModule);
  const [approved] = await t.append(task, { type: "refund.approved", payload: refund });
  assert.ok(approved);
  assert.equal((await t.deliver(approved)).status, "applied");
});
