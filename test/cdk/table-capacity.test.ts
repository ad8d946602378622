import { NestedStack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_TARGET_UTILIZATION_PERCENT,
  resolveCapacity,
} from "../../lib/infra/constructs/table-capacity";
import { AgentBusTables } from "../../lib/infra/constructs/tables";
import { FRONT_DOOR_CONTEXT, resources, synthesizeStack, testStack } from "./synth";

/**
 * `tablesCapacity`: the four tables billed on demand (the default) or provisioned, each table and
 * index auto scaled between its bounds toward a target utilization, the scaling in a nested stack.
 */

const PROVISIONED = { mode: "provisioned", maxWriteUnits: 200, maxReadUnits: 400 } as const;

function synthesized(capacity?: Parameters<typeof resolveCapacity>[0]) {
  const stack = testStack();
  const tables = new AgentBusTables(stack, "Tables", { capacity });
  const nested = stack.node.findAll().find((c): c is NestedStack => c instanceof NestedStack);
  return {
    tables,
    template: Template.fromStack(stack),
    scaling: nested ? Template.fromStack(nested) : undefined,
  };
}

type Gsi = { IndexName: string; ProvisionedThroughput?: unknown };

describe("the tables' capacity", () => {
  it("is on demand by default: no provisioned throughput, no scaling", () => {
    const { template, scaling } = synthesized();
    const tables = resources(template, "AWS::DynamoDB::Table");
    expect(tables).toHaveLength(4);
    for (const table of tables) {
      expect(table.Properties.BillingMode).toBe("PAY_PER_REQUEST");
      expect(table.Properties.ProvisionedThroughput).toBeUndefined();
    }
    expect(scaling).toBeUndefined();
  });

  it("provisioned: every table and index starts at the minimum and scales to its maximum at 70%", () => {
    const { template, scaling } = synthesized(PROVISIONED);
    const tables = resources(template, "AWS::DynamoDB::Table");
    const indexes = tables.flatMap((t) => (t.Properties.GlobalSecondaryIndexes ?? []) as Gsi[]);
    const minimum = { ReadCapacityUnits: 1, WriteCapacityUnits: 1 };
    for (const table of tables) {
      // CloudFormation's default billing mode: aws-cdk-lib leaves it out.
      expect(table.Properties.BillingMode ?? "PROVISIONED").toBe("PROVISIONED");
      expect(table.Properties.ProvisionedThroughput).toEqual(minimum);
    }
    for (const index of indexes) expect(index.ProvisionedThroughput).toEqual(minimum);
    if (!scaling) throw new Error("no scaling stack");
    // A read and a write target for each table and each index, each with its tracking policy.
    const targets = resources(scaling, "AWS::ApplicationAutoScaling::ScalableTarget");
    expect(targets).toHaveLength(2 * (tables.length + indexes.length));
    const dimensions = targets.map((t) => t.Properties.ScalableDimension).sort();
    expect(new Set(dimensions)).toEqual(
      new Set([
        "dynamodb:index:ReadCapacityUnits",
        "dynamodb:index:WriteCapacityUnits",
        "dynamodb:table:ReadCapacityUnits",
        "dynamodb:table:WriteCapacityUnits",
      ]),
    );
    for (const target of targets) {
      const write = String(target.Properties.ScalableDimension).includes("Write");
      expect(target.Properties).toMatchObject({
        MinCapacity: 1,
        MaxCapacity: write ? 200 : 400,
        ServiceNamespace: "dynamodb",
      });
    }
    const policies = resources(scaling, "AWS::ApplicationAutoScaling::ScalingPolicy");
    expect(policies).toHaveLength(targets.length);
    for (const policy of policies)
      expect(policy.Properties).toMatchObject({
        PolicyType: "TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration: {
          TargetValue: DEFAULT_TARGET_UTILIZATION_PERCENT,
        },
      });
  });

  it("keeps the stack with the front door under CloudFormation's 500 resources", () => {
    const { template } = synthesizeStack(
      { tablesCapacity: PROVISIONED },
      "AgentBus-capacity",
      FRONT_DOOR_CONTEXT,
    );
    const count = Object.keys((template.toJSON() as { Resources: object }).Resources).length;
    expect(count).toBeLessThan(499);
  });

  it("refuses a capacity DynamoDB cannot hold, naming every problem", () => {
    expect(() =>
      resolveCapacity({
        mode: "provisioned",
        maxWriteUnits: 0,
        maxReadUnits: 10.5,
        minReadUnits: 2,
        targetUtilizationPercent: 95,
      }),
    ).toThrow(
      "tablesCapacity is not a capacity DynamoDB can hold: maxWriteUnits must be a whole number no smaller than minWriteUnits (1); maxReadUnits must be a whole number no smaller than minReadUnits (2); targetUtilizationPercent must be between 20 and 90, not 95",
    );
    expect(resolveCapacity("on-demand")).toBeUndefined();
  });
});
