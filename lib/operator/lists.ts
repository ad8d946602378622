import { type AttributeValue, QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { batchGetItems, missingIndex } from "../../functions/adapters/dynamodb/reads";
import {
  EventAttr,
  EventIndex,
  LegacyStateIndex,
  LegacyTraceIndex,
  SideEffectAttr,
  SideEffectIndex,
  STATE_SUMMARY_ATTRIBUTES,
  StateAttr,
  StateIndex,
} from "../../functions/adapters/dynamodb/tables";
import { DEFAULT_TENANT, tenantOf } from "../../schemas/ids";
import { fromSdk } from "./from-sdk";
import type { OpsStack } from "./stack";
import type { ItemSummary, SideEffectView } from "./views";

/** A summarized state in the operator's lists: its summary, tenant and list keys. */
export interface SummaryRow extends ItemSummary {
  readonly tenant: string;
  readonly waiting?: string;
  readonly counts: Readonly<Record<string, number>>;
}

const KINDS: Readonly<Record<string, ItemSummary["kind"]>> = {
  run: "run",
  conversation: "conversation",
  task: "task",
};

/** What a list reads of each state item: its summary and list keys, not its data. */
const SUMMARY_ATTRIBUTES = [
  StateAttr.pk,
  ...STATE_SUMMARY_ATTRIBUTES,
  StateAttr.tenant,
  StateAttr.updatedAt,
  StateAttr.listedAt,
  StateAttr.waitingSince,
];

/**
 * How many of a list's newest entries a list for one tenant looks through at most: the indexes
 * are not partitioned by tenant, so another tenant's entries are read and left out.
 */
export const TENANT_LOOKBACK = 5000;

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

function rowOf(item: Record<string, unknown>): SummaryRow {
  const kind = String(item[StateAttr.kind]);
  const optional = {
    label: text(item[StateAttr.label]),
    waiting: text(item[StateAttr.waiting]),
    listedAt: text(item[StateAttr.listedAt]),
    waitingSince: text(item[StateAttr.waitingSince]),
  };
  return {
    kind: KINDS[kind] ?? "task",
    id: String(item[StateAttr.aggId]),
    status: String(item[StateAttr.status]),
    updatedAt: String(item[StateAttr.updatedAt]),
    // A state whose role records no tenant, or from before tenants, is the default tenant's.
    tenant: text(item[StateAttr.tenant]) ?? DEFAULT_TENANT,
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
    counts: (item[StateAttr.counts] as Record<string, number> | undefined) ?? {},
  };
}

type ListedBy = { readonly kind: string } | { readonly waiting: string };

/** Which list to read: the index, its partition, and the states' tenant (all without one). */
interface ListQuery {
  readonly attribute: string;
  readonly value: string;
  readonly index: string;
  readonly legacy: string;
  readonly tenant?: string;
}

/**
 * The newest summarized states of one kind (by when they were first summarized) or waiting for
 * one thing (by since when), at most `limit`; with `tenant`, that tenant's only (looking through
 * at most TENANT_LOOKBACK entries). The list indexes keep keys only, so that a state's writes leave
 * them alone: the summaries are read from the items (BatchGetItem), and a state that has left the
 * list since the index saw it is left out. A stack still upgrading (`agentbus:listIndexUpgrade`)
 * may not have the new index yet: the legacy one is read instead.
 */
export async function summaries(
  stack: OpsStack,
  by: ListedBy,
  limit = 50,
  tenant?: string,
): Promise<SummaryRow[]> {
  const query: ListQuery =
    "kind" in by
      ? {
          attribute: StateAttr.kind,
          value: by.kind,
          index: StateIndex.byKind,
          legacy: LegacyStateIndex.byKind,
        }
      : {
          attribute: StateAttr.waiting,
          value: by.waiting,
          index: StateIndex.byWaiting,
          legacy: LegacyStateIndex.byWaiting,
        };
  return listed(stack, tenant === undefined ? query : { ...query, tenant }, limit);
}

async function listed(stack: OpsStack, query: ListQuery, limit: number): Promise<SummaryRow[]> {
  const rows: SummaryRow[] = [];
  const lookback = query.tenant === undefined ? limit : Math.max(limit, TENANT_LOOKBACK);
  let index = query.index;
  let seen = 0;
  let start: Record<string, never> | undefined;
  for (;;) {
    const wanted = query.tenant === undefined ? limit - rows.length : 100;
    const size = Math.min(100, wanted, lookback - seen);
    let page: IndexPage;
    try {
      page = await indexPage(stack, index, query, size, start);
    } catch (error) {
      if (seen > 0 || index === query.legacy || !missingIndex(error)) throw error;
      index = query.legacy;
      continue;
    }
    seen += page.keys.length;
    rows.push(...(await rowsOf(stack, query, page.keys)));
    start = page.next;
    if (!start || rows.length >= limit || seen >= lookback) return rows.slice(0, limit);
  }
}

/** The current summaries of the listed keys still in the list (and of the tenant, if named). */
async function rowsOf(
  stack: OpsStack,
  query: ListQuery,
  keys: readonly Record<string, unknown>[],
): Promise<SummaryRow[]> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.state,
    keys.map((k) => ({ [StateAttr.pk]: { S: String(k[StateAttr.pk]) } })),
    { attributes: SUMMARY_ATTRIBUTES },
  );
  const byPk = new Map(items.map((item) => [String(item[StateAttr.pk]), item]));
  return keys.flatMap((k) => {
    const item = byPk.get(String(k[StateAttr.pk]));
    if (!item || item[query.attribute] !== query.value) return [];
    const row = rowOf(item);
    return query.tenant === undefined || row.tenant === query.tenant ? [row] : [];
  });
}

interface IndexPage {
  readonly keys: Record<string, unknown>[];
  readonly next?: Record<string, never>;
}

/** One page of an index's partition, newest first. */
async function indexPage(
  stack: OpsStack,
  index: string,
  query: ListQuery,
  limit: number,
  start: Record<string, never> | undefined,
): Promise<IndexPage> {
  const page = await stack.dynamodb.send(
    new QueryCommand({
      TableName: stack.names.tables.state,
      IndexName: index,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": query.attribute },
      ExpressionAttributeValues: { ":k": { S: query.value } },
      ScanIndexForward: false,
      Limit: limit,
      ExclusiveStartKey: start,
    }),
  );
  const keys = (page.Items ?? []).map((item) => unmarshall(item));
  return page.LastEvaluatedKey ? { keys, next: page.LastEvaluatedKey as never } : { keys };
}

function sideEffectOf(item: Record<string, unknown>): SideEffectView {
  return {
    key: String(item[SideEffectAttr.effectKey]),
    state: item.state as SideEffectView["state"],
    attempts: Number(item.attempts ?? 0),
    updatedAt: String(item.updated_at),
    ...(typeof item.task_id === "string" ? { taskId: item.task_id } : {}),
  };
}

/**
 * The tenant of a task: the one its events name (the first root the events table's task-roots
 * index holds for it, read by its key), the default tenant when that names none; undefined when no
 * event of the task is stored.
 */
export async function taskTenant(stack: OpsStack, taskId: string): Promise<string | undefined> {
  const query = (index: string) =>
    stack.dynamodb.send(
      new QueryCommand({
        TableName: stack.names.tables.events,
        IndexName: index,
        KeyConditionExpression: "#k = :k",
        ExpressionAttributeNames: { "#k": EventAttr.taskId },
        ExpressionAttributeValues: { ":k": { S: taskId } },
        Limit: 1,
      }),
    );
  // A stack still upgrading (`agentbus:traceIndexUpgrade`) may not have task-roots yet.
  const page = await query(EventIndex.taskRoots).catch((error: unknown) => {
    if (!missingIndex(error)) throw error;
    return query(LegacyTraceIndex.byTask);
  });
  const root = page.Items?.[0];
  if (!root) return undefined;
  const [item] = await batchGetItems(fromSdk(stack.dynamodb), stack.names.tables.events, [
    {
      [EventAttr.pk]: root[EventAttr.pk] as AttributeValue,
      [EventAttr.version]: root[EventAttr.version] as AttributeValue,
    },
  ]);
  return item ? tenantOf(envelopeOfItem(item)) : undefined;
}

/**
 * Side-effect records whose outcome is unknown, newest first (the by-open-state index), at most
 * `limit`; with `tenant`, those of the newest `limit` whose task is that tenant's (a record names
 * no tenant: each task's is read with taskTenant, one Query each).
 */
export async function unknownSideEffects(
  stack: OpsStack,
  limit = 100,
  tenant?: string,
): Promise<SideEffectView[]> {
  const open = await unknownRecords(stack, limit);
  if (tenant === undefined) return open;
  const tenants = new Map<string, Promise<string | undefined>>();
  const named = await Promise.all(
    open.map(async (record) => {
      const { taskId } = record;
      if (taskId === undefined) return record;
      if (!tenants.has(taskId)) tenants.set(taskId, taskTenant(stack, taskId));
      const found = await tenants.get(taskId);
      return found === undefined ? record : { ...record, tenant: found };
    }),
  );
  return named.filter((record) => record.tenant === tenant);
}

async function unknownRecords(stack: OpsStack, limit: number): Promise<SideEffectView[]> {
  const page = await stack.dynamodb.send(
    new QueryCommand({
      TableName: stack.names.tables.sideEffects,
      IndexName: SideEffectIndex.byOpenState,
      KeyConditionExpression: "#k = :k",
      ExpressionAttributeNames: { "#k": SideEffectAttr.openState },
      ExpressionAttributeValues: { ":k": { S: "unknown" } },
      ScanIndexForward: false,
      Limit: limit,
    }),
  );
  return (page.Items ?? []).map((item) => sideEffectOf(unmarshall(item)));
}

/** Side-effect records by key (BatchGetItem, 100 keys per call; unknown keys left out). */
export async function sideEffectsByKey(
  stack: OpsStack,
  keys: readonly string[],
): Promise<SideEffectView[]> {
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.sideEffects,
    keys.map((k) => ({ [SideEffectAttr.effectKey]: { S: k } })),
  );
  return items.map(sideEffectOf);
}
