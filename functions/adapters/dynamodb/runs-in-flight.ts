import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CountedRun, RunAdded, RunsInFlight } from "../../front-door/runs-in-flight";
import type { AwsClient } from "../aws/client";
import { UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr } from "./tables";

type Item = Record<string, AttributeValue>;

export interface DynamoRunsInFlightOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/** The state table's partition key of a tenant's runs in flight. */
export function runsInFlightKey(tenant: string): string {
  return `tenant_runs#${tenant}`;
}

/**
 * Each tenant's runs in flight (functions/front-door/runs-in-flight.ts) on the state table: one
 * item per tenant, `pk` = `tenant_runs#<tenant>`, whose string set `runs` holds one
 * `<run id>@<since>` per counted run. A run is counted by one conditional UpdateItem (ADD, while
 * the set has fewer than the cap or holds it already) and taken out by one UpdateItem (DELETE,
 * which leaves alone what the set does not hold). The item is in no index and stays under 1 KB
 * at the default cap of 20 (about 45 bytes a run), so each costs one write unit. A refused add
 * reads the set from the failed condition (ReturnValuesOnConditionCheckFailure): no read.
 */
export class DynamoRunsInFlight implements RunsInFlight {
  constructor(private readonly options: DynamoRunsInFlightOptions) {}

  async add(tenant: string, run: CountedRun, cap: number): Promise<RunAdded> {
    const member = memberOf(run);
    try {
      await this.options.client.send(
        UpdateItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: runsInFlightKey(tenant) } },
          UpdateExpression: "ADD #runs :run",
          ConditionExpression:
            "attribute_not_exists(#runs) OR size(#runs) < :cap OR contains(#runs, :member)",
          ExpressionAttributeNames: { "#runs": "runs" },
          ExpressionAttributeValues: {
            ":run": { SS: [member] },
            ":member": { S: member },
            ":cap": { N: String(cap) },
          },
          ReturnValuesOnConditionCheckFailure: "ALL_OLD",
        }),
      );
      return { ok: true };
    } catch (error) {
      if (!(error instanceof Error && error.name === "ConditionalCheckFailedException"))
        throw dynamoFailure(error, "UpdateItem (runs in flight) on the state table");
      // The condition fails only on a full set, which the failed condition returns.
      const counted = (error as { Item?: Item }).Item?.runs?.SS;
      if (!counted)
        throw new Error("UpdateItem (runs in flight) was refused without the item it found");
      return { counted: counted.map(runOf) };
    }
  }

  async remove(tenant: string, runs: readonly CountedRun[]) {
    if (runs.length === 0) return;
    try {
      await this.options.client.send(
        UpdateItem({
          TableName: this.options.tableName,
          Key: { [StateAttr.pk]: { S: runsInFlightKey(tenant) } },
          UpdateExpression: "DELETE #runs :runs",
          ExpressionAttributeNames: { "#runs": "runs" },
          ExpressionAttributeValues: { ":runs": { SS: runs.map(memberOf) } },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "UpdateItem (runs in flight) on the state table");
    }
  }
}

function memberOf(run: CountedRun): string {
  return `${run.runId}@${run.since}`;
}

function runOf(member: string): CountedRun {
  const at = member.lastIndexOf("@");
  return { runId: member.slice(0, at), since: member.slice(at + 1) };
}
