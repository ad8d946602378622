import {
  type AttributeValue,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  InternalServerError,
  type KeysAndAttributes,
  ProvisionedThroughputExceededException,
  PutItemCommand,
  TransactionCanceledException,
} from "@aws-sdk/client-dynamodb";
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from "@aws-sdk/client-dynamodb-streams";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { checkpointItem } from "../../functions/adapters/dynamodb/items";
import { envelopesFromStreamRecords } from "../../functions/adapters/dynamodb/stream";
import {
  checkpointKey,
  inboxKey,
  streamKey,
  type TableNames,
} from "../../functions/adapters/dynamodb/tables";
import {
  type AgentBusError,
  DuplicateCommitError,
  PermanentError,
  TransientError,
} from "../../functions/core/errors";
import type { InboxRecord } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { meter } from "../../lib/dev/metering/metering";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { AggregateRef, Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import {
  feedbackEvent,
  inboxRecordOf,
  newCorrelationId,
  newTaskId,
  newUlid,
  taskEvent,
  taskStream,
} from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

let client: DynamoDBClient;
let tables: TableNames;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  tables = await createTables(client, `ddb-${newUlid().toLowerCase()}`);
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

const refOf = (e: Envelope): AggregateRef => ({ type: e.aggregate.type, id: e.aggregate.id });

/** A client of its own, so that metering or fault injection does not leak into other tests. */
function ownClient(): DynamoDBClient {
  return new DynamoDBClient({ ...emulator(), maxAttempts: 1 });
}

type Handler = (input: Record<string, unknown>, pass: () => Promise<unknown>) => Promise<unknown>;

/** Intercept one operation above the SDK's retry layer (so injected faults are not retried). */
function intercept(target: DynamoDBClient, operation: string, handler: Handler): void {
  target.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== `${operation}Command`) return next(args);
      const output = await handler(args.input as Record<string, unknown>, async () => {
        return (await next(args)).output;
      });
      return { output, response: {} } as Awaited<ReturnType<typeof next>>;
    },
    { step: "initialize", name: `intercept-${operation}`, override: true },
  );
}

async function failureOf(promise: Promise<unknown>): Promise<AgentBusError> {
  try {
    await promise;
  } catch (error) {
    return error as AgentBusError;
  }
  throw new Error("expected the call to fail");
}

function inboxRecord(group: string, event: Envelope, expiresAt: number): InboxRecord {
  return {
    group,
    eventId: event.event_id,
    eventType: event.event_type,
    outcome: "applied",
    aggregate: refOf(event),
    version: event.aggregate.version,
    correlationId: event.correlation_id,
    taskId: event.task_id,
    producer: event.producer,
    occurredAt: event.occurred_at,
    recordedAt: "2026-03-01T12:00:00.000Z",
    expiresAt,
  };
}

async function rawItem(table: string, key: Record<string, AttributeValue>) {
  const { Item } = await client.send(
    new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true }),
  );
  return Item;
}

/** An event's item as stored (a consistent read by its stream key and version). */
function storedEvent(e: Envelope) {
  return rawItem(
    tables.events,
    marshall({ pk: streamKey(e.aggregate), version: e.aggregate.version }),
  );
}

describe("DynamoEventStore on DynamoDB", () => {
  it("stores the documented table layout", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const [e1, e2] = taskStream(1, 2) as [Envelope, Envelope];
    const stream = refOf(e1);
    await store.commit({
      inbox: inboxRecord("layout", e1, 1_900_000_000),
      checkpoint: { group: "layout", stream, from: 0, to: 1 },
      state: {
        aggregate: stream,
        expectedRevision: 0,
        next: { status: "accepted" },
        version: 2,
        gate: { checkpoints: { "conversation#c_1": 3 }, recent: { [e1.event_id]: 1_900_000_000 } },
      },
      append: [e1, e2],
    });
    const state = await rawItem(tables.state, { pk: { S: streamKey(stream) } });
    expect(state).toMatchObject({
      pk: { S: `task#${stream.id}` },
      revision: { N: "1" },
      version: { N: "2" },
      data: { M: { status: { S: "accepted" } } },
      agg_type: { S: "task" },
      agg_id: { S: stream.id },
      gate_checkpoints: { M: { "conversation#c_1": { N: "3" } } },
      gate_recent: { M: { [e1.event_id]: { N: "1900000000" } } },
      // The correlation of the stream's event at `version`: whether the next append starts a run.
      stream_correlation: { S: e2.correlation_id },
      stream_task: { S: e2.task_id },
    });
    expect(Number.isNaN(Date.parse(state?.updated_at?.S ?? ""))).toBe(false);

    const event = await rawItem(tables.events, {
      pk: { S: streamKey(stream) },
      version: { N: "2" },
    });
    expect(unmarshall(event ?? {})).toEqual({
      pk: `task#${stream.id}`,
      version: 2,
      event_id: e2.event_id,
      event_type: e2.event_type,
      schema_version: e2.schema_version,
      // The event before it in its stream has its correlation: not the first of a run, in no
      // trace index (a trace reads it with its run).
      trace_correlation_id: e2.correlation_id,
      // Recorded with a stored event of its task and correlation: not a task root.
      trace_task_id: e2.task_id,
      occurred_at: e2.occurred_at,
      envelope: JSON.stringify(e2),
      // The bus the relay publishes it to, as the committing function's registry has its type.
      topic: "events",
    });

    const inbox = await rawItem(tables.inbox, { pk: { S: inboxKey("layout", e1.event_id) } });
    expect(inbox?.ttl).toEqual({ N: "1900000000" });
    expect(unmarshall(inbox ?? {})).toEqual({
      pk: `inbox#layout#${e1.event_id}`,
      group: "layout",
      event_id: e1.event_id,
      event_type: e1.event_type,
      outcome: "applied",
      agg_type: "task",
      agg_id: stream.id,
      version: 1,
      correlation_id: e1.correlation_id,
      // The row of a stored event: not a task root.
      trace_task_id: e1.task_id,
      ...(e1.causation_id ? { causation_id: e1.causation_id } : {}),
      producer: e1.producer,
      occurred_at: e1.occurred_at,
      recorded_at: "2026-03-01T12:00:00.000Z",
      ttl: 1_900_000_000,
    });

    const checkpoint = await rawItem(tables.inbox, { pk: { S: checkpointKey("layout", stream) } });
    expect(unmarshall(checkpoint ?? {})).toEqual({
      pk: `checkpoint#layout#task#${stream.id}`,
      version: 1,
    });
  });

  it("indexes the first event of each run of one correlation, and a trace reads the runs whole", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const taskId = newTaskId();
    const [c1, c2] = [newCorrelationId(), newCorrelationId()];
    const stream: AggregateRef = { type: "task", id: taskId };
    const stored: Envelope[] = [];
    // Each commit appends to the stream as its aggregate's state does, caused by the stream's
    // last event of the same correlation when there is one (then the events are not task roots).
    const append = async (correlations: string[], carry = true) => {
      const { state } = await store.load({ state: stream });
      const cause = stored.findLast((e) => e.correlation_id === correlations[0]);
      const events = correlations.map((correlationId, i) =>
        taskEvent(stored.length + i + 1, { taskId, correlationId }),
      );
      await store.commit({
        ...(cause ? { inbox: inboxRecordOf("runs", cause), recordedByState: true as const } : {}),
        state: {
          aggregate: stream,
          expectedRevision: state?.revision ?? 0,
          next: { n: stored.length + events.length },
          version: stored.length + events.length,
          ...(carry && state?.streamHead ? { streamHead: state.streamHead } : {}),
        },
        append: events,
      });
      stored.push(...events);
    };
    await append([c1, c1]); // 1: a root (no cause); 2 follows it in the same task and correlation
    await append([c2]); // 3: a root (no stored cause of c2 yet)
    await append([c2, c1]); // 4 continues 3's run; 5 starts one
    await append([c1], false); // 6: the head was not carried over, so it starts one
    await append(Array.from({ length: 30 }, () => c1)); // 7-36: one run, longer than a page
    await append([c2]); // 37 starts one
    const other = taskStream(1, 2, { correlationId: c1 });
    await store.commit({ append: other });

    const indexed: number[] = [];
    for (const e of stored) {
      const item = await storedEvent(e);
      if (item?.correlation_id) indexed.push(e.aggregate.version);
      else expect(item?.trace_correlation_id?.S).toBe(e.correlation_id);
    }
    expect(indexed).toEqual([1, 3, 5, 6, 37]);
    const byId = (events: Envelope[]) =>
      [...events].sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
    const of = (c: string) => stored.filter((e) => e.correlation_id === c);
    expect(await store.eventsByCorrelation(c1)).toEqual(byId([...of(c1), ...other]));
    expect(await store.eventsByCorrelation(c2)).toEqual(byId(of(c2)));
    expect(await store.eventsByTask(taskId)).toEqual(byId(stored));
    const state = await rawItem(tables.state, { pk: { S: streamKey(stream) } });
    expect(state?.stream_correlation).toEqual({ S: c2 });
  });

  it("makes an event a task root only where neither its cause nor its stream's last event has its task and correlation", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const [t1, t2] = [newTaskId(), newTaskId()];
    const correlationId = newCorrelationId();
    const stream: AggregateRef = { type: "task", id: newTaskId() };
    const stored: Envelope[] = [];
    // A commit handling an unsequenced message (a client's, not stored) of `taskId`.
    const handle = async (taskId: string, n = 1) => {
      const { state } = await store.load({ state: stream });
      const message = feedbackEvent({ taskId, correlationId });
      const events = Array.from({ length: n }, (_, i) =>
        taskEvent(stored.length + i + 1, { taskId, correlationId, causationId: message.event_id }),
      ).map((e) => ({ ...e, aggregate: { ...stream, version: e.aggregate.version } }));
      await store.commit({
        inbox: inboxRecordOf("roots", message),
        state: {
          aggregate: stream,
          expectedRevision: state?.revision ?? 0,
          next: { n: stored.length + n },
          version: stored.length + n,
          ...(state?.streamHead ? { streamHead: state.streamHead } : {}),
        },
        append: events,
      });
      stored.push(...events);
    };
    await handle(t1, 2); // 1: a root; 2 follows it
    await handle(t1); // 3: its cause is not stored, but the stream's last event is of t1
    await handle(t2); // 4: t2 is new to the stream: a root
    await handle(t1); // 5: the stream's last event is of t2: a root again
    const roots: number[] = [];
    for (const e of stored) {
      const item = await storedEvent(e);
      if (item?.task_id) roots.push(e.aggregate.version);
    }
    expect(roots).toEqual([1, 4, 5]);
    const byId = (events: Envelope[]) =>
      [...events].sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
    expect(await store.eventsByTask(t1)).toEqual(byId(stored.filter((e) => e.task_id === t1)));
    expect(await store.eventsByTask(t2)).toEqual(byId(stored.filter((e) => e.task_id === t2)));
  });

  it("reads events stored before runs, each in the trace index, with the runs after them", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const correlationId = newCorrelationId();
    const old = taskStream(1, 3, { correlationId });
    const stream = refOf(old[0] as Envelope);
    // As the version before runs wrote them: every event with its correlation_id.
    for (const e of old)
      await client.send(
        new PutItemCommand({
          TableName: tables.events,
          Item: marshall({
            pk: streamKey(stream),
            version: e.aggregate.version,
            event_id: e.event_id,
            event_type: e.event_type,
            schema_version: e.schema_version,
            correlation_id: e.correlation_id,
            task_id: e.task_id,
            occurred_at: e.occurred_at,
            envelope: JSON.stringify(e),
          }),
        }),
      );
    const later = [4, 5].map((v) =>
      taskEvent(v, { taskId: stream.id, correlationId, causationId: old[2]?.event_id ?? null }),
    );
    await store.commit({
      inbox: { ...inboxRecordOf("runs", old[2] as Envelope) },
      recordedByState: true,
      append: later,
    });
    expect(await store.eventsByCorrelation(correlationId)).toEqual([...old, ...later]);
  });

  it("gives an item of unsequenced ids alone the time to live of the last, and takes it off again", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const view = { type: "task_view", id: `task_${newUlid()}` };
    const key = { pk: { S: streamKey(view) } };
    const recent = { [newUlid()]: 1_900_000_000 };
    await store.commit({
      gate: {
        aggregate: view,
        expectedRevision: 0,
        records: { checkpoints: {}, recent },
        expiresAt: 1_900_000_000,
      },
    });
    expect((await rawItem(tables.state, key))?.ttl).toEqual({ N: "1900000000" });
    // A checkpoint makes the item one to keep: the next gate write takes the time to live off.
    await store.commit({
      gate: {
        aggregate: view,
        expectedRevision: 1,
        records: { checkpoints: { [`task#${view.id}`]: 1 }, recent },
      },
    });
    const kept = await rawItem(tables.state, key);
    expect(kept?.ttl).toBeUndefined();
    expect(kept?.revision).toEqual({ N: "2" });
  });

  it("keeps many checkpoints deflated in one attribute, by Put and by gate write, and reads them back", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const view = { type: "conversation_view", id: `conv_${newUlid()}` };
    const key = { pk: { S: streamKey(view) } };
    const many = (v: number) => ({
      checkpoints: Object.fromEntries(
        Array.from({ length: 40 }, () => `task_${newUlid()}`).flatMap((task) =>
          ["reply", "delivery"].map((type) => [`${type}#${task}`, v]),
        ),
      ),
      recent: {},
    });
    const request = { state: view };
    const large = many(1);
    await store.commit({
      state: { aggregate: view, expectedRevision: 0, next: { n: 1 }, version: 0, gate: large },
    });
    const put = await rawItem(tables.state, key);
    expect(put?.gate_z?.B).toBeDefined();
    expect(put?.gate_checkpoints).toBeUndefined();
    expect((await store.load(request)).state?.gate?.checkpoints).toEqual(large.checkpoints);
    // A gate write of few records stores them as maps again, and the deflated copy goes.
    const few = { checkpoints: { [`conversation#${view.id}`]: 3 }, recent: {} };
    await store.commit({ gate: { aggregate: view, expectedRevision: 1, records: few } });
    const small = await rawItem(tables.state, key);
    expect(small?.gate_z).toBeUndefined();
    expect(small?.gate_checkpoints).toEqual({ M: { [`conversation#${view.id}`]: { N: "3" } } });
    // And many again by a gate write: deflated, the maps gone, the data kept.
    const again = many(2);
    await store.commit({ gate: { aggregate: view, expectedRevision: 2, records: again } });
    const updated = await rawItem(tables.state, key);
    expect(updated?.gate_checkpoints).toBeUndefined();
    expect(updated?.gate_recent).toBeUndefined();
    expect(await store.load(request)).toMatchObject({
      state: { data: { n: 1 }, gate: { checkpoints: again.checkpoints, recent: {} } },
    });
  });

  it("loads the state item with one GetItem; commits one item without a transaction", async () => {
    const own = ownClient();
    const metered = meter(own);
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const [e1, e2] = taskStream(1, 2) as [Envelope, Envelope];
    const stream = refOf(e1);
    const view = { type: "task_view", id: stream.id };
    const at = (v: number) => ({ checkpoints: { [streamKey(stream)]: v }, recent: {} });
    const request = { checkpoint: { group: "meter", stream }, state: view };
    expect((await store.load(request)).checkpoint).toBe(0);
    // Applied, nothing emitted: the state with its records, one conditional PutItem.
    await store.commit({
      state: { aggregate: view, expectedRevision: 0, next: { n: 1 }, version: 0, gate: at(1) },
    });
    expect((await store.load(request)).checkpoint).toBe(1);
    // Nothing to change but the checkpoint: one UpdateItem that keeps the data.
    await store.commit({ gate: { aggregate: view, expectedRevision: 1, records: at(2) } });
    expect(await store.load(request)).toMatchObject({ checkpoint: 2, state: { data: { n: 1 } } });
    // Emitting: one transaction of the state and the events.
    await store.commit({
      state: { aggregate: view, expectedRevision: 2, next: { n: 2 }, version: 2, gate: at(2) },
      append: [
        { ...e1, aggregate: { ...e1.aggregate, type: "task_view", id: view.id } },
        { ...e2, aggregate: { ...e2.aggregate, type: "task_view", id: view.id } },
      ],
    });
    expect(metered.snapshot().calls).toEqual({
      GetItem: 3,
      PutItem: 1,
      UpdateItem: 1,
      TransactWriteItems: 1,
    });
    own.destroy();
  });

  it("reads the inbox row and the legacy checkpoint row only when asked, in one BatchGetItem", async () => {
    const own = ownClient();
    const metered = meter(own);
    const [e1] = taskStream(1, 1) as [Envelope];
    const stream = refOf(e1);
    // Rows as a stack kept them before checkpoints moved onto the state items.
    await client.send(
      new PutItemCommand({
        TableName: tables.inbox,
        Item: marshall(checkpointItem("legacy", stream, 5)),
      }),
    );
    await new DynamoEventStore({ client: fromSdk(client), tables }).commit({
      inbox: inboxRecord("legacy", e1, 1_900_000_000),
    });
    const ask = {
      inbox: { group: "legacy", eventId: e1.event_id },
      checkpoint: { group: "legacy", stream },
      state: stream,
    };
    expect(await new DynamoEventStore({ client: fromSdk(own), tables }).load(ask)).toMatchObject({
      inboxHit: false,
      checkpoint: 0,
    });
    const upgrading = new DynamoEventStore({
      client: fromSdk(own),
      tables,
      legacyCheckpoints: true,
    });
    expect(await upgrading.load(ask)).toMatchObject({ inboxHit: true, checkpoint: 5 });
    expect(metered.snapshot().calls).toEqual({ GetItem: 1, BatchGetItem: 1 });
    own.destroy();
  });

  it("writes a one-action commit with PutItem and maps its failed condition", async () => {
    const own = ownClient();
    const metered = meter(own);
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const event = taskEvent(1);
    const row = inboxRecord("single", event, 1_900_000_000);
    await store.commit({ inbox: row });
    const error = await failureOf(store.commit({ inbox: row }));
    expect(error).toBeInstanceOf(DuplicateCommitError);
    const stream = refOf(event);
    await store.commit({ state: { aggregate: stream, expectedRevision: 0, next: 1, version: 0 } });
    expect(
      (
        await failureOf(
          store.commit({ state: { aggregate: stream, expectedRevision: 0, next: 2, version: 0 } }),
        )
      ).message,
    ).toBe(`task#${stream.id} is at revision 1, expected 0`);
    expect(metered.snapshot().calls).toEqual({ PutItem: 4 });
    own.destroy();
  });

  it("retries UnprocessedKeys of BatchGetItem until every key is read", async () => {
    const own = ownClient();
    const metered = meter(own);
    let deferred = false;
    intercept(own, "BatchGetItem", async (input, pass) => {
      if (deferred) return pass();
      // First round: hand back the inbox table's keys as unprocessed, like DynamoDB under load.
      deferred = true;
      const items = input.RequestItems as Record<string, KeysAndAttributes>;
      const held = items[tables.inbox];
      delete items[tables.inbox];
      const output = (await pass()) as Record<string, unknown>;
      return { ...output, UnprocessedKeys: held ? { [tables.inbox]: held } : {} };
    });
    const store = new DynamoEventStore({ client: fromSdk(own), tables, wait: async () => {} });
    const [e1] = taskStream(1, 1) as [Envelope];
    const stream = refOf(e1);
    await store.commit({
      inbox: inboxRecord("unprocessed", e1, 1_900_000_000),
      checkpoint: { group: "unprocessed", stream, from: 0, to: 1 },
      state: { aggregate: stream, expectedRevision: 0, next: { ok: true }, version: 1 },
      append: [e1],
    });
    const loaded = await store.load({
      inbox: { group: "unprocessed", eventId: e1.event_id, row: true },
      checkpoint: { group: "unprocessed", stream, row: true },
      state: stream,
    });
    expect(loaded).toMatchObject({ inboxHit: true, checkpoint: 1, state: { data: { ok: true } } });
    expect(metered.snapshot().calls.BatchGetItem).toBe(2);
    own.destroy();
  });

  it("gives up on keys that stay unprocessed with a TransientError", async () => {
    const own = ownClient();
    intercept(own, "BatchGetItem", async (input) => ({
      Responses: {},
      UnprocessedKeys: input.RequestItems,
    }));
    const store = new DynamoEventStore({
      client: fromSdk(own),
      tables,
      maxBatchGetAttempts: 3,
      wait: async () => {},
    });
    const error = await failureOf(
      store.load({
        inbox: { group: "g", eventId: newUlid(), row: true },
        state: { type: "task", id: "task_x" },
      }),
    );
    expect(error).toBeInstanceOf(TransientError);
    expect(error.code).toBe("dynamodb.unprocessed_keys");
    own.destroy();
  });

  it("reads every page of a stream and of a correlation", async () => {
    const own = ownClient();
    const metered = meter(own);
    intercept(own, "Query", async (input, pass) => {
      input.Limit = 2;
      return pass();
    });
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const correlationId = newCorrelationId();
    const events = taskStream(1, 5, { correlationId });
    await store.commit({ append: events });
    const stream = refOf(events[0] as Envelope);
    expect(await store.readStream(stream, 1, 5)).toEqual(events);
    expect(await store.eventsByCorrelation(correlationId)).toEqual(events);
    expect(await store.eventsByTask(stream.id)).toEqual(events);
    expect(metered.snapshot().calls.Query).toBeGreaterThanOrEqual(9);
    own.destroy();
  });

  it("finds a task's events and outcomes through its roots, across its correlations", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const [c1, c2] = [newCorrelationId(), newCorrelationId()];
    const taskId = `task_${newUlid()}`;
    const other = `task_${newUlid()}`;
    const message = feedbackEvent({ taskId, correlationId: c1 });
    const e1 = taskEvent(1, { taskId, correlationId: c1, causationId: message.event_id });
    const e2 = taskEvent(2, { taskId, correlationId: c1, causationId: e1.event_id });
    const e3 = taskEvent(3, { taskId, correlationId: c2, causationId: e2.event_id });
    const e4 = { ...taskEvent(1, { taskId: other, correlationId: c2 }), causation_id: e3.event_id };
    // Each commit records the event it handled (applied: the state records it, no row is written).
    const handled = (e: Envelope) => inboxRecord("roots", e, 1_900_000_000);
    await store.commit({ inbox: handled(message), recordedByState: true, append: [e1] });
    await store.commit({ inbox: handled(e1), recordedByState: true, append: [e2] });
    await store.commit({ inbox: handled(e2), recordedByState: true, append: [e3] });
    await store.commit({ inbox: handled(e3), recordedByState: true, append: [e4] });
    const task = async (e: Envelope) =>
      unmarshall(
        (await rawItem(tables.events, {
          pk: { S: streamKey(e.aggregate) },
          version: { N: String(e.aggregate.version) },
        })) ?? {},
      );
    // Roots: caused by an unstored message, by another correlation's event, by another task's.
    expect((await task(e1)).task_id).toBe(taskId);
    expect((await task(e2)).task_id).toBeUndefined();
    expect((await task(e2)).trace_task_id).toBe(taskId);
    expect((await task(e3)).task_id).toBe(taskId);
    expect((await task(e4)).task_id).toBe(other);

    expect(await store.eventsByTask(taskId)).toEqual([e1, e2, e3]);
    expect(await store.eventsByTask(other)).toEqual([e4]);
    expect(await store.eventsByCorrelation(c2)).toEqual([e3, e4]);

    // Rows: a discarded unstored message (a root itself), and a stored event's (found by its root).
    const dropped = { ...handled(message), outcome: "discarded" as const, reason: "expired" };
    const seen = { ...handled(e3), group: "roots-2" };
    await store.commit({ inbox: dropped });
    await store.commit({ inbox: seen });
    const rows = (records: readonly { eventId: string }[]) => records.map((r) => r.eventId);
    expect(rows(await store.outcomesByTask(taskId)).sort()).toEqual(
      [message.event_id, e3.event_id].sort(),
    );
    expect(rows(await store.outcomesByTask(other))).toEqual([]);
    expect(rows(await store.outcomesByCorrelation(c2))).toEqual([e3.event_id]);
  });

  it("refuses a commit of more than 100 actions without calling DynamoDB", async () => {
    const own = ownClient();
    const metered = meter(own);
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const error = await failureOf(store.commit({ append: taskStream(1, 101) }));
    expect(error).toBeInstanceOf(PermanentError);
    expect(error.code).toBe("dynamodb.transaction_too_large");
    expect(metered.snapshot().calls).toEqual({});
    own.destroy();
  });

  it("maps a transaction DynamoDB rejects as invalid to a PermanentError", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const taskId = `task_${newUlid()}`;
    // Two actions on one item: DynamoDB answers ValidationException.
    const error = await failureOf(
      store.commit({ append: [taskEvent(1, { taskId }), taskEvent(1, { taskId })] }),
    );
    expect(error).toBeInstanceOf(PermanentError);
    expect(error.code).toBe("dynamodb.validation");
  });

  // Actions of the commit below, by index: [inbox, stream].
  it.each([
    [["None", "TransactionConflict"], "transient", "dynamodb.transaction_conflict"],
    [["ThrottlingError", "None"], "transient", "dynamodb.throttled"],
    [["None", "ProvisionedThroughputExceeded"], "transient", "dynamodb.throttled"],
    [["ValidationError", "None"], "permanent", "dynamodb.validation"],
    [["TransactionConflict", "ConditionalCheckFailed"], "transient", "commit.stream_conflict"],
    [["ConditionalCheckFailed", "ConditionalCheckFailed"], "transient", "commit.duplicate"],
  ] as const)("maps cancellation reasons %j", async (codes, errorClass, code) => {
    const own = ownClient();
    intercept(own, "TransactWriteItems", async () => {
      throw new TransactionCanceledException({
        message: "Transaction cancelled",
        $metadata: { httpStatusCode: 400 },
        CancellationReasons: codes.map((Code) => ({ Code })),
      });
    });
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const event = taskEvent(1);
    const error = await failureOf(
      store.commit({ inbox: inboxRecord("reasons", event, 1_900_000_000), append: [event] }),
    );
    expect(error).toMatchObject({ code, errorClass });
    own.destroy();
  });

  it("maps whole-call throttling, outages and missing tables", async () => {
    const own = ownClient();
    let fault: Error = new ProvisionedThroughputExceededException({
      message: "slow down",
      $metadata: { httpStatusCode: 400 },
    });
    intercept(own, "TransactWriteItems", async () => {
      throw fault;
    });
    const store = new DynamoEventStore({ client: fromSdk(own), tables });
    const commit = () => store.commit({ append: taskStream(1, 2) });
    expect(await failureOf(commit())).toMatchObject({
      code: "dynamodb.throttled",
      errorClass: "transient",
    });
    fault = new InternalServerError({ message: "boom", $metadata: { httpStatusCode: 500 } });
    expect(await failureOf(commit())).toMatchObject({
      code: "dynamodb.unavailable",
      errorClass: "transient",
    });
    own.destroy();

    const missing = new DynamoEventStore({
      client: fromSdk(client),
      tables: { state: "no-such-state", events: "no-such-events", inbox: "no-such-inbox" },
    });
    expect(await failureOf(missing.load({ state: { type: "task", id: "task_x" } }))).toMatchObject({
      code: "dynamodb.resource_not_found",
      errorClass: "permanent",
    });
  });

  it("ignores an expired inbox row that TTL has not deleted yet", async () => {
    const clock = new ManualClock("2026-03-01T12:00:00.000Z");
    const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
    const event = taskEvent(1);
    const expiresAt = Date.parse("2026-03-01T11:00:00.000Z") / 1000;
    // Written by an earlier clock: already expired for this store.
    await new DynamoEventStore({
      client: fromSdk(client),
      tables,
      clock: new ManualClock("2026-03-01T10:00:00.000Z"),
    }).commit({ inbox: inboxRecord("ttl", event, expiresAt) });
    expect(
      await rawItem(tables.inbox, { pk: { S: inboxKey("ttl", event.event_id) } }),
    ).toBeDefined();
    const loaded = await store.load({
      inbox: { group: "ttl", eventId: event.event_id, row: true },
      state: refOf(event),
    });
    expect(loaded.inboxHit).toBe(false);
    await store.commit({ inbox: inboxRecord("ttl", event, expiresAt + 7200) });
    expect(
      (
        await store.load({
          inbox: { group: "ttl", eventId: event.event_id, row: true },
          state: refOf(event),
        })
      ).inboxHit,
    ).toBe(true);
  });

  it("feeds the events table's stream through envelopesFromStreamRecords in commit order", async () => {
    const store = new DynamoEventStore({ client: fromSdk(client), tables });
    const correlationId = newCorrelationId();
    const first = taskStream(1, 3, { correlationId });
    const second = taskStream(1, 2, { correlationId });
    await store.commit({ append: first });
    await store.commit({ append: second });
    await store.commit({ append: taskStream(4, 5, { taskId: first[0]?.task_id, correlationId }) });

    const records = await readWholeStream(tables.events);
    const { envelopes, skipped, ignored } = envelopesFromStreamRecords(records);
    expect(skipped).toEqual([]);
    expect(ignored).toBe(0);
    const ours = envelopes.filter((e) => e.correlation_id === correlationId);
    expect(ours.slice(0, 5)).toEqual([...first, ...second]);
    // Per stream, versions arrive in order.
    const versions = ours
      .filter((e) => e.aggregate.id === first[0]?.aggregate.id)
      .map((e) => e.aggregate.version);
    expect(versions).toEqual([1, 2, 3, 4, 5]);
  });

  it("skips stream records that carry no envelope and ignores modifications", () => {
    const envelope = taskEvent(1);
    const insert = (image: DynamoDBRecord["dynamodb"], eventID: string): DynamoDBRecord => ({
      eventID,
      eventName: "INSERT",
      dynamodb: image,
    });
    const { envelopes, skipped, ignored } = envelopesFromStreamRecords([
      insert({ NewImage: { envelope: { S: JSON.stringify(envelope) } }, SequenceNumber: "1" }, "a"),
      insert({ NewImage: { pk: { S: "x" } }, SequenceNumber: "2" }, "b"),
      insert({ NewImage: { envelope: { S: "{not json" } }, SequenceNumber: "3" }, "c"),
      insert({ SequenceNumber: "4" }, "d"),
      { eventID: "e", eventName: "REMOVE", dynamodb: { Keys: { pk: { S: "x" } } } },
      insert(
        {
          NewImage: {
            envelope: { S: JSON.stringify(envelope) },
            huge: { N: "123456789012345678901234567890" },
          },
          SequenceNumber: "5",
        },
        "f",
      ),
    ]);
    expect(envelopes).toEqual([envelope, envelope]);
    expect(skipped.map((s) => [s.eventId, s.reason, s.sequenceNumber])).toEqual([
      ["b", "no_envelope", "2"],
      ["c", "invalid_envelope_json", "3"],
      ["d", "no_new_image", "4"],
    ]);
    expect(ignored).toBe(1);
  });
});

/** Read a table's whole stream (every shard from TRIM_HORIZON), shaped like Lambda's records. */
async function readWholeStream(table: string): Promise<DynamoDBRecord[]> {
  const streams = new DynamoDBStreamsClient(emulator());
  try {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
    const streamArn = Table?.LatestStreamArn;
    if (!streamArn) throw new Error(`${table} has no stream`);
    const { StreamDescription } = await streams.send(
      new DescribeStreamCommand({ StreamArn: streamArn }),
    );
    const records: DynamoDBRecord[] = [];
    for (const shard of StreamDescription?.Shards ?? []) {
      let iterator = (
        await streams.send(
          new GetShardIteratorCommand({
            StreamArn: streamArn,
            ShardId: shard.ShardId,
            ShardIteratorType: "TRIM_HORIZON",
          }),
        )
      ).ShardIterator;
      while (iterator) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
        if (!page.Records || page.Records.length === 0) break;
        records.push(...page.Records.map(asLambdaRecord));
        iterator = page.NextShardIterator;
      }
    }
    return records;
  } finally {
    streams.destroy();
  }
}

function asLambdaRecord(record: _Record): DynamoDBRecord {
  const image = record.dynamodb;
  return {
    eventID: record.eventID,
    eventName: record.eventName,
    eventSource: record.eventSource,
    eventVersion: record.eventVersion,
    awsRegion: record.awsRegion,
    dynamodb: {
      ApproximateCreationDateTime: image?.ApproximateCreationDateTime
        ? Math.floor(image.ApproximateCreationDateTime.getTime() / 1000)
        : undefined,
      Keys: image?.Keys as NonNullable<DynamoDBRecord["dynamodb"]>["Keys"],
      NewImage: image?.NewImage as NonNullable<DynamoDBRecord["dynamodb"]>["NewImage"],
      SequenceNumber: image?.SequenceNumber,
      SizeBytes: image?.SizeBytes,
      StreamViewType: image?.StreamViewType,
    },
  };
}
