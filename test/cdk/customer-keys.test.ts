import { describe, expect, it } from "vitest";
import { CUSTOMER_KEYS_ENV } from "../../lib/infra/constructs/customer-keys";
import { topology } from "../../lib/infra/project";
import { defineTopology, personalDataAccess } from "../../lib/infra/topology";
import {
  getAtt,
  type Resource,
  refersTo,
  resources,
  type Statement,
  single,
  statementsOf,
  synthesizeStack,
} from "./synth";

/**
 * The customers' data keys in the stack: their table and KMS key, and who may do what with them,
 * derived from what each group emits and receives (personalDataAccess), not listed by hand.
 */

const { template } = synthesizeStack();
const table = single(template, "AWS::DynamoDB::Table", (t) => t.id.startsWith("CustomerKeysTable"));
const key = single(template, "AWS::KMS::Key", (k) => k.id.startsWith("CustomerKeysKey"));
const keyArn = getAtt(key.id, "Arn");
const tableArn = getAtt(table.id, "Arn");

/** The actions `statements` allow on `resource`, sorted; and whether each KMS one has the context condition. */
function allowed(statements: readonly Statement[], resource: unknown): string[] {
  const on = statements.filter(
    (s) =>
      s.Effect === "Allow" &&
      s.Resource.some((r) => JSON.stringify(r) === JSON.stringify(resource)),
  );
  return [...new Set(on.flatMap((s) => s.Action))].sort();
}

const KMS_CONDITION = {
  "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": ["tenant_id", "customer_id"] },
  Null: { "kms:EncryptionContextKeys": "false" },
};

const SEAL = {
  kms: ["kms:Decrypt", "kms:GenerateDataKey"],
  table: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
};
const OPEN = { kms: ["kms:Decrypt"], table: ["dynamodb:BatchGetItem", "dynamodb:GetItem"] };
const NONE = { kms: [], table: [] };

/** What a function may do with the keys: KMS actions on the key, actions on the table. */
function accessOf(fn: Resource) {
  const statements = statementsOf(template, fn);
  for (const s of statements.filter((s) => s.Action.some((a) => a.startsWith("kms:"))))
    expect(s.Condition, `${fn.id}: ${s.Action.join(", ")}`).toEqual(KMS_CONDITION);
  return { kms: allowed(statements, keyArn), table: allowed(statements, tableArn) };
}

const union = (...parts: { kms: string[]; table: string[] }[]) => ({
  kms: [...new Set(parts.flatMap((p) => p.kms))].sort(),
  table: [...new Set(parts.flatMap((p) => p.table))].sort(),
});

const consumerOf = (group: string) =>
  single(
    template,
    "AWS::Lambda::Function",
    (fn) => fn.Metadata["agentbus:kind"] === "consumer" && fn.Metadata["agentbus:group"] === group,
  );

const environmentOf = (fn: Resource) =>
  ((fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ??
    {}) as Record<string, unknown>;

describe("the customer-keys table and its KMS key", () => {
  it("keeps one wrapped key per customer, on demand, encrypted, retained, without point-in-time recovery", () => {
    expect(table.Properties).toMatchObject({
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
      BillingMode: "PAY_PER_REQUEST",
      SSESpecification: { SSEEnabled: true },
    });
    expect(table.Properties.PointInTimeRecoverySpecification ?? {}).not.toMatchObject({
      PointInTimeRecoveryEnabled: true,
    });
    expect(template.toJSON().Resources[table.id].DeletionPolicy).toBe("Retain");
  });

  it("cannot be deleted while its deletion protection is on: losing it loses every sealed field", () => {
    expect(table.Properties.DeletionProtectionEnabled).toBe(true);
  });

  it("wraps them with a rotating key of its own policy, retained", () => {
    expect(key.Properties).toMatchObject({ EnableKeyRotation: true });
    expect(key.Properties.KeyPolicy).toBeDefined();
    expect(template.toJSON().Resources[key.id].DeletionPolicy).toBe("Retain");
  });

  it("outputs the table's name and the key's ARN", () => {
    const outputs = template.findOutputs("*");
    expect(outputs.CustomerKeysTableName?.Value).toEqual({ Ref: table.id });
    expect(outputs.CustomerKeysKeyArn?.Value).toEqual(keyArn);
  });
});

describe("who may use the keys", () => {
  const access = (group: string) =>
    topology.groups.find((g) => g.name === group)?.personalData ?? [];

  it("derives each group's access from the personal types it emits and the fields it reads", () => {
    expect(access("conversation")).toEqual(["seal", "open"]);
    expect(access("reply-generation")).toEqual(["seal", "open"]);
    expect(access("sender")).toEqual(["open"]);
    // It keeps what it receives whole, sealed as it came, and opens none of it.
    expect(access("audit")).toEqual(["seal"]);
    expect(access("task-projection")).toEqual([]);
    expect(access("orchestrator")).toEqual([]);
    const context = { eventTypes: [{ type: "a", topic: "events", personal: true }] };
    expect(personalDataAccess({ subscriptions: ["b"], emits: ["a"] }, context)).toEqual(["seal"]);
    expect(personalDataAccess({ subscriptions: ["a"], readsPersonal: ["a"] }, context)).toEqual([
      "open",
    ]);
    // Receiving a personal type without reading its fields: no key, no grant.
    expect(personalDataAccess({ subscriptions: ["a"] }, context)).toEqual([]);
    expect(personalDataAccess({ subscriptions: ["b"], emits: ["b"] }, context)).toEqual([]);
    // A group that keeps what it receives whole stores it sealed.
    expect(personalDataAccess({ subscriptions: ["a"], keepsMessages: true }, context)).toEqual([
      "seal",
    ]);
  });

  it.each(topology.groups.map((g) => [g.name, g.personalData] as const))(
    "%s: the grants and environment of its access (%j)",
    (group, personalData) => {
      const fn = consumerOf(group);
      const expected = union(
        personalData.includes("seal") ? SEAL : NONE,
        personalData.includes("open") ? OPEN : NONE,
      );
      expect(accessOf(fn)).toEqual(expected);
      const env = environmentOf(fn);
      if (personalData.length === 0) {
        expect(env[CUSTOMER_KEYS_ENV.table]).toBeUndefined();
        expect(env[CUSTOMER_KEYS_ENV.kmsKey]).toBeUndefined();
      } else {
        expect(env[CUSTOMER_KEYS_ENV.table]).toEqual({ Ref: table.id });
        expect(env[CUSTOMER_KEYS_ENV.kmsKey]).toEqual(keyArn);
      }
    },
  );

  it("lets no other function (relay, dispatch, sweeper) touch them: the relay publishes them sealed", () => {
    const others = resources(
      template,
      "AWS::Lambda::Function",
      (fn) => fn.Metadata["agentbus:kind"] !== "consumer",
    );
    expect(others.map((fn) => fn.Metadata["agentbus:kind"])).toContain("relay");
    expect(others.length).toBeGreaterThan(0);
    for (const fn of others) {
      expect(accessOf(fn), fn.id).toEqual(NONE);
      expect(environmentOf(fn)[CUSTOMER_KEYS_ENV.table], fn.id).toBeUndefined();
    }
  });

  it("lets the operator open what trace shows, and erase and seal its commands with the repair policy", () => {
    const policy = (id: string) => {
      const found = single(template, "AWS::IAM::ManagedPolicy", (p) => p.id.startsWith(id));
      const document = found.Properties.PolicyDocument as { Statement: Record<string, unknown>[] };
      return document.Statement.map((s) => ({
        Effect: s.Effect as string,
        Action: ([] as string[]).concat(s.Action as string[]),
        Resource: ([] as unknown[]).concat(s.Resource),
        Condition: s.Condition,
      }));
    };
    const read = policy("OperatorReadPolicy");
    const repair = policy("OperatorReadRepairPolicy");
    expect(allowed(read, keyArn)).toEqual(["kms:Decrypt"]);
    expect(read.find((s) => s.Action.includes("kms:Decrypt"))?.Condition).toEqual(KMS_CONDITION);
    expect(allowed(read, tableArn)).toEqual(["dynamodb:BatchGetItem", "dynamodb:GetItem"]);
    // Sending a command with personal fields seals them (a function's `seal`), with the context.
    expect(allowed(repair, keyArn)).toEqual(["kms:Decrypt", "kms:GenerateDataKey"]);
    for (const s of repair.filter((s) => s.Action.some((a) => a.startsWith("kms:"))))
      expect(s.Condition).toEqual(KMS_CONDITION);
    expect(allowed(repair, tableArn)).toEqual([
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
    ]);
  });

  it("gives a stack without personal types to no group", () => {
    const plain = defineTopology({
      topics: ["events"],
      groups: [
        {
          name: "task-projection",
          role: { group: "task-projection", subscriptions: ["task.accepted"] },
          handler: "functions/roles/task-projection/handler.ts",
        },
      ],
    });
    const stack = synthesizeStack({ topology: plain }, "AgentBus-plain").template;
    const consumer = resources(
      stack,
      "AWS::Lambda::Function",
      (fn) => fn.Metadata["agentbus:kind"] === "consumer",
    );
    expect(consumer).toHaveLength(1);
    const statements = statementsOf(stack, consumer[0] as Resource);
    expect(statements.flatMap((s) => s.Action).filter((a) => a.startsWith("kms:"))).toEqual([]);
    expect(
      statements.filter((s) => s.Resource.some((r) => refersTo(r)?.startsWith("CustomerKeys"))),
    ).toEqual([]);
  });
});
