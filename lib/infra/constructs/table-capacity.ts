import { NestedStack, Stack } from "aws-cdk-lib";
import {
  PredefinedMetric,
  ScalableTarget,
  ServiceNamespace,
} from "aws-cdk-lib/aws-applicationautoscaling";
import { BillingMode, type Table, type TableProps } from "aws-cdk-lib/aws-dynamodb";
import { Role } from "aws-cdk-lib/aws-iam";
import type { Construct } from "constructs";

/**
 * How the stack's four tables are billed for reads and writes (`tablesCapacity`):
 *
 * - `"on-demand"` (the default): per request, nothing to plan. Right for a new stack, an uneven
 *   load, and one that idles.
 * - provisioned, with auto scaling: each table and each of its indexes holds capacity between
 *   `min` and `max` units a second, kept near `targetUtilizationPercent` of what it uses. A unit
 *   held for an hour costs what about 1,040 on-demand writes do (us-east-1), so a sustained load
 *   pays well under half per write at the default 70% target. Every table and index keeps at least
 *   `min` units whatever the load (a fixed monthly cost), and a burst faster than auto scaling
 *   follows is throttled: AgentBus retries a throttled write as any transient failure (the
 *   message comes again after its backoff), so work is delayed, never lost.
 */
export type TablesCapacity = "on-demand" | ProvisionedCapacity;

export interface ProvisionedCapacity {
  readonly mode: "provisioned";
  /** Write capacity units a second each table and index may scale up to. */
  readonly maxWriteUnits: number;
  /** Read capacity units a second each table and index may scale up to. */
  readonly maxReadUnits: number;
  /** @default 1 */
  readonly minWriteUnits?: number;
  /** @default 1 */
  readonly minReadUnits?: number;
  /**
   * The share of the held capacity auto scaling keeps in use: higher is cheaper, lower leaves
   * more room for a burst. DynamoDB accepts 20 to 90.
   * @default 70
   */
  readonly targetUtilizationPercent?: number;
}

/** The target utilization auto scaling keeps when the stack names none. */
export const DEFAULT_TARGET_UTILIZATION_PERCENT = 70;

/** A provisioned capacity with its defaults filled in, checked. */
interface Resolved {
  readonly write: { readonly minCapacity: number; readonly maxCapacity: number };
  readonly read: { readonly minCapacity: number; readonly maxCapacity: number };
  readonly targetUtilizationPercent: number;
}

/** `capacity` checked, every problem named; undefined for on-demand. */
export function resolveCapacity(capacity: TablesCapacity | undefined): Resolved | undefined {
  if (capacity === undefined || capacity === "on-demand") return undefined;
  const write = { minCapacity: capacity.minWriteUnits ?? 1, maxCapacity: capacity.maxWriteUnits };
  const read = { minCapacity: capacity.minReadUnits ?? 1, maxCapacity: capacity.maxReadUnits };
  const target = capacity.targetUtilizationPercent ?? DEFAULT_TARGET_UTILIZATION_PERCENT;
  const problems: string[] = [];
  for (const [name, units] of [
    ["write", write],
    ["read", read],
  ] as const) {
    if (!Number.isInteger(units.minCapacity) || units.minCapacity < 1)
      problems.push(`min${title(name)}Units must be a whole number of at least 1`);
    if (!Number.isInteger(units.maxCapacity) || units.maxCapacity < units.minCapacity)
      problems.push(
        `max${title(name)}Units must be a whole number no smaller than min${title(name)}Units (${units.minCapacity})`,
      );
  }
  if (!Number.isFinite(target) || target < 20 || target > 90)
    problems.push(`targetUtilizationPercent must be between 20 and 90, not ${target}`);
  if (problems.length > 0)
    throw new Error(`tablesCapacity is not a capacity DynamoDB can hold: ${problems.join("; ")}`);
  return { write, read, targetUtilizationPercent: target };
}

const title = (word: string) => `${word[0]?.toUpperCase()}${word.slice(1)}`;

/** The table properties of the billing mode: on-demand, or provisioned at the minimum. */
export function billingProps(
  capacity: Resolved | undefined,
): Pick<TableProps, "billingMode" | "readCapacity" | "writeCapacity"> {
  if (!capacity) return { billingMode: BillingMode.PAY_PER_REQUEST };
  return {
    billingMode: BillingMode.PROVISIONED,
    readCapacity: capacity.read.minCapacity,
    writeCapacity: capacity.write.minCapacity,
  };
}

/** An index's capacity properties: none on-demand, the minimum provisioned. */
export function indexCapacityProps(capacity: Resolved | undefined): {
  readCapacity?: number;
  writeCapacity?: number;
} {
  return capacity
    ? { readCapacity: capacity.read.minCapacity, writeCapacity: capacity.write.minCapacity }
    : {};
}

/** A table and the names of its indexes, whose capacity auto scaling moves. */
export interface ScaledTable {
  readonly id: string;
  readonly table: Table;
  readonly indexNames: readonly string[];
}

/**
 * Auto scaling of each table's and each of its indexes' reads and writes toward the target: a
 * scalable target and a target-tracking policy for each, in a nested stack of their own. They are
 * some 70 resources, which would take the stack with the front door past CloudFormation's 500;
 * they hold no data, so they may live in a nested stack. Scaling acts through DynamoDB's
 * service-linked role for Application Auto Scaling, as aws-cdk-lib's own table scaling does.
 */
export function autoScale(
  scope: Construct,
  tables: readonly ScaledTable[],
  capacity: Resolved | undefined,
): void {
  if (!capacity) return;
  const stack = new NestedStack(scope, "Capacity", {
    description: "Auto scaling of the AgentBus tables' provisioned capacity",
  });
  const role = Role.fromRoleArn(
    stack,
    "ScalingRole",
    Stack.of(stack).formatArn({
      service: "iam",
      region: "",
      resource: "role/aws-service-role/dynamodb.application-autoscaling.amazonaws.com",
      resourceName: "AWSServiceRoleForApplicationAutoScaling_DynamoDBTable",
    }),
  );
  const scale = (id: string, resourceId: string, on: "table" | "index") => {
    for (const [dimension, units, metric] of [
      ["Read", capacity.read, PredefinedMetric.DYNAMODB_READ_CAPACITY_UTILIZATION],
      ["Write", capacity.write, PredefinedMetric.DYNAMODB_WRITE_CAPACITY_UTILIZATION],
    ] as const) {
      new ScalableTarget(stack, `${id}${dimension}`, {
        serviceNamespace: ServiceNamespace.DYNAMODB,
        resourceId,
        scalableDimension: `dynamodb:${on}:${dimension}CapacityUnits`,
        role,
        ...units,
      }).scaleToTrackMetric("Tracking", {
        targetValue: capacity.targetUtilizationPercent,
        predefinedMetric: metric,
      });
    }
  };
  for (const { id, table, indexNames } of tables) {
    scale(id, `table/${table.tableName}`, "table");
    for (const index of indexNames)
      scale(`${id}${pascal(index)}`, `table/${table.tableName}/index/${index}`, "index");
  }
}

/** `by-kind-listed` -> `ByKindListed`: a construct id part. */
const pascal = (name: string) =>
  name
    .split(/[^A-Za-z0-9]+/)
    .map((part) => title(part))
    .join("");
