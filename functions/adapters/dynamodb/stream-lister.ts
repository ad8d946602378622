import type { StreamLister, StreamPage } from "../../core/ports";
import type { AwsClient } from "../aws/client";
import { Query } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { aggregateOfKey } from "./items";
import { EventAttr, EventIndex } from "./tables";

/**
 * The streams of an aggregate type, from the events table's sparse by-stream-type index (one
 * keys-only entry per stream, written with its first event), in stream key order. `next` is the
 * last stream key of the page.
 */
export class DynamoStreamLister implements StreamLister {
  constructor(
    private readonly client: AwsClient,
    private readonly table: string,
  ) {}

  async streamsOfType(type: string, after?: string, limit = 100): Promise<StreamPage> {
    try {
      const out = await this.client.send(
        Query({
          TableName: this.table,
          IndexName: EventIndex.byStreamType,
          KeyConditionExpression: after === undefined ? "#t = :t" : "#t = :t AND #pk > :after",
          ExpressionAttributeNames: {
            "#t": EventAttr.streamType,
            ...(after === undefined ? {} : { "#pk": EventAttr.pk }),
          },
          ExpressionAttributeValues: {
            ":t": { S: type },
            ...(after === undefined ? {} : { ":after": { S: after } }),
          },
          Limit: limit,
        }),
      );
      const keys = (out.Items ?? []).map((item) => item[EventAttr.pk]?.S ?? "");
      return {
        streams: keys.map(aggregateOfKey),
        ...(out.LastEvaluatedKey ? { next: keys.at(-1) } : {}),
      };
    } catch (error) {
      throw dynamoFailure(error, "Query (by-stream-type)");
    }
  }
}
