import { marshall } from "@aws-sdk/util-dynamodb";
import type { StateRewriter } from "../../core/personal-data/erase";
import type { StoredState } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr, streamKey } from "./tables";

export interface DynamoStateRewriterOptions {
  readonly client: AwsClient;
  readonly stateTable: string;
}

/**
 * A state's data written again (its personal texts erased: functions/core/personal-data/erase.ts)
 * with one UpdateItem conditional on the revision read, which it moves on by one so that a
 * consumer's commit on the old revision fails and decides again. The data is written as a map
 * (a compact state's deflated copy removed); the gate records, version, due time and summary
 * stay as they are.
 */
export class DynamoStateRewriter implements StateRewriter {
  constructor(private readonly options: DynamoStateRewriterOptions) {}

  async rewriteState(state: StoredState, data: unknown): Promise<boolean> {
    try {
      await this.options.client.send(
        UpdateItem({
          TableName: this.options.stateTable,
          Key: { [StateAttr.pk]: { S: streamKey(state.aggregate) } },
          UpdateExpression: "SET #data = :data, #rev = :next REMOVE #data_z",
          ConditionExpression: "#rev = :rev",
          ExpressionAttributeNames: {
            "#data": StateAttr.data,
            "#data_z": StateAttr.dataDeflated,
            "#rev": StateAttr.revision,
          },
          ExpressionAttributeValues: marshall(
            { ":data": data, ":rev": state.revision, ":next": state.revision + 1 },
            { removeUndefinedValues: true },
          ),
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof Error && error.name === "ConditionalCheckFailedException") return false;
      throw dynamoFailure(error, "UpdateItem (erasure) on the state table");
    }
  }
}
