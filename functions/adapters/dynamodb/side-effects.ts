import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { AgentBusError } from "../../core/errors";
import {
  type SideEffectError,
  type SideEffectMeta,
  type SideEffectRecord,
  type SideEffectResult,
  type SideEffectState,
  type SideEffectStore,
  SideEffectTransitionError,
  TRANSITIONS_FROM,
} from "../../core/side-effects";
import type { AwsClient } from "../aws/client";
import { GetItem, UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { SideEffectAttr } from "./tables";

/**
 * The SideEffectStore on the side-effects table (partition key `effect_key`). One item per key:
 * `effect_key`, `state`, `attempts` (N), `created_at`, `updated_at`, `task_id`, `kind`, and
 * `result` / `error` (maps) once known; `operation` (S) once a call started long-running work.
 *
 * - `claim` is one UpdateItem: the `if_not_exists` SETs create the item as `pending` only when it
 *   is absent and `ADD attempts 1` counts the claim, atomically, returning the item after the
 *   update; concurrent claims of one key each get a distinct attempts value.
 * - a transition is an UpdateItem with `attribute_exists(effect_key) AND state IN (<allowed>)`
 *   (side-effects.ts TRANSITIONS_FROM). When the condition fails the stored item (returned by the
 *   failed check) decides: the same final state -> a no-op returning it; absent -> error
 *   `side_effect.not_found`; else `side_effect.invalid_transition` (both SideEffectTransitionError,
 *   class permanent).
 * - throttling and outages -> TransientError, validation -> PermanentError (as the event store).
 */

export interface DynamoSideEffectsOptions {
  readonly client: AwsClient;
  readonly tableName: string;
}

const KEY = SideEffectAttr.effectKey;

type Item = Record<string, AttributeValue>;

export class DynamoSideEffects implements SideEffectStore {
  private readonly client: AwsClient;
  private readonly tableName: string;

  constructor(options: DynamoSideEffectsOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  async claim(key: string, meta: SideEffectMeta, now: Date): Promise<SideEffectRecord> {
    const at = now.toISOString();
    try {
      const output = await this.client.send(
        UpdateItem({
          TableName: this.tableName,
          Key: { [KEY]: { S: key } },
          UpdateExpression:
            "SET #state = if_not_exists(#state, :pending), #created = if_not_exists(#created, :now), " +
            "#task = if_not_exists(#task, :task), #kind = if_not_exists(#kind, :kind), #updated = :now " +
            "ADD #attempts :one",
          ExpressionAttributeNames: {
            "#state": "state",
            "#created": "created_at",
            "#updated": "updated_at",
            "#task": "task_id",
            "#kind": "kind",
            "#attempts": "attempts",
          },
          ExpressionAttributeValues: {
            ":pending": { S: "pending" },
            ":now": { S: at },
            ":task": { S: meta.task_id },
            ":kind": { S: meta.kind },
            ":one": { N: "1" },
          },
          ReturnValues: "ALL_NEW",
        }),
      );
      return recordOf(output.Attributes ?? {});
    } catch (error) {
      throw failure(error, "UpdateItem (claim)");
    }
  }

  async markSucceeded(key: string, result: SideEffectResult, now: Date): Promise<SideEffectRecord> {
    return this.transition(key, "succeeded", { result }, now);
  }

  async markFailed(key: string, error: SideEffectError, now: Date): Promise<SideEffectRecord> {
    return this.transition(key, "failed", { error }, now);
  }

  async markUnknown(key: string, error: SideEffectError, now: Date): Promise<SideEffectRecord> {
    return this.transition(key, "unknown", { error }, now);
  }

  /** Keeps the started work's id on a record still open: `attribute_exists AND state IN (pending, unknown)`. */
  async markStarted(key: string, operation: string, now: Date): Promise<SideEffectRecord> {
    try {
      const output = await this.client.send(
        UpdateItem({
          TableName: this.tableName,
          Key: { [KEY]: { S: key } },
          UpdateExpression: "SET #operation = :operation, #updated = :now",
          ConditionExpression: "attribute_exists(#key) AND #state IN (:pending, :unknown)",
          ExpressionAttributeNames: {
            "#key": KEY,
            "#state": "state",
            "#operation": "operation",
            "#updated": "updated_at",
          },
          ExpressionAttributeValues: {
            ":operation": { S: operation },
            ":now": { S: now.toISOString() },
            ":pending": { S: "pending" },
            ":unknown": { S: "unknown" },
          },
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return recordOf(output.Attributes ?? {});
    } catch (error) {
      if (!isNamed(error, "ConditionalCheckFailedException"))
        throw failure(error, "UpdateItem (started)");
      const returned = (error as { Item?: Item }).Item;
      const current = returned && Object.keys(returned).length > 0 ? recordOf(returned) : undefined;
      throw new SideEffectTransitionError(key, current?.state, "pending");
    }
  }

  /** The stored record, or undefined when the key was never claimed (strongly consistent). */
  async get(key: string): Promise<SideEffectRecord | undefined> {
    try {
      const output = await this.client.send(
        GetItem({
          TableName: this.tableName,
          Key: { [KEY]: { S: key } },
          ConsistentRead: true,
        }),
      );
      return output.Item ? recordOf(output.Item) : undefined;
    } catch (error) {
      throw failure(error, "GetItem");
    }
  }

  private async transition(
    key: string,
    to: "succeeded" | "failed" | "unknown",
    change: { result?: SideEffectResult; error?: SideEffectError },
    now: Date,
  ): Promise<SideEffectRecord> {
    const from = TRANSITIONS_FROM[to];
    const values: Item = { ":to": { S: to }, ":now": { S: now.toISOString() } };
    from.forEach((state, i) => {
      values[`:from${i}`] = { S: state };
    });
    const sets = ["#state = :to", "#updated = :now"];
    const removes: string[] = [];
    const names: Record<string, string> = {
      "#key": KEY,
      "#state": "state",
      "#updated": "updated_at",
      "#result": "result",
      "#error": "error",
    };
    if (change.result) {
      sets.push("#result = :result");
      values[":result"] = { M: marshall(change.result) };
    } else removes.push("#result");
    if (change.error) {
      sets.push("#error = :error");
      values[":error"] = { M: marshall(change.error) };
    } else removes.push("#error");
    // The sparse by-open-state index lists the records a person must resolve.
    names["#open"] = SideEffectAttr.openState;
    if (to === "unknown") {
      sets.push("#open = :to");
    } else removes.push("#open");
    try {
      const output = await this.client.send(
        UpdateItem({
          TableName: this.tableName,
          Key: { [KEY]: { S: key } },
          UpdateExpression: `SET ${sets.join(", ")}${removes.length ? ` REMOVE ${removes.join(", ")}` : ""}`,
          ConditionExpression: `attribute_exists(#key) AND #state IN (${from.map((_, i) => `:from${i}`).join(", ")})`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValues: "ALL_NEW",
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return recordOf(output.Attributes ?? {});
    } catch (error) {
      if (!isNamed(error, "ConditionalCheckFailedException"))
        throw failure(error, `UpdateItem (${to})`);
      const returned = (error as { Item?: Item }).Item;
      const current =
        returned && Object.keys(returned).length > 0 ? recordOf(returned) : await this.get(key);
      if (current && current.state === to && (to === "succeeded" || to === "failed"))
        return current;
      throw new SideEffectTransitionError(key, current?.state, to);
    }
  }
}

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

function failure(error: unknown, operation: string): AgentBusError {
  return dynamoFailure(error, `${operation} on the side-effects table`);
}

function recordOf(item: Item): SideEffectRecord {
  const raw = unmarshall(item) as Record<string, unknown>;
  return {
    key: String(raw[KEY]),
    state: raw.state as SideEffectState,
    attempts: Number(raw.attempts ?? 0),
    created_at: String(raw.created_at),
    updated_at: String(raw.updated_at),
    task_id: String(raw.task_id),
    kind: String(raw.kind),
    ...(raw.result ? { result: raw.result as SideEffectResult } : {}),
    ...(raw.error ? { error: raw.error as SideEffectError } : {}),
    ...(typeof raw.operation === "string" ? { operation: raw.operation } : {}),
  };
}
