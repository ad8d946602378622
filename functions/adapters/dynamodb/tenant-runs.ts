import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { RunStatus } from "../../core/dag/run";
import {
  newerFirst,
  type RunIndexEntry,
  type RunIndexPage,
  type RunPosition,
  type TenantRunIndex,
} from "../../front-door/run-list";
import { DAG_RUN } from "../../front-door/runs-in-flight";
import type { AwsClient } from "../aws/client";
import { Query } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { StateAttr, StateIndex, streamKey, TENANT_LISTED_KIND, tenantListKey } from "./tables";

export interface DynamoTenantRunIndexOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
}

/**
 * A tenant's runs on the state table's by-tenant-status index (functions/front-door/run-list.ts):
 * one Query per status asked, each of the partition `<tenant>#run#<status>` newest first
 * (ScanIndexForward false), from the position after `after` (ExclusiveStartKey: the index keys and
 * the item's `pk`, which need not be an entry of that partition), at most `limit` entries each;
 * the Queries go side by side and their entries are merged newest first. Keys only, eventually
 * consistent: an entry costs a few dozen bytes of a read unit, so a page of 100 over five
 * partitions reads under 10 KB (about 1.5 read units).
 */
export class DynamoTenantRunIndex implements TenantRunIndex {
  constructor(private readonly options: DynamoTenantRunIndexOptions) {}

  async page(
    tenant: string,
    statuses: readonly RunStatus[],
    limit: number,
    after?: RunPosition,
  ): Promise<RunIndexPage> {
    const pages = await Promise.all(
      statuses.map((status) =>
        this.partition(tenantListKey(tenant, TENANT_LISTED_KIND, status), limit, after),
      ),
    );
    const seen = new Set<string>();
    // A run whose status moved may be in two partitions for a moment (the index lags): once.
    const entries = pages
      .flatMap((p) => p.entries)
      .sort(newerFirst)
      .filter((entry) => !seen.has(entry.runId) && seen.add(entry.runId));
    return {
      entries: entries.slice(0, limit),
      more: entries.length > limit || pages.some((p) => p.more),
    };
  }

  private async partition(
    list: string,
    limit: number,
    after: RunPosition | undefined,
  ): Promise<RunIndexPage> {
    const start: Record<string, AttributeValue> | undefined = after && {
      [StateAttr.tenantList]: { S: list },
      [StateAttr.listedAt]: { S: after.listedAt },
      [StateAttr.pk]: { S: streamKey({ type: DAG_RUN, id: after.runId }) },
    };
    try {
      const output = await this.options.client.send(
        Query({
          TableName: this.options.tableName,
          IndexName: StateIndex.byTenantStatus,
          KeyConditionExpression: "#list = :list",
          ExpressionAttributeNames: { "#list": StateAttr.tenantList },
          ExpressionAttributeValues: { ":list": { S: list } },
          ScanIndexForward: false,
          Limit: limit,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      const entries = (output.Items ?? []).flatMap(entryOf);
      return { entries, more: output.LastEvaluatedKey !== undefined };
    } catch (error) {
      throw dynamoFailure(error, `Query of ${StateIndex.byTenantStatus} on the state table`);
    }
  }
}

/** A run's entry from an index item (`pk` = `dag_run#<run id>`); nothing for another key. */
function entryOf(item: Record<string, AttributeValue>): RunIndexEntry[] {
  const pk = item[StateAttr.pk]?.S;
  const listedAt = item[StateAttr.listedAt]?.S;
  const prefix = `${DAG_RUN}#`;
  if (pk === undefined || listedAt === undefined || !pk.startsWith(prefix)) return [];
  return [{ runId: pk.slice(prefix.length), listedAt }];
}
