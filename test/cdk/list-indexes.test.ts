import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { LIST_INDEX_UPGRADE_KEY, parseListIndexUpgrade } from "../../lib/infra/agentbus-stack";
import {
  AgentBusTables,
  LIST_INDEX_UPGRADE_STAGES,
  type ListIndexUpgrade,
  stateIndexLayouts,
  stateListIndexNames,
} from "../../lib/infra/constructs/tables";
import { LEGACY_STATE_LAYOUT } from "../support/tables";
import { asGsi, changes, type Gsi, names } from "./gsi";
import { resources, single, synthesizeStack, testStack } from "./synth";

/**
 * `agentbus:listIndexUpgrade`: a stack deployed with the legacy list indexes (by-kind,
 * by-waiting) reaches the current ones (by-kind-listed, by-waiting-since) in four deploys, each
 * creating or deleting one GSI, the most CloudFormation does in one update.
 */

/** The GSIs of the state table in a template, in order. */
function stateIndexesOf(template: Template): Gsi[] {
  const [table] = resources(template, "AWS::DynamoDB::Table", (r) =>
    r.id.startsWith("TablesState"),
  );
  return (table?.Properties.GlobalSecondaryIndexes ?? []) as Gsi[];
}

/** The state table's GSIs as the tables construct synthesizes them at a stage. */
function synthesizedAt(stage?: ListIndexUpgrade): Gsi[] {
  const stack = testStack();
  new AgentBusTables(stack, "Tables", { listIndexUpgrade: stage });
  return stateIndexesOf(Template.fromStack(stack));
}

/** The state table's indexes before the upgrade: by-due, by-kind and by-waiting. */
const LEGACY_LAYOUT = (LEGACY_STATE_LAYOUT.indexes ?? []).map(asGsi);

describe("the state table's list indexes while a stack upgrades", () => {
  it("a fresh stack has by-due, by-kind-listed, by-waiting-since and by-tenant-status, keys only", () => {
    expect(synthesizedAt()).toEqual([
      {
        IndexName: "by-due",
        KeySchema: [
          { AttributeName: "due_shard", KeyType: "HASH" },
          { AttributeName: "due_at", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
      {
        IndexName: "by-kind-listed",
        KeySchema: [
          { AttributeName: "kind", KeyType: "HASH" },
          { AttributeName: "listed_at", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
      {
        IndexName: "by-waiting-since",
        KeySchema: [
          { AttributeName: "waiting", KeyType: "HASH" },
          { AttributeName: "waiting_since", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
      {
        IndexName: "by-tenant-status",
        KeySchema: [
          { AttributeName: "tenant_list", KeyType: "HASH" },
          { AttributeName: "listed_at", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: "KEYS_ONLY" },
      },
    ]);
  });

  it("each stage has its index set: by-due, the legacy ones it keeps, then the current ones", () => {
    expect(names(LEGACY_LAYOUT)).toEqual(["by-due", "by-kind", "by-waiting"]);
    expect(names(synthesizedAt(1))).toEqual(["by-due", "by-kind", "by-waiting", "by-kind-listed"]);
    expect(names(synthesizedAt(2))).toEqual([
      "by-due",
      "by-kind",
      "by-waiting",
      "by-kind-listed",
      "by-waiting-since",
    ]);
    expect(names(synthesizedAt(3))).toEqual([
      "by-due",
      "by-waiting",
      "by-kind-listed",
      "by-waiting-since",
    ]);
    expect(names(synthesizedAt(4))).toEqual(["by-due", "by-kind-listed", "by-waiting-since"]);
    expect(names(synthesizedAt())).toEqual([
      "by-due",
      "by-kind-listed",
      "by-waiting-since",
      "by-tenant-status",
    ]);
  });

  it("the template declares each index as its layout does (legacy: updated_at, the summary)", () => {
    for (const stage of [...LIST_INDEX_UPGRADE_STAGES, undefined])
      expect(synthesizedAt(stage), `stage ${stage}`).toEqual(stateIndexLayouts(stage).map(asGsi));
    expect(LEGACY_LAYOUT[1]).toEqual({
      IndexName: "by-kind",
      KeySchema: [
        { AttributeName: "kind", KeyType: "HASH" },
        { AttributeName: "updated_at", KeyType: "RANGE" },
      ],
      Projection: {
        ProjectionType: "INCLUDE",
        NonKeyAttributes: ["agg_type", "agg_id", "kind", "status", "label", "waiting", "counts"],
      },
    });
  });

  it("each deploy of the sequence creates or deletes exactly one index and changes none in place", () => {
    const sequence = [
      { deploy: "legacy", indexes: LEGACY_LAYOUT },
      ...LIST_INDEX_UPGRADE_STAGES.map((stage) => ({
        deploy: `stage ${stage}`,
        indexes: synthesizedAt(stage),
      })),
      { deploy: "final", indexes: synthesizedAt() },
    ];
    expect(sequence.map((s) => s.deploy)).toEqual([
      "legacy",
      "stage 1",
      "stage 2",
      "stage 3",
      "stage 4",
      "final",
    ]);
    for (const [i, step] of sequence.slice(1).entries()) {
      const previous = sequence[i] as (typeof sequence)[number];
      const { created, deleted, changed } = changes(previous.indexes, step.indexes);
      const what = `${previous.deploy} -> ${step.deploy}`;
      expect(created.length + deleted.length, what).toBe(1);
      expect(changed, what).toEqual([]);
    }
    // Skipping a stage is two creates or deletes in one update: CloudFormation refuses it.
    const skipped = changes(LEGACY_LAYOUT, synthesizedAt(2));
    expect(skipped.created).toEqual(["by-kind-listed", "by-waiting-since"]);
  });

  it("takes the stage as a string (-c) or a number (cdk.json)", () => {
    expect(parseListIndexUpgrade(undefined)).toBeUndefined();
    expect(parseListIndexUpgrade("1")).toBe(1);
    expect(parseListIndexUpgrade(2)).toBe(2);
    expect(parseListIndexUpgrade("3")).toBe(3);
    expect(parseListIndexUpgrade(4)).toBe(4);
  });

  it("refuses any other value, naming the key, the value and the stages", () => {
    for (const value of ["5", "0", "", "true", "stage1", 1.5, true, null])
      expect(() => parseListIndexUpgrade(value), JSON.stringify(value)).toThrow(
        `context agentbus:listIndexUpgrade=${JSON.stringify(value)} is not an upgrade stage: use 1, 2, 3, 4`,
      );
    expect(() => synthesizeStack({}, "AgentBus-lists", { [LIST_INDEX_UPGRADE_KEY]: "5" })).toThrow(
      'context agentbus:listIndexUpgrade="5" is not an upgrade stage: use 1, 2, 3, 4, or leave agentbus:listIndexUpgrade out once the upgrade is done',
    );
  });
});

describe("the operator's list indexes", () => {
  it("are the current ones, and at every upgrade stage the legacy ones too, present or not yet", () => {
    expect(stateListIndexNames()).toEqual([
      "by-kind-listed",
      "by-waiting-since",
      "by-tenant-status",
    ]);
    // At stage 1 by-waiting-since does not exist yet: the tools ask for it first, and a Query
    // IAM refused would never tell them to read by-waiting instead.
    for (const stage of LIST_INDEX_UPGRADE_STAGES)
      expect(stateListIndexNames(stage).sort(), `stage ${stage}`).toEqual([
        "by-kind",
        "by-kind-listed",
        "by-tenant-status",
        "by-waiting",
        "by-waiting-since",
      ]);
  });
});

describe("a stack at stage 2", () => {
  const { template } = synthesizeStack({}, "AgentBus-lists", { [LIST_INDEX_UPGRADE_KEY]: "2" });

  it("has the legacy and the current list indexes", () => {
    expect(names(stateIndexesOf(template))).toEqual([
      "by-due",
      "by-kind",
      "by-waiting",
      "by-kind-listed",
      "by-waiting-since",
    ]);
  });

  it("lets the operator query every list index (the tools fall back to the legacy ones)", () => {
    const policy = single(template, "AWS::IAM::ManagedPolicy", (r) =>
      /^OperatorReadPolicy[0-9A-F]{8}$/.test(r.id),
    );
    const { Statement: statements } = policy.Properties.PolicyDocument as {
      Statement: { Action: string | string[]; Resource: unknown }[];
    };
    const stateIndexes = statements
      .filter((s) => ([] as string[]).concat(s.Action).includes("dynamodb:Query"))
      .flatMap((s) => ([] as unknown[]).concat(s.Resource))
      .map((r) => JSON.stringify(r).match(/"TablesState[0-9A-F]{8}","Arn"\]\},"\/index\/([^"]+)"/))
      .flatMap((match) => (match ? [match[1]] : []));
    expect(stateIndexes.sort()).toEqual([
      "by-kind",
      "by-kind-listed",
      "by-tenant-status",
      "by-waiting",
      "by-waiting-since",
    ]);
  });
});
