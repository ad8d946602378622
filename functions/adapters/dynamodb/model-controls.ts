import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import type { ModelScope, Spend } from "../../core/model";
import {
  type ControlReading,
  type DaySpend,
  DEFAULT_MODEL_BUDGETS,
  dayOf,
  type ModelBudgets,
  type ModelControls,
  noSpend,
  type OperatorStop,
  type StopRecords,
} from "../../core/model-guard";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem, UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { batchGetByPk } from "./reads";
import { StateAttr } from "./tables";

export interface DynamoModelControlsOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
  /** @default DEFAULT_MODEL_BUDGETS */
  readonly budgets?: ModelBudgets;
}

/** How long a tenant's day of spend is kept (the table's `ttl`), in days. */
export const SPEND_KEPT_DAYS = 35;

/** The item of the stop of a tenant or a run. */
export function stopKey(scope: OperatorStop["scope"], id: string): string {
  return `operator_stop#${scope}#${id}`;
}

/** The item of a tenant's model spend on a UTC day. */
export function spendKey(tenant: string, day: string): string {
  return `model_spend#${tenant}#${day}`;
}

/**
 * The stops and the model spend (functions/core/model-guard.ts) on the state table, items of
 * their own beside the aggregates' (no index attribute, so each write bills one write unit per KB):
 *
 * - a stop: `operator_stop#<tenant|run>#<id>`, put with a condition that none stands (a stop that
 *   stands is answered, not overwritten); the resume marks it lifted (`lifted_by`, `lifted_at`,
 *   on the condition that it stands), so the item says who stopped and who resumed it last;
 * - a tenant's day: `model_spend#<tenant>#<day>`, tokens, millionths of a US$ and calls, plus the
 *   minute of its latest call and that minute's calls. A model call adds to it with one UpdateItem
 *   (ADD) on the condition that the item's minute is the call's; the first call of a minute finds
 *   another and sets it with a second UpdateItem. So a call costs one write unit, the first of
 *   each minute two (the failed condition bills one). Two first calls of a minute at once both set
 *   the minute to 1: the count of that minute may be one short, which a rate budget can bear.
 *
 * `read` is one strongly consistent BatchGetItem of the tenant's stop, the run's, and the day:
 * a stop committed before it is seen by it.
 */
export class DynamoModelControls implements ModelControls, StopRecords {
  private readonly budgets: ModelBudgets;

  constructor(private readonly options: DynamoModelControlsOptions) {
    this.budgets = options.budgets ?? DEFAULT_MODEL_BUDGETS;
  }

  async read(scope: ModelScope, now: Date): Promise<ControlReading> {
    const { tableName: table, client } = this.options;
    const day = spendKey(scope.tenant, dayOf(now).day);
    const keys = [
      stopKey("tenant", scope.tenant),
      ...(scope.run ? [stopKey("run", scope.run)] : []),
    ];
    const found = await batchGetByPk(
      client,
      [...keys, day].map((pk) => ({ table, pk })),
      true,
    );
    const items = found.get(table) ?? [];
    const stops = items
      .filter((i) => keys.includes(String(i[StateAttr.pk])) && standing(i))
      .map(stopOfItem);
    const spent = items.find((i) => i[StateAttr.pk] === day);
    return { stops, tenantDay: spent ? daySpendOf(spent) : noSpend(now), budgets: this.budgets };
  }

  async spend(scope: ModelScope, spent: Spend, now: Date): Promise<void> {
    const { day, minute } = dayOf(now);
    const base = {
      TableName: this.options.tableName,
      Key: { [StateAttr.pk]: { S: spendKey(scope.tenant, day) } },
      ExpressionAttributeNames: {
        "#tokens": "tokens",
        "#micros": "micros",
        "#calls": "calls",
        "#minute": "minute",
        "#minuteCalls": "minute_calls",
      },
    };
    const values: Record<string, AttributeValue> = {
      ":tokens": { N: String(spent.tokens) },
      ":micros": { N: String(spent.micros) },
      ":one": { N: "1" },
      ":minute": { S: minute },
    };
    const add = "ADD #tokens :tokens, #micros :micros, #calls :one";
    try {
      await this.options.client.send(
        UpdateItem({
          ...base,
          UpdateExpression: `${add}, #minuteCalls :one`,
          ConditionExpression: "#minute = :minute",
          ExpressionAttributeValues: values,
        }),
      );
      return;
    } catch (error) {
      if (!isConditionFailed(error)) throw dynamoFailure(error, "UpdateItem (model spend)");
    }
    const ttl = Math.ceil(now.getTime() / 1000) + SPEND_KEPT_DAYS * 86_400;
    try {
      await this.options.client.send(
        UpdateItem({
          ...base,
          UpdateExpression: `${add} SET #minute = :minute, #minuteCalls = :one, #ttl = :ttl`,
          ExpressionAttributeNames: { ...base.ExpressionAttributeNames, "#ttl": StateAttr.ttl },
          ExpressionAttributeValues: { ...values, ":ttl": { N: String(ttl) } },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "UpdateItem (model spend, a new minute)");
    }
  }

  async stop(stop: OperatorStop) {
    const { client, tableName } = this.options;
    try {
      await client.send(
        PutItem({
          TableName: tableName,
          Item: {
            [StateAttr.pk]: { S: stopKey(stop.scope, stop.id) },
            scope: { S: stop.scope },
            id: { S: stop.id },
            by: { S: stop.by },
            at: { S: stop.at },
            ...(stop.reason === undefined ? {} : { reason: { S: stop.reason } }),
          },
          ConditionExpression: "attribute_not_exists(#pk) OR attribute_exists(#lifted)",
          ExpressionAttributeNames: { "#pk": StateAttr.pk, "#lifted": "lifted_at" },
        }),
      );
      return { standing: stop, recorded: true };
    } catch (error) {
      if (!isConditionFailed(error)) throw dynamoFailure(error, "PutItem (operator stop)");
    }
    const standing = await this.stopOf(stop.scope, stop.id);
    return { standing: standing ?? stop, recorded: false };
  }

  async resume(scope: OperatorStop["scope"], id: string, by: string, at: Date) {
    try {
      const out = await this.options.client.send(
        UpdateItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: stopKey(scope, id) } },
          UpdateExpression: "SET #liftedBy = :by, #lifted = :at",
          ConditionExpression: "attribute_exists(#pk) AND attribute_not_exists(#lifted)",
          ExpressionAttributeNames: {
            "#pk": StateAttr.pk,
            "#lifted": "lifted_at",
            "#liftedBy": "lifted_by",
          },
          ExpressionAttributeValues: { ":by": { S: by }, ":at": { S: at.toISOString() } },
          ReturnValues: "ALL_OLD",
        }),
      );
      return out.Attributes ? stopOfItem(unmarshall(out.Attributes)) : undefined;
    } catch (error) {
      if (isConditionFailed(error)) return undefined;
      throw dynamoFailure(error, "UpdateItem (operator stop lifted)");
    }
  }

  async stopOf(scope: OperatorStop["scope"], id: string) {
    try {
      const out = await this.options.client.send(
        GetItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: stopKey(scope, id) } },
          ConsistentRead: true,
        }),
      );
      const item = out.Item && unmarshall(out.Item);
      return item && standing(item) ? stopOfItem(item) : undefined;
    } catch (error) {
      throw dynamoFailure(error, "GetItem (operator stop)");
    }
  }
}

/** A stop item that has not been lifted. */
function standing(item: Record<string, unknown>): boolean {
  return item.lifted_at === undefined;
}

function isConditionFailed(error: unknown): boolean {
  return error instanceof Error && error.name === "ConditionalCheckFailedException";
}

function stopOfItem(item: Record<string, unknown>): OperatorStop {
  return {
    scope: item.scope === "run" ? "run" : "tenant",
    id: String(item.id),
    by: String(item.by),
    at: String(item.at),
    ...(typeof item.reason === "string" ? { reason: item.reason } : {}),
  };
}

function daySpendOf(item: Record<string, unknown>): DaySpend {
  const pk = String(item[StateAttr.pk]);
  return {
    day: pk.slice(pk.lastIndexOf("#") + 1),
    tokens: Number(item.tokens ?? 0),
    micros: Number(item.micros ?? 0),
    calls: Number(item.calls ?? 0),
    ...(typeof item.minute === "string"
      ? { minute: item.minute, minuteCalls: Number(item.minute_calls ?? 0) }
      : {}),
  };
}
