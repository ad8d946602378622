import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { DynamoFailureLog } from "../../functions/adapters/dynamodb/failure-log";
import { DynamoStreamLister } from "../../functions/adapters/dynamodb/stream-lister";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import {
  type AgentBusError,
  DuplicateCommitError,
  VersionConflictError,
} from "../../functions/core/errors";
import { InMemoryEventStore } from "../../functions/core/memory";
import { consume } from "../../functions/core/pipeline";
import type {
  CommitRequest,
  EventStore,
  FailureLog,
  FailureRecord,
  InboxRecord,
  RecordedOutcome,
  StreamHead,
  StreamLister,
  TraceReader,
} from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import type { Role } from "../../functions/core/role";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type AggregateRef, type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import {
  feedbackEvent,
  newCorrelationId,
  newTaskId,
  newUlid,
  taskEvent,
  taskStream,
} from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

/**
 * The event store contract, run against the in-memory twin and the DynamoDB adapter (on moto):
 * same results, same errors, same messages. If one of them drifts, this file fails.
 */

type Store = EventStore & TraceReader;

let client: DynamoDBClient;
let tables: TableNames;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  tables = await createTables(client, `contract-${newUlid().toLowerCase()}`);
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

const subjects: [string, (clock: ManualClock) => Store][] = [
  ["InMemoryEventStore", (clock) => new InMemoryEventStore(clock)],
  ["DynamoEventStore", (clock) => new DynamoEventStore({ client: fromSdk(client), tables, clock })],
];

/** The in-memory twin lists streams itself; on DynamoDB the lister is its own adapter. */
const listerOf = (store: Store): StreamLister =>
  store instanceof InMemoryEventStore
    ? store
    : new DynamoStreamLister(fromSdk(client), tables.events);

/** The in-memory twin records failures itself; on DynamoDB the failure log is its own adapter. */
const failureLogOf = (store: Store): FailureLog =>
  store instanceof InMemoryEventStore ? store : new DynamoFailureLog(fromSdk(client), tables.inbox);

const refOf = (e: Envelope): AggregateRef => ({ type: e.aggregate.type, id: e.aggregate.id });
const newGroup = () => `group-${newUlid().toLowerCase()}`;

function inboxRecord(
  group: string,
  event: Envelope,
  clock: ManualClock,
  options: { ttlSeconds?: number; outcome?: RecordedOutcome; reason?: string } = {},
): InboxRecord {
  return {
    group,
    eventId: event.event_id,
    eventType: event.event_type,
    outcome: options.outcome ?? "applied",
    ...(options.reason ? { reason: options.reason } : {}),
    aggregate: refOf(event),
    version: event.aggregate.version,
    correlationId: event.correlation_id,
    taskId: event.task_id,
    producer: event.producer,
    occurredAt: event.occurred_at,
    recordedAt: clock.now().toISOString(),
    expiresAt: Math.floor(clock.now().getTime() / 1000) + (options.ttlSeconds ?? 3600),
  };
}

async function failureOf(promise: Promise<unknown>): Promise<AgentBusError> {
  try {
    await promise;
  } catch (error) {
    return error as AgentBusError;
  }
  throw new Error("expected the call to fail");
}

/** Everything a commit could have touched for one group and stream. */
async function observe(store: Store, group: string, stream: AggregateRef, eventIds: string[]) {
  return {
    loaded: await store.load({ checkpoint: { group, stream, row: true }, state: stream }),
    events: await store.readStream(stream, 0, 1000),
    inbox: await store.inboxRecords(group, eventIds),
  };
}

describe.each(subjects)("%s honours the event store contract", (_name, make) => {
  let clock: ManualClock;
  let store: Store;

  beforeEach(() => {
    clock = new ManualClock("2026-03-01T12:00:00.000Z");
    store = make(clock);
  });

  it("loads nothing for an unknown aggregate, group and event", async () => {
    const stream = { type: "task", id: newTaskId() };
    const loaded = await store.load({
      inbox: { group: newGroup(), eventId: newUlid() },
      checkpoint: { group: newGroup(), stream },
      state: stream,
    });
    expect(loaded).toEqual({ inboxHit: false, checkpoint: 0, state: undefined });
    expect(await store.readStream(stream, 1, 10)).toEqual([]);
  });

  it("commits inbox, checkpoint, state and events together and loads them back", async () => {
    const [e1, e2] = taskStream(1, 2) as [Envelope, Envelope];
    const stream = refOf(e1);
    const group = newGroup();
    await store.commit({
      inbox: inboxRecord(group, e1, clock),
      checkpoint: { group, stream, from: 0, to: 1 },
      state: { aggregate: stream, expectedRevision: 0, next: { status: "accepted" }, version: 2 },
      append: [e1, e2],
    });
    const loaded = await store.load({
      inbox: { group, eventId: e1.event_id, row: true },
      checkpoint: { group, stream, row: true },
      state: stream,
    });
    expect(loaded).toEqual({
      inboxHit: true,
      checkpoint: 1,
      state: {
        aggregate: stream,
        revision: 1,
        version: 2,
        data: { status: "accepted" },
        // The correlation of the stream's event at the state's version, kept with the state.
        streamHead: { version: 2, correlation: e2.correlation_id, task: e2.task_id },
      },
    });
    // Only what was asked for is reported.
    expect(await store.load({ state: stream })).toMatchObject({ inboxHit: false, checkpoint: 0 });
    expect(await store.readStream(stream, 1, 2)).toEqual([e1, e2]);
  });

  it("keeps the stream head with the state: set by an append, carried over at its version only", async () => {
    const [e1, e2] = taskStream(1, 2) as [Envelope, Envelope];
    const stream = refOf(e1);
    const head = async () => (await store.load({ state: stream })).state?.streamHead;
    const state = (revision: number, version: number, carried?: StreamHead) => ({
      aggregate: stream,
      expectedRevision: revision,
      next: { n: revision },
      version,
      ...(carried ? { streamHead: carried } : {}),
    });
    await store.commit({ state: state(0, 1), append: [e1] });
    const first = { version: 1, correlation: e1.correlation_id, task: e1.task_id };
    expect(await head()).toEqual(first);
    // A gate commit leaves it; a state commit carrying it at the state's version keeps it.
    await store.commit({
      gate: { aggregate: stream, expectedRevision: 1, records: { checkpoints: {}, recent: {} } },
    });
    expect(await head()).toEqual(first);
    await store.commit({ state: state(2, 1, first) });
    expect(await head()).toEqual(first);
    // Carried at another version, or not carried, it is not known any more.
    await store.commit({ state: state(3, 1, { ...first, version: 7 }) });
    expect(await head()).toBeUndefined();
    await store.commit({ state: state(4, 2, undefined), append: [e2] });
    expect(await head()).toEqual({ version: 2, correlation: e2.correlation_id, task: e2.task_id });
    await store.commit({ state: state(5, 2) });
    expect(await head()).toBeUndefined();
  });

  it("reads stream ranges in version order, leaving out missing versions", async () => {
    const taskId = newTaskId();
    const all = taskStream(1, 5, { taskId });
    const [v1, v2, , v4, v5] = all as [Envelope, Envelope, Envelope, Envelope, Envelope];
    const other = taskStream(1, 2);
    await store.commit({ append: [v1, v2] });
    await store.commit({ append: [v4, v5, ...other] });
    const stream = refOf(v1);
    const versions = async (from: number, to: number) =>
      (await store.readStream(stream, from, to)).map((e) => e.aggregate.version);
    expect(await versions(1, 5)).toEqual([1, 2, 4, 5]);
    expect(await versions(2, 4)).toEqual([2, 4]);
    expect(await versions(3, 3)).toEqual([]);
    expect(await versions(5, 9)).toEqual([5]);
    expect(await versions(6, 9)).toEqual([]);
    expect(await versions(4, 2)).toEqual([]);
    expect(await store.readStream(stream, 4, 4)).toEqual([v4]);
  });

  it("counts state revisions and round-trips state data", async () => {
    const stream = { type: "task", id: newTaskId() };
    const write = (expectedRevision: number, next: unknown) =>
      store.commit({ state: { aggregate: stream, expectedRevision, next, version: 0 } });
    await write(0, { status: "accepted" });
    await write(1, null);
    expect((await store.load({ state: stream })).state).toEqual({
      aggregate: stream,
      revision: 2,
      version: 0,
      data: null,
    });
    const rich = {
      nested: { list: [1, "two", true, null, { deep: "ünïcødé ✓ 😀" }], empty: "", zero: 0 },
      negative: -1.5,
      big: 2 ** 40,
      flag: false,
      dropped: undefined,
    };
    await write(2, rich);
    const { state } = await store.load({ state: stream });
    expect(state?.revision).toBe(3);
    expect(state?.data).toEqual({ ...rich, dropped: undefined });
  });

  it("reads and writes the aggregate a ref names when called, though the caller reuses the object", async () => {
    const ref = { type: "task", id: newTaskId() };
    const first = { ...ref };
    await store.commit({
      state: { aggregate: ref, expectedRevision: 0, next: { n: 1 }, version: 0 },
    });
    ref.id = newTaskId();
    expect((await store.load({ state: ref })).state).toBeUndefined();
    await store.commit({
      state: { aggregate: ref, expectedRevision: 0, next: { n: 2 }, version: 0 },
    });
    expect((await store.load({ state: first })).state?.data).toEqual({ n: 1 });
    expect((await store.load({ state: { ...ref } })).state?.data).toEqual({ n: 2 });
  });

  it("refuses a second inbox row for the same (group, event) and writes nothing", async () => {
    const [e1, e2] = taskStream(1, 2) as [Envelope, Envelope];
    const stream = refOf(e1);
    const group = newGroup();
    await store.commit({ inbox: inboxRecord(group, e1, clock), append: [e1] });
    const before = await observe(store, group, stream, [e1.event_id]);
    const error = await failureOf(
      store.commit({
        inbox: inboxRecord(group, e1, clock, { outcome: "discarded", reason: "expired" }),
        checkpoint: { group, stream, from: 0, to: 1 },
        state: { aggregate: stream, expectedRevision: 0, next: { x: 1 }, version: 2 },
        append: [e2],
      }),
    );
    expect(error).toBeInstanceOf(DuplicateCommitError);
    expect(error.code).toBe("commit.duplicate");
    expect(error.errorClass).toBe("transient");
    expect(await observe(store, group, stream, [e1.event_id])).toEqual(before);
    // The same event in another group is not a duplicate.
    await store.commit({ inbox: inboxRecord(newGroup(), e1, clock) });
  });

  it("keeps a group's gate records on the state item: checkpoints and live recent ids", async () => {
    const [e1] = taskStream(1, 1) as [Envelope];
    const stream = refOf(e1);
    const view = { type: "task_view", id: stream.id };
    const group = newGroup();
    const command = newUlid();
    const expiresAt = clock.now().getTime() / 1000 + 60;
    const gate = { checkpoints: { [`task#${stream.id}`]: 1 }, recent: { [command]: expiresAt } };
    await store.commit({
      inbox: inboxRecord(group, e1, clock),
      state: { aggregate: view, expectedRevision: 0, next: { n: 1 }, version: 0, gate },
    });
    const ask = {
      inbox: { group, eventId: command },
      checkpoint: { group, stream },
      state: view,
    };
    expect(await store.load(ask)).toEqual({
      inboxHit: true,
      checkpoint: 1,
      state: { aggregate: view, revision: 1, version: 0, data: { n: 1 }, gate },
    });
    // Another stream, another id: not applied here. A recent id no longer counts once expired.
    const other = { inbox: { group, eventId: newUlid() }, checkpoint: { group, stream: view } };
    expect(await store.load({ ...ask, ...other })).toMatchObject({
      inboxHit: false,
      checkpoint: 0,
    });
    clock.advance(60_000);
    expect((await store.load(ask)).inboxHit).toBe(false);
  });

  it("moves only the gate records with a gate commit, at the expected revision", async () => {
    const view = { type: "task_view", id: newTaskId() };
    const records = (v: number) => ({ checkpoints: { "task#t": v }, recent: {} });
    // Absent: created bare, with the records alone.
    await store.commit({ gate: { aggregate: view, expectedRevision: 0, records: records(1) } });
    expect((await store.load({ state: view })).state).toEqual({
      aggregate: view,
      revision: 1,
      version: 0,
      data: undefined,
      gate: records(1),
    });
    await store.commit({
      state: { aggregate: view, expectedRevision: 1, next: { n: 2 }, version: 3, gate: records(2) },
    });
    await store.commit({ gate: { aggregate: view, expectedRevision: 2, records: records(3) } });
    expect((await store.load({ state: view })).state).toEqual({
      aggregate: view,
      revision: 3,
      version: 3,
      data: { n: 2 },
      gate: records(3),
    });
    const stale = await failureOf(
      store.commit({ gate: { aggregate: view, expectedRevision: 2, records: records(4) } }),
    );
    expect(stale).toMatchObject({ conflict: "state", code: "commit.state_conflict" });
    expect(stale.message).toBe(`task_view#${view.id} is at revision 3, expected 2`);
  });

  it("keeps a summarized state's list keys through state and gate commits, and drops them with the summary", async () => {
    const view = { type: "conversation_view", id: newTaskId() };
    const summary = { kind: "conversation", status: "open", waiting: "held_reply" };
    const listing = {
      listedAt: "2026-03-01T11:00:00.000Z",
      waiting: "held_reply",
      waitingSince: "2026-03-01T11:30:00.000Z",
    };
    const state = (expectedRevision: number, extra: object) => ({
      aggregate: view,
      expectedRevision,
      next: { n: expectedRevision },
      version: 0,
      ...extra,
    });
    await store.commit({ state: state(0, { summary, listing }) });
    expect((await store.load({ state: view })).state?.listing).toEqual(listing);
    const records = { checkpoints: { "conversation#c": 1 }, recent: {} };
    await store.commit({ gate: { aggregate: view, expectedRevision: 1, records } });
    expect((await store.load({ state: view })).state?.listing).toEqual(listing);
    // A summary that waits for something else, without keys to match: that wait starts now.
    const other = { ...summary, waiting: "needs_human" };
    await store.commit({ state: state(2, { summary: other, listing }) });
    expect((await store.load({ state: view })).state?.listing).toEqual({
      listedAt: listing.listedAt,
      waiting: "needs_human",
      waitingSince: "2026-03-01T12:00:00.000Z",
    });
    await store.commit({ state: state(3, {}) });
    expect((await store.load({ state: view })).state?.listing).toBeUndefined();
    await store.commit({ state: state(4, { summary: { kind: "conversation", status: "open" } }) });
    expect((await store.load({ state: view })).state?.listing).toEqual({
      listedAt: "2026-03-01T12:00:00.000Z",
    });
  });

  it("writes no inbox row, and checks none, for a commit its state records (recordedByState)", async () => {
    const [e1] = taskStream(1, 1) as [Envelope];
    const group = newGroup();
    const record = { type: "audit_record", id: `evt_${e1.event_id}` };
    const commit = (expectedRevision: number) =>
      store.commit({
        inbox: inboxRecord(group, e1, clock),
        recordedByState: true,
        state: { aggregate: record, expectedRevision, next: { id: e1.event_id }, version: 0 },
      });
    await commit(0);
    expect(await store.inboxRecords(group, [e1.event_id])).toEqual([]);
    expect((await store.load({ state: record })).state?.data).toEqual({ id: e1.event_id });
    // A second record of the same event: refused by the state's condition, not by an inbox row.
    expect(await failureOf(commit(0))).toMatchObject({ conflict: "state" });
    await commit(1);
  });

  it("finds an id spilled from the recent ones in its row while the state says one may be there", async () => {
    const [e1] = taskStream(1, 1) as [Envelope];
    const group = newGroup();
    const view = { type: "task_view", id: newTaskId() };
    const [spilled, kept] = [newUlid(), newUlid()];
    const now = clock.now().getTime() / 1000;
    const gate = { checkpoints: {}, recent: { [kept]: now + 120 }, spilledUntil: now + 60 };
    // A discard row of the spilled id keeps what it says; the spill makes a row for it too.
    const discard = newUlid();
    await store.commit({
      inbox: { ...inboxRecord(group, e1, clock, { outcome: "discarded", reason: "expired" }) },
    });
    await store.commit({
      inbox: inboxRecord(group, e1, clock),
      recordedByState: true,
      state: { aggregate: view, expectedRevision: 0, next: { n: 1 }, version: 0, gate },
      spill: {
        group,
        ids: [
          { eventId: spilled, expiresAt: now + 60 },
          { eventId: e1.event_id, expiresAt: now + 60 },
        ],
      },
    });
    const ask = (eventId: string) => store.load({ inbox: { group, eventId }, state: view });
    expect((await ask(spilled)).inboxHit).toBe(true);
    expect((await ask(kept)).inboxHit).toBe(true);
    expect((await ask(discard)).inboxHit).toBe(false);
    expect((await ask(spilled)).state?.gate).toEqual(gate);
    // A spilled row records nothing for a trace; a row it joined still says what it said.
    expect(await store.inboxRecords(group, [spilled, e1.event_id])).toMatchObject([
      { eventId: e1.event_id, outcome: "discarded", reason: "expired" },
    ]);
    expect(await store.outcomesOfEvent([group], spilled)).toEqual([]);
    const asked = [spilled, kept, e1.event_id].map((eventId) => ({ group, eventId }));
    expect(await store.spilled(asked)).toEqual([true, false, true]);
    clock.advance(61_000);
    expect((await ask(spilled)).inboxHit).toBe(false);
    expect((await ask(kept)).inboxHit).toBe(true);
  });

  it("keeps a message whole in a row without expiry (written before kept rows expired), read alone by a row-only load", async () => {
    // Its comment is long enough for the row to store the message deflated.
    const message = feedbackEvent({ payload: { rating: 5, comment: "x".repeat(800) } });
    const group = newGroup();
    const row = { ...inboxRecord(group, message, clock), expiresAt: Number.MAX_SAFE_INTEGER };
    await store.commit({ inbox: { ...row, envelope: message } });
    const load = () =>
      store.load({
        inbox: { group, eventId: message.event_id, row: true, rowOnly: true },
        state: refOf(message),
      });
    clock.advance(400 * 24 * 3600_000);
    expect(await load()).toEqual({ inboxHit: true, checkpoint: 0, state: undefined });
    expect(await store.inboxRecords(group, [message.event_id])).toEqual([
      { ...row, envelope: message },
    ]);
    expect(await store.outcomesByCorrelation(message.correlation_id)).toEqual([
      { ...row, envelope: message },
    ]);
    const again = await failureOf(store.commit({ inbox: { ...row, envelope: message } }));
    expect(again).toBeInstanceOf(DuplicateCommitError);
  });

  it("reads a kept message's row without the message once the row has expired", async () => {
    const message = feedbackEvent({ payload: { rating: 5, comment: "x".repeat(800) } });
    const group = newGroup();
    const until = Math.floor(clock.now().getTime() / 1000) + 60;
    const row = { ...inboxRecord(group, message, clock), expiresAt: until };
    await store.commit({ inbox: { ...row, envelope: message } });
    // A row is found by task through the task's stored events: none yet, then one.
    expect(await store.outcomesByTask(message.task_id)).toEqual([]);
    const stored = taskEvent(1, { taskId: message.task_id, correlationId: message.correlation_id });
    await store.commit({ append: [stored] });
    expect(await store.outcomesByTask(message.task_id)).toEqual([{ ...row, envelope: message }]);
    expect(await store.correlationOfEvent(stored.event_id)).toBe(message.correlation_id);
    expect(await store.correlationOfEvent(message.event_id)).toBeUndefined();
    clock.advance(60_000);
    // TTL deletes the row later; until then every trace read gives the outcome alone.
    expect(await store.inboxRecords(group, [message.event_id])).toEqual([row]);
    expect(await store.outcomesByCorrelation(message.correlation_id)).toEqual([row]);
    expect(await store.outcomesByTask(message.task_id)).toEqual([row]);
    expect(await store.outcomesOfEvent([group], message.event_id)).toEqual([row]);
  });

  it("moves a checkpoint only from the stored version", async () => {
    const stream = { type: "task", id: newTaskId() };
    const group = newGroup();
    const move = (from: number, to: number, on: AggregateRef = stream) =>
      store.commit({ checkpoint: { group, stream: on, from, to } });
    await move(0, 3);
    const fromZero = await failureOf(move(0, 4));
    expect(fromZero).toBeInstanceOf(VersionConflictError);
    expect(fromZero).toMatchObject({ conflict: "checkpoint", code: "commit.checkpoint_conflict" });
    expect(fromZero.message).toBe(`checkpoint of ${group} on task#${stream.id} is 3, expected 0`);
    expect((await failureOf(move(2, 4))).message).toBe(
      `checkpoint of ${group} on task#${stream.id} is 3, expected 2`,
    );
    const absent = { type: "task", id: newTaskId() };
    expect((await failureOf(move(5, 6, absent))).message).toBe(
      `checkpoint of ${group} on task#${absent.id} is 0, expected 5`,
    );
    await move(3, 4);
    const asked = { checkpoint: { group, stream, row: true }, state: stream };
    expect((await store.load(asked)).checkpoint).toBe(4);
  });

  it("writes state only at the expected revision", async () => {
    const stream = { type: "task", id: newTaskId() };
    const write = (expectedRevision: number, on: AggregateRef = stream) =>
      store.commit({ state: { aggregate: on, expectedRevision, next: { n: 1 }, version: 1 } });
    await write(0);
    const again = await failureOf(write(0));
    expect(again).toBeInstanceOf(VersionConflictError);
    expect(again).toMatchObject({ conflict: "state", code: "commit.state_conflict" });
    expect(again.message).toBe(`task#${stream.id} is at revision 1, expected 0`);
    expect((await failureOf(write(2))).message).toBe(
      `task#${stream.id} is at revision 1, expected 2`,
    );
    const absent = { type: "task", id: newTaskId() };
    expect((await failureOf(write(1, absent))).message).toBe(
      `task#${absent.id} is at revision 0, expected 1`,
    );
    await write(1);
    expect((await store.load({ state: stream })).state?.revision).toBe(2);
  });

  it("appends each stream version once", async () => {
    const taskId = newTaskId();
    const [v1, v2] = taskStream(1, 2, { taskId }) as [Envelope, Envelope];
    const rival = taskEvent(1, { taskId });
    await store.commit({ append: [v1] });
    const error = await failureOf(store.commit({ append: [v2, rival] }));
    expect(error).toBeInstanceOf(VersionConflictError);
    expect(error).toMatchObject({ conflict: "stream", code: "commit.stream_conflict" });
    expect(error.message).toBe(`task#${taskId} already has version 1`);
    expect(await store.readStream(refOf(v1), 1, 10)).toEqual([v1]);
  });

  it("reports duplicate, then checkpoint, then state, then stream when several fail", async () => {
    const taskId = newTaskId();
    const [v1, v2] = taskStream(1, 2, { taskId }) as [Envelope, Envelope];
    const stream = refOf(v1);
    const group = newGroup();
    await store.commit({
      inbox: inboxRecord(group, v1, clock),
      checkpoint: { group, stream, from: 0, to: 1 },
      state: { aggregate: stream, expectedRevision: 0, next: {}, version: 1 },
      append: [v1],
    });
    const rival = taskEvent(1, { taskId });
    const bad = {
      inbox: inboxRecord(group, v1, clock),
      checkpoint: { group, stream, from: 0, to: 1 },
      state: { aggregate: stream, expectedRevision: 0, next: {}, version: 1 },
      append: [rival],
    } satisfies CommitRequest;
    const fresh = inboxRecord(group, v2, clock);
    const good = {
      checkpoint: { group, stream, from: 1, to: 2 },
      state: { aggregate: stream, expectedRevision: 1, next: {}, version: 2 },
    };
    expect(await failureOf(store.commit(bad))).toBeInstanceOf(DuplicateCommitError);
    expect(await failureOf(store.commit({ ...bad, inbox: fresh }))).toMatchObject({
      conflict: "checkpoint",
    });
    expect(
      await failureOf(store.commit({ ...bad, inbox: fresh, checkpoint: good.checkpoint })),
    ).toMatchObject({ conflict: "state" });
    expect(await failureOf(store.commit({ ...bad, inbox: fresh, ...good }))).toMatchObject({
      conflict: "stream",
    });
  });

  it.each(["inbox", "checkpoint", "state", "stream"] as const)(
    "writes nothing at all when only the %s part fails",
    async (failing) => {
      const taskId = newTaskId();
      const [v1, v2, v3] = taskStream(1, 3, { taskId }) as [Envelope, Envelope, Envelope];
      const stream = refOf(v1);
      const group = newGroup();
      await store.commit({
        inbox: inboxRecord(group, v1, clock),
        checkpoint: { group, stream, from: 0, to: 1 },
        state: { aggregate: stream, expectedRevision: 0, next: { at: 1 }, version: 1 },
        append: [v1],
      });
      const ids = [v1.event_id, v2.event_id];
      const before = await observe(store, group, stream, ids);
      const request: CommitRequest = {
        inbox: inboxRecord(group, failing === "inbox" ? v1 : v2, clock),
        checkpoint: { group, stream, from: failing === "checkpoint" ? 0 : 1, to: 2 },
        state: {
          aggregate: stream,
          expectedRevision: failing === "state" ? 7 : 1,
          next: { at: 2 },
          version: 3,
        },
        append: failing === "stream" ? [v2, taskEvent(1, { taskId }), v3] : [v2, v3],
      };
      const error = await failureOf(store.commit(request));
      expect(error).toBeInstanceOf(
        failing === "inbox" ? DuplicateCommitError : VersionConflictError,
      );
      expect(await observe(store, group, stream, ids)).toEqual(before);
    },
  );

  it("ignores expired inbox rows on load and lets a commit overwrite them", async () => {
    const event = taskEvent(1);
    const group = newGroup();
    const ask = { inbox: { group, eventId: event.event_id, row: true }, state: refOf(event) };
    await store.commit({ inbox: inboxRecord(group, event, clock, { ttlSeconds: 60 }) });
    clock.advance(59_999);
    expect((await store.load(ask)).inboxHit).toBe(true);
    expect(
      await failureOf(store.commit({ inbox: inboxRecord(group, event, clock) })),
    ).toBeInstanceOf(DuplicateCommitError);
    clock.advance(1); // now = expiresAt: the row no longer counts
    expect((await store.load(ask)).inboxHit).toBe(false);
    const again = inboxRecord(group, event, clock, { outcome: "discarded", reason: "expired" });
    await store.commit({ inbox: again });
    expect((await store.load(ask)).inboxHit).toBe(true);
    expect(await store.inboxRecords(group, [event.event_id])).toEqual([again]);
  });

  it("treats an empty commit as a no-op", async () => {
    await store.commit({});
    await store.commit({ append: [] });
  });

  it("finds every event of a correlation across streams, in event id order", async () => {
    const correlationId = newCorrelationId();
    const a = taskStream(1, 2, { correlationId });
    const noise = taskStream(1, 1);
    const b = taskStream(1, 1, { correlationId });
    await store.commit({ append: a });
    await store.commit({ append: noise });
    await store.commit({ append: b });
    expect(await store.eventsByCorrelation(correlationId)).toEqual([...a, ...b]);
    expect(await store.eventsByCorrelation(newCorrelationId())).toEqual([]);
  });

  it("returns inbox records of one group in the order asked, unknown ids left out", async () => {
    const [e1, e2, e3] = taskStream(1, 3) as [Envelope, Envelope, Envelope];
    const group = newGroup();
    const r1 = inboxRecord(group, e1, clock);
    const r2 = inboxRecord(group, e2, clock, { outcome: "discarded", reason: "superseded" });
    const r3 = inboxRecord(group, e3, clock, { outcome: "rejected", reason: "task.not_found" });
    await store.commit({ inbox: r1 });
    await store.commit({ inbox: r2 });
    await store.commit({ inbox: r3 });
    expect(
      await store.inboxRecords(group, [e3.event_id, newUlid(), e1.event_id, e2.event_id]),
    ).toEqual([r3, r1, r2]);
    expect(await store.inboxRecords(newGroup(), [e1.event_id])).toEqual([]);
    expect(await store.inboxRecords(group, [])).toEqual([]);
  });

  it("finds every group's outcomes (inbox rows and failure records) by correlation, task and event", async () => {
    const correlationId = newCorrelationId();
    const [e1, e2] = taskStream(1, 2, { correlationId }) as [Envelope, Envelope];
    const [g1, g2] = [newGroup(), newGroup()];
    const applied = inboxRecord(g1, e1, clock);
    const discarded = inboxRecord(g2, e1, clock, { outcome: "discarded", reason: "superseded" });
    await store.commit({ inbox: applied });
    await store.commit({ inbox: discarded });
    const { outcome: _o, reason: _r, ...fields } = inboxRecord(g1, e2, clock);
    const failed: FailureRecord = {
      ...fields,
      outcome: "dead-lettered",
      error: { code: "task.not_found", message: "no such task" },
      attempts: 3,
    };
    await failureLogOf(store).record(failed);
    await store.commit({ inbox: inboxRecord(newGroup(), taskStream(1, 1)[0] as Envelope, clock) });
    const byPk = (records: readonly object[]) =>
      [...records].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    const all = byPk([applied, discarded, failed]);
    expect(byPk(await store.outcomesByCorrelation(correlationId))).toEqual(all);
    expect(byPk(await store.outcomesByTask(e1.task_id))).toEqual(all);
    expect(byPk(await store.outcomesOfEvent([g1, g2, newGroup()], e1.event_id))).toEqual(
      byPk([applied, discarded]),
    );
    expect(await store.outcomesOfEvent([g1], e2.event_id)).toEqual([failed]);
    expect(await store.outcomesByCorrelation(newCorrelationId())).toEqual([]);
  });

  it("lists every stream of an aggregate type, page by page, once each", async () => {
    const type = `t${newUlid().toLowerCase().slice(-10)}`;
    const ids = Array.from({ length: 5 }, () => `task_${newUlid()}`).sort();
    for (const id of ids) {
      const events = taskStream(1, 2).map((e) => ({
        ...e,
        aggregate: { ...e.aggregate, type, id },
      }));
      await store.commit({ append: events });
    }
    const lister = listerOf(store);
    const seen: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const found = await lister.streamsOfType(type, after, 2);
      seen.push(...found.streams.map((s) => `${s.type}/${s.id}`));
      if (!found.next) break;
      after = found.next;
    }
    expect(seen).toEqual(ids.map((id) => `${type}/${id}`));
    expect((await lister.streamsOfType(`none${type}`)).streams).toEqual([]);
  });

  it("serves the core producer (appendToStream)", async () => {
    const deps = { store, registry, clock, ids: ulidSource(clock) };
    const taskId = newTaskId();
    const aggregate = { type: "task", id: taskId };
    const common = { aggregate, producer: "api", correlationId: newCorrelationId(), taskId };
    const [accepted] = await appendToStream(deps, {
      ...common,
      decide: () => ({
        state: { status: "accepted" },
        emit: [{ type: "task.accepted", payload: { title: "t" } }],
      }),
    });
    const [planned] = await appendToStream<{ status: string }>(deps, {
      ...common,
      decide: (current) => ({
        state: { status: `${current?.data.status}->planned` },
        emit: [{ type: "plan.created", payload: { steps: [{ title: "a" }] } }],
      }),
    });
    expect(await store.readStream(aggregate, 1, 10)).toEqual([accepted, planned]);
    expect((await store.load({ state: aggregate })).state).toEqual({
      aggregate,
      revision: 2,
      version: 2,
      data: { status: "accepted->planned" },
      streamHead: { version: 2, correlation: common.correlationId, task: taskId },
    });
  });

  it("serves the consumer pipeline, repairing a version gap from the stream", async () => {
    const group = newGroup();
    const role: Role<{ seen: number[] }> = {
      group,
      subscriptions: ["task.accepted", "plan.created", "answer.generated", "notification.sent"],
      stateOf: (event) => ({ type: "task_view", id: event.task_id }),
      decide: (state, event) => ({
        state: { seen: [...(state?.seen ?? []), event.aggregate.version] },
      }),
    };
    const events = taskStream(1, 3);
    const [, v2, v3] = events as [Envelope, Envelope, Envelope];
    await store.commit({ append: events });
    const deps = { store, registry, clock, ids: ulidSource(clock) };
    const result = await consume(v3, role, deps);
    expect(result.status).toBe("applied");
    expect(result.steps.map((s) => [s.version, s.repaired])).toEqual([
      [1, true],
      [2, true],
      [3, false],
    ]);
    expect((await consume(v2, role, deps)).status).toBe("duplicate");
    const view = { type: "task_view", id: v3.task_id };
    expect((await store.load({ state: view })).state?.data).toEqual({ seen: [1, 2, 3] });
  });
});
