import { describe, expect, it } from "vitest";
import { type IndexLayout, TABLES } from "../../functions/adapters/dynamodb/layouts";
import { resources, synthesizeStack } from "./synth";

const { template } = synthesizeStack();

interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
  readonly Resource: unknown;
}

/** The statements of the operator's read policy (or its repair policy). */
function operatorStatements(which: "Policy" | "RepairPolicy" = "Policy"): Statement[] {
  const [policy] = resources(template, "AWS::IAM::ManagedPolicy", (r) =>
    new RegExp(`^OperatorRead${which}[0-9A-F]{8}$`).test(r.id),
  );
  if (!policy) throw new Error(`no OperatorRead ${which} managed policy`);
  return (policy.Properties.PolicyDocument as { Statement: Statement[] }).Statement;
}

interface Index {
  IndexName: string;
  KeySchema: { AttributeName: string; KeyType: string }[];
  Projection: { ProjectionType: string; NonKeyAttributes?: string[] };
}

/** The GSIs of the table a construct id starts with, by name. */
function indexesOf(prefix: string): Map<string, Index> {
  const [table] = resources(template, "AWS::DynamoDB::Table", (r) => r.id.startsWith(prefix));
  return new Map(
    ((table?.Properties.GlobalSecondaryIndexes ?? []) as Index[]).map((i) => [i.IndexName, i]),
  );
}

const keys = (i: Index | undefined) => i?.KeySchema.map((k) => `${k.KeyType} ${k.AttributeName}`);

describe("what the operator tools read", () => {
  it("the stack's tables have the trace and list indexes the adapters' layout declares", () => {
    const layouts: Record<string, { readonly indexes: readonly IndexLayout[] }> = {
      TablesState: TABLES.state,
      TablesInbox: TABLES.inbox,
      TablesSideEffects: TABLES.sideEffects,
      TablesEvents: TABLES.events,
    };
    for (const [prefix, layout] of Object.entries(layouts)) {
      const deployed = indexesOf(prefix);
      expect([...deployed.keys()].sort(), prefix).toEqual(layout.indexes.map((i) => i.name).sort());
      for (const index of layout.indexes) {
        const found = deployed.get(index.name);
        expect(keys(found), `${prefix} ${index.name}`).toEqual([
          `HASH ${index.partitionKey.name}`,
          ...("sortKey" in index && index.sortKey ? [`RANGE ${index.sortKey.name}`] : []),
        ]);
        if (typeof index.projection === "string")
          expect(found?.Projection).toEqual({ ProjectionType: index.projection });
        else
          expect(found?.Projection).toEqual({
            ProjectionType: "INCLUDE",
            NonKeyAttributes: [...index.projection.include],
          });
      }
    }
  });

  it("the state table's lists are by-kind-listed, by-waiting-since and by-tenant-status, keys only, beside by-due", () => {
    const deployed = indexesOf("TablesState");
    expect([...deployed.keys()]).toEqual([
      "by-due",
      "by-kind-listed",
      "by-waiting-since",
      "by-tenant-status",
    ]);
    expect(keys(deployed.get("by-kind-listed"))).toEqual(["HASH kind", "RANGE listed_at"]);
    expect(keys(deployed.get("by-waiting-since"))).toEqual(["HASH waiting", "RANGE waiting_since"]);
    expect(keys(deployed.get("by-tenant-status"))).toEqual(["HASH tenant_list", "RANGE listed_at"]);
    for (const index of deployed.values())
      expect(index.Projection, index.IndexName).toEqual({ ProjectionType: "KEYS_ONLY" });
  });

  it("the read policy queries the state table's current list indexes, no legacy one", () => {
    const query = operatorStatements().filter((s) =>
      ([] as string[]).concat(s.Action).includes("dynamodb:Query"),
    );
    const stateIndexes = query
      .flatMap((s) => ([] as unknown[]).concat(s.Resource))
      .map((r) => JSON.stringify(r).match(/"TablesState[0-9A-F]{8}","Arn"\]\},"\/index\/([^"]+)"/))
      .flatMap((match) => (match ? [match[1]] : []));
    expect(stateIndexes.sort()).toEqual(["by-kind-listed", "by-tenant-status", "by-waiting-since"]);
  });

  it("one managed policy grants exactly the reads: no scan, no write, no delete", () => {
    const statements = operatorStatements();
    const actions = new Set(statements.flatMap((s) => ([] as string[]).concat(s.Action)));
    expect(statements.every((s) => s.Effect === "Allow")).toBe(true);
    expect([...actions].sort()).toEqual([
      "cloudwatch:GetMetricData",
      "dynamodb:BatchGetItem",
      "dynamodb:GetItem",
      "dynamodb:Query",
      "kms:Decrypt",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]);
    for (const s of statements) {
      const wildcard = JSON.stringify(s.Resource).includes("*");
      expect(wildcard, JSON.stringify(s.Action)).toBe(s.Action === "cloudwatch:GetMetricData");
    }
    const outputs = template.toJSON().Outputs as Record<string, unknown>;
    expect(Object.keys(outputs)).toEqual(
      expect.arrayContaining(["OperatorReadPolicyArn", "RelayFunctionName"]),
    );
  });

  it("peeking (ReceiveMessage, ChangeMessageVisibility) is allowed on dead-letter queues only", () => {
    const statements = operatorStatements();
    const peek = statements.find((s) =>
      ([] as string[]).concat(s.Action).includes("sqs:ReceiveMessage"),
    );
    const queues = resources(template, "AWS::SQS::Queue");
    const named = (r: unknown) => JSON.stringify(r).match(/"Fn::GetAtt":\["([^"]+)"/)?.[1] ?? "";
    const ids = ([] as unknown[]).concat(peek?.Resource).map(named);
    expect(ids.length).toBeGreaterThan(0);
    for (const id of ids) {
      const queue = queues.find((q) => q.id === id);
      expect(queue, id).toBeDefined();
      expect(id, "a dead-letter queue").toMatch(/DeadLetter|Dlq|DLQ/i);
    }
  });

  it("the repair policy moves dead letters back, republishes, replays, erases, and records the action, nothing more", () => {
    const statements = operatorStatements("RepairPolicy");
    const resourcesOf = (action: string) =>
      statements
        .filter((s) => ([] as string[]).concat(s.Action).includes(action))
        .flatMap((s) => ([] as unknown[]).concat(s.Resource));
    const ids = (action: string) =>
      resourcesOf(action).map(
        (r) => JSON.stringify(r).match(/"Fn::GetAtt":\["([^"]+)"/)?.[1] ?? "",
      );
    const actions = new Set(statements.flatMap((s) => ([] as string[]).concat(s.Action)));
    expect([...actions].sort()).toEqual([
      "dynamodb:BatchGetItem",
      "dynamodb:DescribeStream",
      "dynamodb:DescribeTable",
      "dynamodb:GetItem",
      "dynamodb:GetRecords",
      "dynamodb:GetShardIterator",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
      "events:DescribeArchive",
      "events:DescribeReplay",
      "events:DescribeRule",
      "events:PutEvents",
      "events:StartReplay",
      "kms:Decrypt",
      "kms:GenerateDataKey",
      "sqs:ChangeMessageVisibility",
      "sqs:DeleteMessage",
      "sqs:ReceiveMessage",
      "sqs:SendMessage",
    ]);
    // Delete: the dead-letter queues and the relay's failure queue, never a group's queue.
    for (const id of ids("sqs:DeleteMessage")) expect(id).toMatch(/DeadLetter|RelayFailureQueue/);
    for (const id of ids("sqs:SendMessage")) expect(id).not.toMatch(/DeadLetter/i);
    expect(ids("sqs:SendMessage").length).toBeGreaterThan(0);
    // The events table's stream and the events table only (no index, no Query); BatchGetItem only
    // on the events table; erasure: GetItem of the customer keys, UpdateItem of them and of the
    // state items.
    for (const action of [
      "dynamodb:DescribeStream",
      "dynamodb:GetShardIterator",
      "dynamodb:GetRecords",
    ])
      expect(JSON.stringify(resourcesOf(action)), action).toMatch(
        /^\[\{"Fn::GetAtt":\["TablesEvents[^"]*","StreamArn"\]\}\]$/,
      );
    expect(ids("dynamodb:DescribeTable")).toEqual([expect.stringMatching(/^TablesEvents/)]);
    // GetItem of the customer keys, and of the stop items (`agentbus stop | resume`).
    expect(ids("dynamodb:GetItem").sort()).toEqual([
      expect.stringMatching(/^CustomerKeysTable/),
      expect.stringMatching(/^TablesState/),
    ]);
    expect(
      JSON.stringify(statements.filter((s) => [s.Action].flat().includes("dynamodb:GetItem"))),
    ).toContain("operator_stop#*");
    // PutItem of the state table's content items (an agent's stored messages, erased) and stop
    // items, and of a customer's key (a command sealed for a customer who has none).
    expect(ids("dynamodb:PutItem").sort()).toEqual([
      expect.stringMatching(/^CustomerKeysTable/),
      expect.stringMatching(/^TablesState/),
      expect.stringMatching(/^TablesState/),
    ]);
    expect(JSON.stringify(statements.filter((s) => s.Action === "dynamodb:PutItem"))).toContain(
      "content#*",
    );
    expect(ids("dynamodb:UpdateItem").sort()).toEqual([
      expect.stringMatching(/^CustomerKeysTable/),
      expect.stringMatching(/^TablesState/),
      expect.stringMatching(/^TablesState/),
    ]);
    expect(ids("dynamodb:BatchGetItem")).toEqual([expect.stringMatching(/^TablesEvents/)]);
    // Every topic's bus: republish puts events back on their own bus; the audit record goes on
    // the events bus and operator commands on the commands bus.
    expect(resourcesOf("events:PutEvents")).toHaveLength(3);
    expect(JSON.stringify(statements)).not.toContain('"*"');
  });
});
