import {
  type AttributeValue,
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { EventIndex, streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { DynamoTraceReader } from "../../functions/adapters/dynamodb/trace-reader";
import { correlationDigest, eventIdSource } from "../../functions/core/event-ids";
import { ManualClock } from "../../functions/core/runtime";
import { fromSdk } from "../../lib/operator/from-sdk";
import { taskTenant } from "../../lib/operator/lists";
import type { OpsStack } from "../../lib/operator/stack";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import {
  inboxRecordOf,
  newCorrelationId,
  newTaskId,
  newUlid,
  taskEvent,
} from "../support/factories";
import { createTableInput, createTables, deleteTables } from "../support/tables";

/**
 * Events whose ids carry their correlation's digest (functions/core/event-ids.ts), as the hub
 * mints them, beside events with plain ids (stored before, or minted elsewhere), in one events
 * table on moto: which indexes each enters, and every trace of both.
 */

let client: DynamoDBClient;
let tables: TableNames;
/** An events table without the digest indexes: a stack that has not deployed them yet. */
let before: TableNames;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  const prefix = `digest-${newUlid().toLowerCase()}`;
  tables = await createTables(client, prefix);
  before = { ...tables, events: `${prefix}-events-before` };
  const digestIndexes: string[] = [EventIndex.traceByDigest, EventIndex.digestTaskRoots];
  const layout = {
    ...TABLES.events,
    indexes: TABLES.events.indexes.filter((i) => !digestIndexes.includes(i.name)),
  };
  await client.send(new CreateTableCommand(createTableInput(before.events, layout)));
});

afterAll(async () => {
  await deleteTables(client, { ...tables, sideEffects: before.events });
  await deleteTables(client, tables);
  client.destroy();
});

const ids = eventIdSource(new ManualClock("2026-12-06T05:00:00.000Z"));

async function itemOf(table: string, e: Envelope): Promise<Record<string, unknown>> {
  const key: Record<string, AttributeValue> = marshall({
    pk: streamKey(e.aggregate),
    version: e.aggregate.version,
  });
  const { Item } = await client.send(
    new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
  );
  return unmarshall(Item ?? {});
}

const byId = (events: readonly Envelope[]) =>
  [...events].sort((a, b) => (a.event_id < b.event_id ? -1 : 1));

/**
 * One task's stream: a run of two events in c1 and one in c2 with digest ids, then a run of two
 * in c1 with plain ids; each commit caused by the stream's last event of its correlation.
 */
async function storeStream(names: TableNames) {
  const store = new DynamoEventStore({ client: fromSdk(client), tables: names });
  const taskId = newTaskId();
  const [c1, c2] = [newCorrelationId(), newCorrelationId()];
  const stream = { type: "task", id: taskId };
  const stored: Envelope[] = [];
  const append = async (correlations: readonly string[], digest: boolean) => {
    const { state } = await store.load({ state: stream });
    const cause = stored.findLast((e) => e.correlation_id === correlations[0]);
    const events = correlations.map((correlationId, i) =>
      taskEvent(stored.length + i + 1, {
        taskId,
        correlationId,
        eventId: digest ? ids.next(correlationId) : newUlid(),
      }),
    );
    await store.commit({
      ...(cause ? { inbox: inboxRecordOf("digest", cause), recordedByState: true as const } : {}),
      state: {
        aggregate: stream,
        expectedRevision: state?.revision ?? 0,
        next: { n: stored.length + events.length },
        version: stored.length + events.length,
        ...(state?.streamHead ? { streamHead: state.streamHead } : {}),
      },
      append: events,
    });
    stored.push(...events);
  };
  await append([c1, c1], true); // 1 a root, 2 follows it
  await append([c2], true); // 3 a root of c2
  await append([c1, c1], false); // 4 starts a run of c1 (after c2), 5 follows it
  return { store, taskId, c1, c2, stored };
}

describe("the trace of events whose ids carry their correlation's digest", () => {
  it("keeps a digest id in stored_id, out of the by-id indexes, and the digest on the events the trace index holds", async () => {
    const { stored } = await storeStream(tables);
    const [e1, e2, e3, e4, e5] = stored as [Envelope, Envelope, Envelope, Envelope, Envelope];
    const item1 = await itemOf(tables.events, e1);
    expect(item1).toMatchObject({
      stored_id: e1.event_id,
      trace_digest: correlationDigest(e1.correlation_id),
      correlation_id: e1.correlation_id,
      task_id: e1.task_id,
    });
    expect(item1.event_id).toBeUndefined();
    // In its run, not a root: no key of any trace index.
    const item2 = await itemOf(tables.events, e2);
    expect(item2).toMatchObject({
      stored_id: e2.event_id,
      trace_correlation_id: e2.correlation_id,
    });
    expect([item2.event_id, item2.trace_digest, item2.correlation_id]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
    expect(await itemOf(tables.events, e3)).toMatchObject({
      stored_id: e3.event_id,
      trace_digest: correlationDigest(e3.correlation_id),
    });
    // Plain ids: event_id, as before.
    for (const e of [e4, e5]) {
      const item = await itemOf(tables.events, e);
      expect(item).toMatchObject({ event_id: e.event_id });
      expect([item.stored_id, item.trace_digest]).toEqual([undefined, undefined]);
    }
  });

  it("traces by correlation, task and id through both kinds of ids", async () => {
    const { store, taskId, c1, c2, stored } = await storeStream(tables);
    const of = (c: string) => stored.filter((e) => e.correlation_id === c);
    expect(await store.eventsByCorrelation(c1)).toEqual(byId(of(c1)));
    expect(await store.eventsByCorrelation(c2)).toEqual(byId(of(c2)));
    expect(await store.eventsByTask(taskId)).toEqual(byId(stored));
    // A digest id through trace-by-digest (a run's first event or not), a plain one by-event-id.
    for (const e of stored)
      expect(await store.correlationOfEvent(e.event_id)).toBe(e.correlation_id);
    // The operator's tenant of a task, from its first root (here one with a digest id).
    const ops = { dynamodb: client, names: { tables } } as unknown as OpsStack;
    expect(await taskTenant(ops, taskId)).toBe("default");
    expect(await taskTenant(ops, newTaskId())).toBeUndefined();
  });

  it("names no correlation for an id that only carries a stored correlation's digest", async () => {
    const { store, c1 } = await storeStream(tables);
    const lookalike = eventIdSource(new ManualClock("2026-12-07T00:00:00.000Z")).next(c1);
    expect(await store.correlationOfEvent(lookalike)).toBeUndefined();
    expect(await store.correlationOfEvent(newUlid())).toBeUndefined();
  });

  it("reads a table that does not have the digest indexes yet through the others", async () => {
    const { taskId, c1, stored } = await storeStream(before);
    const reader = new DynamoTraceReader({ client: fromSdk(client), tables: before });
    const plain = stored.filter((e) => e.aggregate.version >= 4);
    // The events with plain ids are read whole; those with digest ids once the indexes exist.
    expect(await reader.eventsByCorrelation(c1)).toEqual(byId(plain));
    // The task's roots (1 and 3) have digest ids: its correlations are found once
    // digest-task-roots exists (lib/infra/README.md: the last deploy of the upgrade).
    expect(await reader.eventsByTask(taskId)).toEqual([]);
    for (const e of plain) expect(await reader.correlationOfEvent(e.event_id)).toBe(c1);
    expect(await reader.correlationOfEvent((stored[0] as Envelope).event_id)).toBeUndefined();
  });
});
