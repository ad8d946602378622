import { type DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { FailureLog, FailureRecord } from "../../core/ports";
import { dynamoFailure } from "./failure";
import { failureItem } from "./items";

/**
 * Failure records in the inbox table (`failure#<group>#<event id>`, with the inbox rows' TTL): one
 * unconditional PutItem per failed delivery, so the record holds the last error and attempt.
 */
export class DynamoFailureLog implements FailureLog {
  constructor(
    private readonly client: DynamoDBClient,
    private readonly table: string,
  ) {}

  async record(failure: FailureRecord): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: marshall(failureItem(failure), { removeUndefinedValues: true }),
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "PutItem");
    }
  }
}
