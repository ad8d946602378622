import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { TaskPushConfigs, TaskPushRecord } from "../../front-door/a2a/push-configs";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

type Item = Record<string, AttributeValue>;

/** The state table's partition key of an A2A task's push notification configs. */
export function taskPushConfigsKey(runId: string): string {
  return `a2a_push#${runId}`;
}

export interface DynamoTaskPushConfigsOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/**
 * The A2A tasks' push records (functions/front-door/a2a/push-configs.ts) on the state table: one
 * item per task, `pk` = `a2a_push#<run id>`, with `tenant`, `record` (the configs, the state last
 * delivered and the recent failures, JSON: at most 5 configs of a few hundred bytes and 10
 * failures, a few KB) and `revision`. A read is strongly consistent; a write is a PutItem
 * conditional on the revision read. The item is in no index (no attribute of the table's sparse
 * indexes) and has no time to live, as the run's own item has none. A stack without A2A agents
 * writes none.
 */
export class DynamoTaskPushConfigs implements TaskPushConfigs {
  constructor(private readonly options: DynamoTaskPushConfigsOptions) {}

  async read(runId: string): Promise<TaskPushRecord | undefined> {
    try {
      const output = await this.options.client.send(
        GetItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: taskPushConfigsKey(runId) } },
          ConsistentRead: true,
        }),
      );
      return output.Item ? recordOf(output.Item) : undefined;
    } catch (error) {
      throw dynamoFailure(error, "GetItem (A2A push configs) on the state table");
    }
  }

  async write(runId: string, next: TaskPushRecord, expected: number | undefined) {
    const { revision, tenant, ...rest } = next;
    try {
      await this.options.client.send(
        PutItem({
          TableName: this.options.tableName,
          Item: {
            [StateAttr.pk]: { S: taskPushConfigsKey(runId) },
            tenant: { S: tenant },
            record: { S: JSON.stringify(rest) },
            revision: { N: String(revision) },
          },
          ConditionExpression:
            expected === undefined ? "attribute_not_exists(#pk)" : "#revision = :revision",
          ExpressionAttributeNames:
            expected === undefined ? { "#pk": StateAttr.pk } : { "#revision": "revision" },
          ...(expected === undefined
            ? {}
            : { ExpressionAttributeValues: { ":revision": { N: String(expected) } } }),
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof Error && error.name === "ConditionalCheckFailedException") return false;
      throw dynamoFailure(error, "PutItem (A2A push configs) on the state table");
    }
  }
}

function recordOf(item: Item): TaskPushRecord {
  const rest = JSON.parse(item.record?.S ?? "{}") as Partial<TaskPushRecord>;
  return {
    tenant: item.tenant?.S ?? "",
    configs: rest.configs ?? [],
    failures: rest.failures ?? [],
    ...(rest.delivered ? { delivered: rest.delivered } : {}),
    revision: Number(item.revision?.N ?? 0),
  };
}
