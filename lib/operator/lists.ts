import { QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { batchGetItems } from "../../functions/adapters/dynamodb/reads";
import {
  LegacyStateIndex,
  SideEffectAttr,
  SideEffectIndex,
  STATE_SUMMARY_ATTRIBUTES,
  StateAttr,
  StateIndex,
} from "../../functions/adapters/dynamodb/tables";
import { fromSdk } from "./from-sdk";
import type { OpsStack } from "./stack";
import type { ItemSummary, SideEffectView } from "./views";

/** A summarized state in the operator's lists: its summary and list keys. */
export interface SummaryRow extends ItemSummary {
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
  StateAttr.updatedAt,
  StateAttr.listedAt,
  StateAttr.waitingSince,
];

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
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
    counts: (item[StateAttr.counts] as Record<string, number> | undefined) ?? {},
  };
}

type ListedBy = { readonly kind: string } | { readonly waiting: string };

/**
 * The newest summarized states of one kind (by when they were first summarized) or waiting for
 * one thing (by since when), at most `limit`. The list indexes keep keys only, so that a state's
 * writes leave them alone: the summaries are read from the items (BatchGetItem), and a state that
 * has left the list since the index saw it is left out. A stack still upgrading
 * (`agentbus:listIndexUpgrade`) may not have the new index yet: the legacy one is read instead.
 */
export async function summaries(stack: OpsStack, by: ListedBy, limit = 50): Promise<SummaryRow[]> {
  const [attribute, value] =
    "kind" in by ? [StateAttr.kind, by.kind] : [StateAttr.waiting, by.waiting];
  const index = "kind" in by ? StateIndex.byKind : StateIndex.byWaiting;
  let keys: Record<string, unknown>[];
  try {
    keys = await newestOf(stack, index, attribute, value, limit);
  } catch (error) {
    if (!missingIndex(error)) throw error;
    const legacy = "kind" in by ? LegacyStateIndex.byKind : LegacyStateIndex.byWaiting;
    return (await newestOf(stack, legacy, attribute, value, limit)).map(rowOf);
  }
  const items = await batchGetItems(
    fromSdk(stack.dynamodb),
    stack.names.tables.state,
    keys.map((k) => ({ [StateAttr.pk]: { S: String(k[StateAttr.pk]) } })),
    { attributes: SUMMARY_ATTRIBUTES },
  );
  const byPk = new Map(items.map((item) => [String(item[StateAttr.pk]), item]));
  return keys.flatMap((k) => {
    const item = byPk.get(String(k[StateAttr.pk]));
    return item && item[attribute] === value ? [rowOf(item)] : [];
  });
}

/** The first `limit` entries of an index's partition, newest first (Query pages). */
async function newestOf(
  stack: OpsStack,
  index: string,
  attribute: string,
  value: string,
  limit: number,
): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  let start: Record<string, never> | undefined;
  do {
    const page = await stack.dynamodb.send(
      new QueryCommand({
        TableName: stack.names.tables.state,
        IndexName: index,
        KeyConditionExpression: "#k = :k",
        ExpressionAttributeNames: { "#k": attribute },
        ExpressionAttributeValues: { ":k": { S: value } },
        ScanIndexForward: false,
        Limit: Math.min(100, limit - rows.length),
        ExclusiveStartKey: start,
      }),
    );
    for (const item of page.Items ?? []) rows.push(unmarshall(item));
    start = page.LastEvaluatedKey as typeof start;
  } while (start && rows.length < limit);
  return rows;
}

/**
 * The answer to a Query of an index the table does not have: DynamoDB's ValidationException "The
 * table does not have the specified index", or moto's "Invalid index" (a ResourceNotFound there).
 */
function missingIndex(error: unknown): boolean {
  const { name, message } = (error ?? {}) as { name?: unknown; message?: unknown };
  return (
    (name === "ValidationException" || name === "ResourceNotFoundException") &&
    /specified index|invalid index/i.test(String(message))
  );
}

function sideEffectOf(item: Record<string, unknown>): SideEffectView {
  return {
    key: String(item[SideEffectAttr.effectKey]),
    state: item.state as SideEffectView["state"],
    attempts: Number(item.attempts ?? 0),
    updatedAt: String(item.updated_at),
  };
}

/** Side-effect records whose outcome is unknown, newest first (the by-open-state index). */
export async function unknownSideEffects(stack: OpsStack, limit = 100): Promise<SideEffectView[]> {
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
