import type { TenantLimits } from "../../front-door/limits";
import { minuteOf } from "../../front-door/limits";
import type { AwsClient } from "../aws/client";
import { UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

export interface DynamoTenantLimitsOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/**
 * The front door's per-tenant cap (functions/front-door/limits.ts) on the state table: one item
 * per tenant and minute, `pk` = `tenant_rate#<tenant>#<minute>`, counted by one conditional
 * UpdateItem (ADD, only while the count is under the cap) that expires on the table's `ttl` an
 * hour later. No index attribute, so one write unit per request; a refused request costs the
 * failed condition's write unit and counts nothing.
 */
export class DynamoTenantLimits implements TenantLimits {
  constructor(private readonly options: DynamoTenantLimitsOptions) {}

  async take(tenant: string, now: Date, perMinute: number) {
    const { minute, secondsLeft } = minuteOf(now);
    try {
      await this.options.client.send(
        UpdateItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: `tenant_rate#${tenant}#${minute}` } },
          UpdateExpression: "ADD #count :one SET #ttl = if_not_exists(#ttl, :ttl)",
          ConditionExpression: "attribute_not_exists(#count) OR #count < :cap",
          ExpressionAttributeNames: { "#count": "count", "#ttl": StateAttr.ttl },
          ExpressionAttributeValues: {
            ":one": { N: "1" },
            ":cap": { N: String(perMinute) },
            ":ttl": { N: String(Math.ceil(now.getTime() / 1000) + 3600) },
          },
        }),
      );
      return { ok: true as const };
    } catch (error) {
      if (error instanceof Error && error.name === "ConditionalCheckFailedException")
        return { retryAfterSeconds: secondsLeft };
      throw dynamoFailure(error, "UpdateItem (tenant rate) on the state table");
    }
  }
}
