import { isDeepStrictEqual } from "node:util";
import type { IndexLayout } from "../../functions/adapters/dynamodb/layouts";

/**
 * A table's global secondary indexes as CloudFormation declares them, and what an update from one
 * set to another does to them: what the index-upgrade tests (list-indexes, trace-indexes) check
 * each stage of an upgrade with.
 */

export interface Gsi {
  readonly IndexName: string;
  readonly KeySchema: readonly { AttributeName: string; KeyType: string }[];
  readonly Projection: { ProjectionType: string; NonKeyAttributes?: string[] };
}

/** A layout as CloudFormation declares it (AWS::DynamoDB::Table GlobalSecondaryIndexes). */
export function asGsi(index: IndexLayout): Gsi {
  return {
    IndexName: index.name,
    KeySchema: [
      { AttributeName: index.partitionKey.name, KeyType: "HASH" },
      ...(index.sortKey ? [{ AttributeName: index.sortKey.name, KeyType: "RANGE" }] : []),
    ],
    Projection:
      typeof index.projection === "string"
        ? { ProjectionType: index.projection }
        : { ProjectionType: "INCLUDE", NonKeyAttributes: [...index.projection.include] },
  };
}

export const names = (indexes: readonly { IndexName: string }[]) => indexes.map((i) => i.IndexName);

/** The indexes an update from `before` to `after` creates, deletes, and changes in place. */
export function changes(before: readonly Gsi[], after: readonly Gsi[]) {
  const byName = (indexes: readonly Gsi[]) => new Map(indexes.map((i) => [i.IndexName, i]));
  const [was, is] = [byName(before), byName(after)];
  return {
    created: [...is.keys()].filter((name) => !was.has(name)),
    deleted: [...was.keys()].filter((name) => !is.has(name)),
    changed: [...is.keys()].filter(
      (name) => was.has(name) && !isDeepStrictEqual(was.get(name), is.get(name)),
    ),
  };
}
