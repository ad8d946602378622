import { describe, expect, it } from "vitest";
import { LEGACY_STATE_INDEXES, TABLES } from "../../functions/adapters/dynamodb/layouts";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import {
  catalogPerIndex,
  type IndexEntries,
  indexCatalog,
  indexWriteUnits,
  legacyItem,
  legacyTraceCatalog,
} from "../../lib/dev/metering/index-writes";
import { itemSize } from "../../lib/dev/metering/metering";

const names: TableNames = {
  state: "t-state",
  events: "t-events",
  inbox: "t-inbox",
  sideEffects: "t-effects",
};
const catalog = indexCatalog(names);
const units = (operation: string, input: unknown) =>
  indexWriteUnits(catalog, operation, input, itemSize);

interface Listing {
  readonly listedAt: string;
  readonly waitingSince?: string;
}

const inboxRow = {
  pk: { S: "inbox#audit#01J0000000000000000000000" },
  correlation_id: { S: "corr_1" },
  task_id: { S: "task_1" },
  outcome: { S: "applied" },
};

describe("index write units", () => {
  it("counts one entry per index whose keys the put item carries", () => {
    // A root row (task_id) enters the inbox table's trace index and task-roots: two entries.
    expect(units("PutItem", { TableName: names.inbox, Item: inboxRow })).toBe(2);
    // Any other row (its task in trace_task_id) enters the trace index only.
    const { task_id, ...rest } = inboxRow;
    const row = { ...rest, trace_task_id: task_id };
    expect(units("PutItem", { TableName: names.inbox, Item: row })).toBe(1);
    // A checkpoint row carries neither index key: no entry.
    expect(
      units("PutItem", {
        TableName: names.inbox,
        Item: { pk: { S: "checkpoint#g#task#1" }, version: { N: "3" } },
      }),
    ).toBe(0);
    // An unknown table has no indexes here.
    expect(units("PutItem", { TableName: "other", Item: inboxRow })).toBe(0);
  });

  it("sizes an ALL entry by the whole item and a KEYS_ONLY entry by the keys", () => {
    const envelope = { S: "x".repeat(2800) };
    const event = {
      pk: { S: "task#1" },
      version: { N: "1" },
      event_id: { S: "01J0000000000000000000000" },
      correlation_id: { S: "corr_1" },
      task_id: { S: "task_1" },
      occurred_at: { S: "2026-12-01T10:00:00.000Z" },
      envelope,
    };
    const put = { TableName: names.events, Item: event };
    // An item of 2,964 bytes. In the legacy layout by-correlation and by-task project it all, 3
    // units each; by-hour its keys, 1; without stream_type it is in no by-stream-type entry.
    const before = legacyTraceCatalog(names);
    expect(indexWriteUnits(before, "PutItem", { ...put, Item: legacyItem(event) }, itemSize)).toBe(
      3 + 3 + 1,
    );
    // Now: the trace index and task-roots project keys and the task or correlation, 1 unit each,
    // and by-event-id (every stored event) its keys and correlation, 1.
    expect(units("PutItem", put)).toBe(1 + 1 + 1);
    // An event that is not a task root enters the trace index and by-event-id only.
    const { task_id, ...rest } = event;
    expect(
      units("PutItem", { TableName: names.events, Item: { ...rest, trace_task_id: task_id } }),
    ).toBe(1 + 1);
    // Nor does it start a run (its correlation in trace_correlation_id): by-event-id only.
    const { correlation_id, ...later } = rest;
    const continuing = { ...later, trace_task_id: task_id, trace_correlation_id: correlation_id };
    expect(units("PutItem", { TableName: names.events, Item: continuing })).toBe(1);
  });

  it("splits a table's index writes by index: each index alone, the others' tables as they are", () => {
    // A stream's first event that is a task root: an entry in each of the events table's four.
    const first = {
      pk: { S: "task#1" },
      version: { N: "1" },
      event_id: { S: "01J0000000000000000000002" },
      correlation_id: { S: "corr_1" },
      task_id: { S: "task_1" },
      stream_type: { S: "task" },
    };
    const put = { TableName: names.events, Item: first };
    const split = catalogPerIndex(names, "events");
    const each = Object.fromEntries(
      Object.entries(split).map(([index, c]) => [
        index,
        indexWriteUnits(c, "PutItem", put, itemSize),
      ]),
    );
    expect(each).toEqual({
      "trace-by-correlation": 1,
      "task-roots": 1,
      "by-stream-type": 1,
      "by-event-id": 1,
      "trace-by-digest": 0,
      "digest-task-roots": 0,
    });
    expect(units("PutItem", put)).toBe(4);
    // The same event with an id that carries its correlation's digest (in stored_id, the digest in
    // trace_digest): the digest indexes instead of the three keyed by event_id.
    const { event_id, ...keyed } = first;
    const digested = { ...keyed, stored_id: event_id, trace_digest: { S: "ABCDEFGH" } };
    const digestPut = { TableName: names.events, Item: digested };
    expect(
      Object.fromEntries(
        Object.entries(split).map(([index, c]) => [
          index,
          indexWriteUnits(c, "PutItem", digestPut, itemSize),
        ]),
      ),
    ).toEqual({
      "trace-by-correlation": 0,
      "task-roots": 0,
      "by-stream-type": 1,
      "by-event-id": 0,
      "trace-by-digest": 1,
      "digest-task-roots": 1,
    });
    // And one that continues a run (no trace_digest, its correlation in trace_correlation_id),
    // not a root, not a stream's first: no entry at all.
    const { trace_digest, correlation_id, task_id, stream_type, ...bare } = digested;
    const continuing = {
      ...bare,
      trace_correlation_id: correlation_id,
      trace_task_id: task_id,
      version: { N: "2" },
    };
    expect(units("PutItem", { TableName: names.events, Item: continuing })).toBe(0);
    // The other tables keep all their indexes: a root row still enters the inbox table's two.
    const row = { TableName: names.inbox, Item: inboxRow };
    for (const c of Object.values(split))
      expect(indexWriteUnits(c, "PutItem", row, itemSize)).toBe(2);
  });

  it("estimates today's writes under the layout before task roots, as that version wrote them", () => {
    const before = legacyTraceCatalog(names);
    const event = {
      pk: { S: "task#1" },
      version: { N: "2" },
      event_id: { S: "01J0000000000000000000001" },
      correlation_id: { S: "corr_1" },
      trace_task_id: { S: "task_1" },
      occurred_at: { S: "2026-12-01T11:00:00.000+01:00" },
    };
    expect(legacyItem(event)).toEqual({
      ...event,
      trace_task_id: undefined,
      task_id: { S: "task_1" },
      occurred_hour: { S: "2026-12-01T10" },
      occurred_utc: { S: "2026-12-01T10:00:00.000Z" },
    });
    const put = (item: object) => ({ TableName: names.events, Item: item });
    // by-correlation, by-task (small items: 1 unit each) and by-hour.
    expect(indexWriteUnits(before, "PutItem", put(legacyItem(event)), itemSize)).toBe(3);
    // Now: the trace index and by-event-id.
    expect(units("PutItem", put(event))).toBe(1 + 1);
    // An event that continues a run was written with its correlation_id by that version.
    const { correlation_id, ...rest } = event;
    const continuing = { ...rest, trace_correlation_id: correlation_id };
    expect(legacyItem(continuing)).toEqual(legacyItem(event));
    expect(units("PutItem", put(continuing))).toBe(1);
    // The state table's indexes are the same in both.
    expect(before[names.state]).toEqual(catalog[names.state]);
  });

  it("counts a transaction's items once each, and an update that sets an index key", () => {
    expect(
      units("TransactWriteItems", {
        TransactItems: [
          { Put: { TableName: names.inbox, Item: inboxRow } },
          {
            Update: {
              TableName: names.state,
              Key: { pk: { S: "task#1" } },
              UpdateExpression: "SET #k = :k, #u = :u",
              ExpressionAttributeNames: { "#k": "kind", "#u": "listed_at" },
              ExpressionAttributeValues: { ":k": { S: "task" }, ":u": { S: "2026-12-01" } },
            },
          },
          { ConditionCheck: { TableName: names.state, Key: { pk: { S: "task#2" } } } },
        ],
      }),
    ).toBe(2 + 1);
    // An update that sets no index key changes no entry's key.
    expect(
      units("UpdateItem", {
        TableName: names.state,
        Key: { pk: { S: "task#1" } },
        UpdateExpression: "SET #r = :r",
        ExpressionAttributeNames: { "#r": "revision" },
        ExpressionAttributeValues: { ":r": { N: "2" } },
      }),
    ).toBe(0);
  });

  it("counts the puts of a batch, and nothing for reads", () => {
    expect(
      units("BatchWriteItem", {
        RequestItems: {
          [names.inbox]: [{ PutRequest: { Item: inboxRow } }, { DeleteRequest: { Key: {} } }],
        },
      }),
    ).toBe(2);
    expect(units("GetItem", { TableName: names.inbox, Key: { pk: inboxRow.pk } })).toBe(0);
  });
});

describe("index entries written before", () => {
  const summarized = (updatedAt: string, waiting?: string, listing?: Listing) => ({
    TableName: names.state,
    Item: {
      pk: { S: "task_view#task_1" },
      revision: { N: "1" },
      kind: { S: "task" },
      status: { S: "planned" },
      updated_at: { S: updatedAt },
      ...(waiting ? { waiting: { S: waiting } } : {}),
      ...(listing ? { listed_at: { S: listing.listedAt } } : {}),
      ...(listing?.waitingSince ? { waiting_since: { S: listing.waitingSince } } : {}),
    },
  });
  // The lists of a stack deployed before listed_at: sorted by updated_at, projecting the summary.
  const legacy = {
    ...catalog,
    [names.state]: { ...TABLES.state, indexes: [...LEGACY_STATE_INDEXES] },
  };

  it("cost two writes when their key moves, one when the item leaves the index", () => {
    const entries: IndexEntries = new Map();
    const put = (input: unknown) => indexWriteUnits(legacy, "PutItem", input, itemSize, entries);
    // New: one entry in by-kind and one in by-waiting.
    expect(put(summarized("2026-12-01T10:00:00Z", "review"))).toBe(2);
    // updated_at is both indexes' sort key: each entry is deleted and put again.
    expect(put(summarized("2026-12-01T10:00:05Z", "review"))).toBe(4);
    // No longer waiting: by-kind moves (2), by-waiting loses its entry (1).
    expect(put(summarized("2026-12-01T10:00:09Z"))).toBe(3);
    // The same key again: the entry is refreshed in place (it projects the summary).
    expect(put(summarized("2026-12-01T10:00:09Z"))).toBe(1);
  });

  it("stay where they are while a summarized state keeps its kind and what it waits for", () => {
    const entries: IndexEntries = new Map();
    const put = (input: unknown) => indexWriteUnits(catalog, "PutItem", input, itemSize, entries);
    const listed = "2026-12-01T10:00:00Z";
    // New: one keys-only entry in by-kind-listed and one in by-waiting-since.
    const waiting = { listedAt: listed, waitingSince: listed };
    expect(put(summarized("2026-12-01T10:00:00Z", "review", waiting))).toBe(2);
    // Later writes with the same list keys: no index entry is written.
    expect(put(summarized("2026-12-01T10:00:05Z", "review", waiting))).toBe(0);
    expect(put(summarized("2026-12-01T10:00:07Z", "review", waiting))).toBe(0);
    // No longer waiting: by-waiting-since loses its entry (1), by-kind-listed stays.
    expect(put(summarized("2026-12-01T10:00:09Z", undefined, { listedAt: listed }))).toBe(1);
    expect(put(summarized("2026-12-01T10:00:11Z", undefined, { listedAt: listed }))).toBe(0);
  });

  it("follow an update that sets an index's sort key of an item the meter saw", () => {
    const entries: IndexEntries = new Map();
    indexWriteUnits(legacy, "PutItem", summarized("2026-12-01T10:00:00Z"), itemSize, entries);
    const touch = {
      TableName: names.state,
      Key: { pk: { S: "task_view#task_1" } },
      UpdateExpression: "SET #rev = :rev, #up = :up",
      ExpressionAttributeNames: { "#rev": "revision", "#up": "updated_at" },
      ExpressionAttributeValues: { ":rev": { N: "2" }, ":up": { S: "2026-12-01T10:01:00Z" } },
    };
    expect(indexWriteUnits(legacy, "UpdateItem", touch, itemSize, entries)).toBe(2);
    // A keys-only index whose key stays: nothing to write.
    const due = {
      TableName: names.state,
      Item: { pk: { S: "dag_run#r1" }, due_shard: { S: "due" }, due_at: { S: "2026-12-01" } },
    };
    expect(indexWriteUnits(catalog, "PutItem", due, itemSize, entries)).toBe(1);
    expect(indexWriteUnits(catalog, "PutItem", due, itemSize, entries)).toBe(0);
  });
});
