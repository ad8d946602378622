import { marshall } from "@aws-sdk/util-dynamodb";
import type { FailureLog, FailureRecord } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { PutItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { failureItem } from "./items";

/**
 * Failure records in the inbox table (`failure#<group>#<event id>`, with the inbox rows' TTL): one
 * unconditional PutItem per failed delivery, so the record holds the last error and attempt.
 */
export class DynamoFailureLog implements FailureLog {
  constructor(
    private readonly client: AwsClient,
    private readonly table: string,
  ) {}

  async record(failure: FailureRecord): Promise<void> {
    try {
      await this.client.send(
        PutItem({
          TableName: this.table,
          Item: marshall(failureItem(failure), { removeUndefinedValues: true }),
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "PutItem");
    }
  }
}
