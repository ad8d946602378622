import { Duration } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { DRAFT4_URI, toDraft4 } from "../../lib/constructs/event-schemas";
import { Topic } from "../../lib/constructs/topic";
import { registry, TOPICS } from "../../schemas";
import { refersTo, resources, single, synthesizeStack, testStack } from "./support";

const { template } = synthesizeStack();

const BUS = "AWS::Events::EventBus";
const busOf = (topic: string) =>
  single(template, BUS, (b) => b.Properties.Name === `agentbus-dev-${topic}`);
const schemaRegistryOf = (topic: string) =>
  single(
    template,
    "AWS::EventSchemas::Registry",
    (r) => r.Properties.RegistryName === `agentbus-dev-${topic}`,
  );

describe("Topic: archive", () => {
  it("every bus has an archive of every event from an agentbus* source, kept 30 days", () => {
    for (const topic of TOPICS) {
      const bus = busOf(topic);
      const archive = single(
        template,
        "AWS::Events::Archive",
        (a) => refersTo(a.Properties.SourceArn) === bus.id,
      );
      expect(archive.Properties, topic).toMatchObject({
        EventPattern: { source: [{ prefix: "agentbus" }] },
        RetentionDays: 30,
      });
    }
  });

  it("archives name no KMS key (no empty KmsKeyIdentifier)", () => {
    for (const archive of resources(template, "AWS::Events::Archive")) {
      expect(archive.Properties, archive.id).not.toHaveProperty("KmsKeyIdentifier");
    }
  });

  it("archiveRetention sets the retention, and must be whole days", () => {
    const stack = testStack();
    new Topic(stack, "Events", { topicName: "events", archiveRetention: Duration.days(90) });
    Template.fromStack(stack).hasResourceProperties("AWS::Events::Archive", { RetentionDays: 90 });
    expect(
      () =>
        new Topic(testStack(), "Events", {
          topicName: "events",
          archiveRetention: Duration.hours(36),
        }),
    ).toThrow(/archiveRetention 1 day 12 hours must be a whole number of days/);
  });
});

describe("Topic: resource policy", () => {
  const policies = resources(template, "AWS::Events::EventBusPolicy");
  const statementOf = (p: (typeof policies)[number]) =>
    p.Properties.Statement as { Effect: string; Action: string; Principal: unknown };

  it("each bus allows PutEvents to principals of its own account (the account root)", () => {
    for (const topic of TOPICS) {
      const bus = busOf(topic);
      const [policy] = policies.filter((p) => refersTo(p.Properties.EventBusName) === bus.id);
      expect(policy, topic).toBeDefined();
      const statement = statementOf(policy as (typeof policies)[number]);
      expect(statement).toMatchObject({ Effect: "Allow", Action: "events:PutEvents" });
      expect(statement.Principal).toEqual({
        AWS: {
          "Fn::Join": [
            "",
            ["arn:", { Ref: "AWS::Partition" }, ":iam::", { Ref: "AWS::AccountId" }, ":root"],
          ],
        },
      });
    }
  });

  it("no bus policy has a wildcard principal", () => {
    expect(policies.length).toBeGreaterThan(0);
    for (const policy of policies) {
      const principal = JSON.stringify(statementOf(policy).Principal);
      expect(principal, policy.id).not.toMatch(/"\*"/);
    }
  });
});

describe("Topic: schema registry", () => {
  const schemas = resources(template, "AWS::EventSchemas::Schema");

  it("each topic has its own registry with one schema per event type and version of that topic", () => {
    for (const topic of TOPICS) {
      const topicRegistry = schemaRegistryOf(topic);
      const names = schemas
        .filter((s) => refersTo(s.Properties.RegistryName) === topicRegistry.id)
        .map((s) => s.Properties.SchemaName)
        .sort();
      const expected = registry
        .definitions()
        .filter((d) => d.topic === topic)
        .map((d) => `${d.type}.v${d.schemaVersion}`)
        .sort();
      expect(names, topic).toEqual(expected);
    }
  });

  it("every schema is a JSON Schema draft 4 document of the EventBridge event of its type", () => {
    expect(schemas.length).toBeGreaterThan(0);
    for (const schema of schemas) {
      expect(schema.Properties.Type).toBe("JSONSchemaDraft4");
      const content = JSON.parse(schema.Properties.Content as string) as {
        $schema: string;
        properties: Record<string, { enum?: unknown[]; properties?: Record<string, unknown> }>;
      };
      const type = String(schema.Properties.SchemaName).replace(/\.v\d+$/, "");
      expect(content.$schema).toBe(DRAFT4_URI);
      expect(content.properties["detail-type"]?.enum).toEqual([type]);
      expect(content.properties.detail?.properties?.event_type).toEqual({
        type: "string",
        enum: [type],
      });
    }
  });

  it("no schema uses keywords draft 4 does not know in place of its own", () => {
    for (const schema of schemas) {
      const content = schema.Properties.Content as string;
      for (const keyword of ['"const"', '"$defs"', '"$id"', '"prefixItems"', "2020-12"]) {
        expect(content, `${schema.Properties.SchemaName}: ${keyword}`).not.toContain(keyword);
      }
    }
  });
});

describe("toDraft4", () => {
  it("names draft 4 and renames $id to id", () => {
    expect(
      toDraft4({
        $schema: "https://json-schema.org/draft/2020-12/schema",
        $id: "x",
        type: "object",
      }),
    ).toEqual({ $schema: DRAFT4_URI, id: "x", type: "object" });
  });

  it("turns const into a one-value enum, in nested subschemas too", () => {
    expect(
      toDraft4({
        properties: { a: { const: 1 }, b: { anyOf: [{ const: "x" }, { type: "null" }] } },
      }),
    ).toMatchObject({
      properties: { a: { enum: [1] }, b: { anyOf: [{ enum: ["x"] }, { type: "null" }] } },
    });
  });

  it("leaves data alone: a property named const, enum values, defaults", () => {
    const out = toDraft4({
      properties: { const: { type: "string", default: { const: 1 } } },
      required: ["const"],
    });
    expect(out).toMatchObject({
      properties: { const: { type: "string", default: { const: 1 } } },
      required: ["const"],
    });
  });

  it("turns numeric exclusive bounds into draft 4's boolean form", () => {
    expect(toDraft4({ type: "number", exclusiveMinimum: 0, exclusiveMaximum: 10 })).toMatchObject({
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 10,
      exclusiveMaximum: true,
    });
  });

  it("moves $defs to definitions and rewrites the references", () => {
    expect(toDraft4({ $defs: { id: { type: "string" } }, items: { $ref: "#/$defs/id" } })).toEqual({
      $schema: DRAFT4_URI,
      definitions: { id: { type: "string" } },
      items: { $ref: "#/definitions/id" },
    });
  });

  it("turns tuples and boolean subschemas into draft 4 forms", () => {
    expect(
      toDraft4({ prefixItems: [{ type: "string" }], items: false, additionalProperties: true }),
    ).toEqual({
      $schema: DRAFT4_URI,
      items: [{ type: "string" }],
      additionalItems: { not: {} },
      additionalProperties: {},
    });
  });
});
