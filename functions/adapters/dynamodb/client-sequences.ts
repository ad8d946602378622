import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import {
  type ClientSequences,
  claimOn,
  type SequenceClaim,
  type SequenceOutcome,
  type SequenceRecord,
} from "../../front-door/client-seq";
import type { AwsClient } from "../aws/client";
import { GetItem, PutItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

type Item = Record<string, AttributeValue>;

/** The state table's partition key of a conversation's client sequences. */
export function clientSequencesKey(conversation: string): string {
  return `client_seq#${conversation}`;
}

export interface DynamoClientSequencesOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/** Rounds of read, decide and conditional write before a claim gives up (transiently). */
const ROUNDS = 5;

/**
 * The front door's client sequences (functions/front-door/client-seq.ts) on the state table: one
 * item per conversation, `pk` = `client_seq#<conversation id>`, with `highest`, `recent` (at most
 * 16 claims of about 45 bytes) and `revision`. A claim reads the item (strongly consistent: one
 * read unit) and writes it with a PutItem conditional on the revision it read (one write unit:
 * the item stays under 1 KB and has no attribute of the table's sparse indexes). A write that
 * loses the race gets the winner's item from the failed condition (ALL_OLD) and decides again.
 * A repeat or a refusal writes nothing. The item has no time to live: a conversation's sequences
 * must not start again at 1 while it keeps the last one it applied.
 */
export class DynamoClientSequences implements ClientSequences {
  constructor(private readonly options: DynamoClientSequencesOptions) {}

  async claim(conversation: string, claim: SequenceClaim): Promise<SequenceOutcome> {
    const pk = clientSequencesKey(conversation);
    let record = await this.get(pk);
    for (let round = 1; ; round++) {
      const { outcome, next } = claimOn(record, claim);
      if (!next) return outcome;
      const lost = await this.put(pk, next, record?.revision);
      if (!lost) return outcome;
      if (round >= ROUNDS) throw lost.error;
      record = lost.record ?? (await this.get(pk));
    }
  }

  private async put(
    pk: string,
    next: SequenceRecord,
    revision: number | undefined,
  ): Promise<{ error: Error; record: SequenceRecord | undefined } | undefined> {
    try {
      await this.options.client.send(
        PutItem({
          TableName: this.options.tableName,
          Item: {
            [StateAttr.pk]: { S: pk },
            highest: { N: String(next.highest) },
            recent: { L: next.recent.map((entry) => ({ S: entry })) },
            revision: { N: String(next.revision) },
          },
          ConditionExpression:
            revision === undefined ? "attribute_not_exists(#pk)" : "#revision = :revision",
          ExpressionAttributeNames:
            revision === undefined ? { "#pk": StateAttr.pk } : { "#revision": "revision" },
          ...(revision === undefined
            ? {}
            : { ExpressionAttributeValues: { ":revision": { N: String(revision) } } }),
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return undefined;
    } catch (error) {
      if (!(error instanceof Error && error.name === "ConditionalCheckFailedException"))
        throw dynamoFailure(error, "PutItem (client sequences) on the state table");
      const returned = (error as { Item?: Item }).Item;
      const record = returned && Object.keys(returned).length > 0 ? recordOf(returned) : undefined;
      return {
        error: dynamoFailure(error, "PutItem (client sequences) on the state table"),
        record,
      };
    }
  }

  private async get(pk: string): Promise<SequenceRecord | undefined> {
    try {
      const output = await this.options.client.send(
        GetItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: pk } },
          ConsistentRead: true,
        }),
      );
      return output.Item ? recordOf(output.Item) : undefined;
    } catch (error) {
      throw dynamoFailure(error, "GetItem (client sequences) on the state table");
    }
  }
}

function recordOf(item: Item): SequenceRecord {
  return {
    highest: Number(item.highest?.N ?? 0),
    recent: (item.recent?.L ?? []).flatMap((entry) => (entry.S ? [entry.S] : [])),
    revision: Number(item.revision?.N ?? 0),
  };
}
