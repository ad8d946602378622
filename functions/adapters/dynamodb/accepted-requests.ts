import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { Envelope } from "../../../schemas";
import type { AcceptedRequest, AcceptedRequests } from "../../front-door/accepted";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

type Item = Record<string, AttributeValue>;

/** The state table's partition key of an accepted request. */
export function acceptedRequestKey(key: string): string {
  return `http_request#${key}`;
}

export interface DynamoAcceptedRequestsOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/**
 * The front door's accepted requests (functions/front-door/accepted.ts) on the state table: one
 * item per caller and Idempotency-Key, `pk` = `http_request#<tenant>#<sha256>`, written once by a
 * conditional PutItem and expiring on the table's `ttl`. Like the agents' content items, it has no
 * attribute of the table's sparse indexes, so it is written to the table alone (one write unit for
 * a message of a few KB), and its key is no aggregate's (an aggregate's id has a `_`, a tenant's
 * slug and a hex digest none).
 *
 * A put that finds the key taken reads the stored item from the failed condition
 * (ReturnValuesOnConditionCheckFailure), or with a strongly consistent GetItem when DynamoDB
 * returned none. `find` reads a key's item the same way (a strongly consistent GetItem).
 */
export class DynamoAcceptedRequests implements AcceptedRequests {
  private readonly client: AwsClient;
  private readonly tableName: string;

  constructor(options: DynamoAcceptedRequestsOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
  }

  async putIfAbsent(record: AcceptedRequest, expiresAt: Date): Promise<AcceptedRequest> {
    const pk = acceptedRequestKey(record.key);
    try {
      await this.client.send(
        PutItem({
          TableName: this.tableName,
          Item: {
            [StateAttr.pk]: { S: pk },
            request_sha256: { S: record.request_sha256 },
            envelope: { S: JSON.stringify(record.envelope) },
            response: { S: JSON.stringify(record.response) },
            accepted_at: { S: record.accepted_at },
            [StateAttr.ttl]: { N: String(Math.ceil(expiresAt.getTime() / 1000)) },
          },
          ConditionExpression: "attribute_not_exists(#pk)",
          ExpressionAttributeNames: { "#pk": StateAttr.pk },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return record;
    } catch (error) {
      if (!(error instanceof Error && error.name === "ConditionalCheckFailedException"))
        throw dynamoFailure(error, "PutItem (accepted request) on the state table");
      const returned = (error as { Item?: Item }).Item;
      const item = returned && Object.keys(returned).length > 0 ? returned : await this.get(pk);
      if (!item) throw dynamoFailure(error, "PutItem (accepted request) on the state table");
      return recordOf(record.key, item);
    }
  }

  async find(key: string): Promise<AcceptedRequest | undefined> {
    const item = await this.get(acceptedRequestKey(key));
    return item && recordOf(key, item);
  }

  private async get(pk: string): Promise<Item | undefined> {
    try {
      const output = await this.client.send(
        GetItem({
          TableName: this.tableName,
          Key: { [StateAttr.pk]: { S: pk } },
          ConsistentRead: true,
        }),
      );
      return output.Item;
    } catch (error) {
      throw dynamoFailure(error, "GetItem (accepted request) on the state table");
    }
  }
}

function recordOf(key: string, item: Item): AcceptedRequest {
  return {
    key,
    request_sha256: item.request_sha256?.S ?? "",
    envelope: JSON.parse(item.envelope?.S ?? "null") as Envelope,
    response: JSON.parse(item.response?.S ?? "{}") as Record<string, unknown>,
    accepted_at: item.accepted_at?.S ?? "",
  };
}
