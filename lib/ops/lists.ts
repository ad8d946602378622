import { QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { batchGetItems } from "../../functions/adapters/dynamodb/reads";
import {
  SideEffectAttr,
  SideEffectIndex,
  StateAttr,
  StateIndex,
} from "../../functions/adapters/dynamodb/tables";
import { fromSdk } from "../aws/from-sdk";
import type { OpsStack } from "./stack";
import type { ItemSummary, SideEffectView } from "./views";

/** A summarized state as the by-kind / by-waiting indexes project it. */
export interface SummaryRow extends ItemSummary {
  readonly waiting?: string;
  readonly counts: Readonly<Record<string, number>>;
}

const KINDS: Readonly<Record<string, ItemSummary["kind"]>> = {
  run: "run",
  conversation: "conversation",
  task: "task",
};

function rowOf(item: Record<string, unknown>): SummaryRow {
  const kind = String(item[StateAttr.kind]);
  return {
    kind: KINDS[kind] ?? "task",
    id: String(item[StateAttr.aggId]),
    status: String(item[StateAttr.status]),
    updatedAt: String(item[StateAttr.updatedAt]),
    ...(typeof item[StateAttr.label] === "string"
      ? { label: item[StateAttr.label] as string }
      : {}),
    ...(typeof item[StateAttr.waiting] === "string"
      ? { waiting: item[StateAttr.waiting] as string }
      : {}),
    counts: (item[StateAttr.counts] as Record<string, number> | undefined) ?? {},
  };
}

/** The newest summarized states of one kind or waiting for one thing (an index Query). */
export async function summaries(
  stack: OpsStack,
  by: { readonly kind: string } | { readonly waiting: string },
  limit = 50,
): Promise<SummaryRow[]> {
  const [index, attribute, value] =
    "kind" in by
      ? [StateIndex.byKind, StateAttr.kind, by.kind]
      : [StateIndex.byWaiting, StateAttr.waiting, by.waiting];
  const rows: SummaryRow[] = [];
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
    for (const item of page.Items ?? []) rows.push(rowOf(unmarshall(item)));
    start = page.LastEvaluatedKey as typeof start;
  } while (start && rows.length < limit);
  return rows;
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
