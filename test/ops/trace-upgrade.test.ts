import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { type InboxItem, inboxItem } from "../../functions/adapters/dynamodb/items";
import { type IndexLayout, TABLES } from "../../functions/adapters/dynamodb/layouts";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { DynamoTraceReader } from "../../functions/adapters/dynamodb/trace-reader";
import { eventIdSource } from "../../functions/core/event-ids";
import type { InboxRecord } from "../../functions/core/ports";
import { systemClock } from "../../functions/core/runtime";
import { type TraceIndexUpgrade, traceIndexLayouts } from "../../lib/infra/constructs/tables";
import { fromSdk } from "../../lib/operator/from-sdk";
import { taskTenant } from "../../lib/operator/lists";
import type { OpsStack } from "../../lib/operator/stack";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import {
  feedbackEvent,
  inboxRecordOf,
  newCorrelationId,
  newUlid,
  taskEvent,
} from "../support/factories";
import {
  createTableInput,
  deleteTables,
  LEGACY_EVENTS_LAYOUT,
  LEGACY_INBOX_LAYOUT,
} from "../support/tables";

/**
 * The trace-index upgrade of lib/infra/README.md, step by step on moto: events and inbox tables
 * with the legacy trace indexes and items an older version wrote (every one with `task_id`), then
 * each deploy's one index change per table (as traceIndexLayouts has it), with the new version
 * writing all along; every trace read after each step.
 */

let client: DynamoDBClient;
let tables: TableNames;

type TraceTable = "events" | "inbox";

/** The UpdateTable of a deploy from one index set to the next: one create or one delete. */
async function deploy(
  table: TraceTable,
  from: readonly IndexLayout[],
  to: readonly IndexLayout[],
): Promise<void> {
  const created = to.filter((i) => !from.some((f) => f.name === i.name));
  const deleted = from.filter((f) => !to.some((i) => i.name === f.name));
  // At most one change of a table per deploy; none where a stage leaves this table alone.
  expect(created.length + deleted.length).toBeLessThanOrEqual(1);
  if (created.length + deleted.length === 0) return;
  const [create] = created;
  const definition = create
    ? createTableInput(tables[table], {
        partitionKey: TABLES[table].partitionKey,
        indexes: [create],
      })
    : undefined;
  await client.send(
    new UpdateTableCommand({
      TableName: tables[table],
      ...(definition
        ? {
            AttributeDefinitions: definition.AttributeDefinitions,
            GlobalSecondaryIndexUpdates: [{ Create: definition.GlobalSecondaryIndexes?.[0] }],
          }
        : { GlobalSecondaryIndexUpdates: [{ Delete: { IndexName: deleted[0]?.name } }] }),
    }),
  );
}

/** Both tables' deploys from one stage to the next (undefined: legacy before, current after). */
async function deployBoth(from: TraceIndexUpgrade | "legacy", to?: TraceIndexUpgrade) {
  const before = (table: TraceTable) =>
    from === "legacy"
      ? ((table === "events" ? LEGACY_EVENTS_LAYOUT : LEGACY_INBOX_LAYOUT).indexes ?? [])
      : traceIndexLayouts(table, from);
  for (const table of ["events", "inbox"] as const)
    await deploy(table, before(table), traceIndexLayouts(table, to));
}

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  const prefix = `trace-upgrade-${newUlid().toLowerCase()}`;
  tables = {
    state: `${prefix}-state`,
    events: `${prefix}-events`,
    inbox: `${prefix}-inbox`,
    sideEffects: `${prefix}-side-effects`,
  };
  await client.send(new CreateTableCommand(createTableInput(tables.events, LEGACY_EVENTS_LAYOUT)));
  await client.send(new CreateTableCommand(createTableInput(tables.inbox, LEGACY_INBOX_LAYOUT)));
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

function row(group: string, e: Envelope, outcome: "applied" | "discarded"): InboxRecord {
  const reason = outcome === "discarded" ? "expired" : undefined;
  return inboxRecordOf(group, e, outcome, reason, "2026-12-01T10:00:00.000Z");
}

describe("the trace-index upgrade on moto", () => {
  it("keeps every trace whole at every step, and ends on the current indexes", async () => {
    const task = `task_${newUlid()}`;
    const [c1, c2] = [newCorrelationId(), newCorrelationId()];
    const e1 = taskEvent(1, { taskId: task, correlationId: c1 });
    const e2 = taskEvent(2, { taskId: task, correlationId: c1, causationId: e1.event_id });
    // As the older version wrote them: every event item and row with task_id (a commit without a
    // cause makes its events task roots; the row is put as the old version put it).
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    await store.commit({ append: [e1, e2] });
    const { trace_task_id: _, ...asNow } = inboxItem(row("audit", e1, "discarded"));
    const oldRow: InboxItem = { ...asNow, task_id: task };
    await client.send(new PutItemCommand({ TableName: tables.inbox, Item: marshall(oldRow) }));

    const reader = new DynamoTraceReader({ client: fromSdk(client), tables });
    const ops = { dynamodb: client, names: { tables } } as unknown as OpsStack;
    const written: Envelope[] = [e1, e2];
    const digestIds = eventIdSource(systemClock);
    const rows: string[] = [e1.event_id];
    let at = 3;
    /**
     * The new version at work: one event caused by the last (task root when it moves to c2), with
     * a plain id, or (`digest`) one that carries its correlation's digest, as the hub mints them.
     */
    const consume = async (correlationId: string, digest = false) => {
      const cause = written.at(-1) as Envelope;
      const next = taskEvent(at++, {
        taskId: task,
        correlationId,
        causationId: cause.event_id,
        ...(digest ? { eventId: digestIds.next(correlationId) } : {}),
      });
      await store.commit({
        inbox: row("g", cause, "applied"),
        recordedByState: true,
        append: [next],
      });
      written.push(next);
      // And a discarded message of the task: a row that is a task root.
      const dropped = feedbackEvent({ taskId: task, correlationId });
      await store.commit({ inbox: row("g", dropped, "discarded") });
      rows.push(dropped.event_id);
    };
    const traced = async (step: string) => {
      const ids = (records: readonly { event_id?: string; eventId?: string }[]) =>
        records.map((r) => r.event_id ?? r.eventId).sort();
      const inC = (c: string) => written.filter((e) => e.correlation_id === c);
      expect(await reader.eventsByTask(task), step).toEqual(written);
      expect(await reader.eventsByCorrelation(c1), step).toEqual(inC(c1));
      expect(await reader.eventsByCorrelation(c2), step).toEqual(inC(c2));
      expect(ids(await reader.outcomesByTask(task)), step).toEqual([...rows].sort());
      const byCorrelation = [
        ...(await reader.outcomesByCorrelation(c1)),
        ...(await reader.outcomesByCorrelation(c2)),
      ];
      expect(ids(byCorrelation), step).toEqual([...rows].sort());
      expect(await taskTenant(ops, task), step).toBe("default");
    };

    // The new version runs before its first deploy's index exists: read through the legacy ones.
    await consume(c1);
    await traced("legacy");
    await deployBoth("legacy", 1);
    await consume(c2);
    await traced("stage 1");
    await deployBoth(1, 2);
    await consume(c2);
    await traced("stage 2");
    await deployBoth(2, 3);
    await traced("stage 3");
    await deployBoth(3, 4);
    await consume(c1);
    await traced("stage 4");
    await deployBoth(4, 5);
    await traced("stage 5");
    await deployBoth(5, 6);
    await traced("stage 6");
    await deployBoth(6, 7);
    await traced("stage 7");
    await deployBoth(7);
    await traced("current");
    // Events with digest ids after the upgrade, a task root among them (the move back to c1).
    await consume(c2, true);
    await consume(c1, true);
    await traced("current, digest ids");
    expect(written).toHaveLength(8);
    // Every stored event's correlation by its id: the plain ids through by-event-id, the others
    // through trace-by-digest.
    for (const e of written)
      expect(await reader.correlationOfEvent(e.event_id), e.event_id).toBe(e.correlation_id);
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tables.events }));
    expect(Table?.GlobalSecondaryIndexes?.map((i) => i.IndexName).sort()).toEqual([
      "by-event-id",
      "by-stream-type",
      "digest-task-roots",
      "task-roots",
      "trace-by-correlation",
      "trace-by-digest",
    ]);
  });
});
