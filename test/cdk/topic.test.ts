import { Duration } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { DRAFT4_URI, eventBridgeSchema } from "../../lib/infra/constructs/event-schemas";
import { Topic } from "../../lib/infra/constructs/topic";
import { registry, TOPICS } from "../../schemas";
import { jsonSchemas } from "../../schemas/json-schema";
import { EventRegistry } from "../../schemas/registry";
import { refersTo, resources, single, synthesizeStack, testStack } from "./synth";

const { stack, template } = synthesizeStack();
/** The topics' schema registries and schemas live in the nested stack `EventSchemas`. */
if (!stack.eventSchemas) throw new Error("the stack has no nested event-schemas stack");
const schemaTemplate = Template.fromStack(stack.eventSchemas);

const BUS = "AWS::Events::EventBus";
const busOf = (topic: string) =>
  single(template, BUS, (b) => b.Properties.Name === `agentbus-dev-${topic}`);
const schemaRegistryOf = (topic: string) =>
  single(
    schemaTemplate,
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
  const schemas = resources(schemaTemplate, "AWS::EventSchemas::Schema");

  it("lives in a nested stack of its own, which keeps the main template small", () => {
    expect(stack.eventSchemas).toBeDefined();
    expect(resources(template, "AWS::EventSchemas::Schema")).toEqual([]);
    expect(resources(template, "AWS::EventSchemas::Registry")).toEqual([]);
    expect(resources(template, "AWS::CloudFormation::Stack")).toHaveLength(1);
    expect(resources(schemaTemplate, "AWS::EventSchemas::Registry")).toHaveLength(TOPICS.length);
  });

  it("is left out with -c agentbus:schemaRegistry=false (the first step of the upgrade), and a bad value is refused", () => {
    const off = synthesizeStack({}, "AgentBus-test", { "agentbus:schemaRegistry": "false" });
    expect(off.stack.eventSchemas).toBeUndefined();
    expect(resources(off.template, "AWS::CloudFormation::Stack")).toEqual([]);
    expect(() =>
      synthesizeStack({}, "AgentBus-test", { "agentbus:schemaRegistry": "maybe" }),
    ).toThrow(/agentbus:schemaRegistry must be true or false/);
  });

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

describe("draft 4 registry documents (zod's draft-04 target)", () => {
  const registry = new EventRegistry();
  const Step = z.object({ name: z.string() }).meta({ id: "step" });
  registry.define({
    type: "demo.shaped",
    kind: "event",
    topic: "events",
    sequenced: true,
    description: "every shape draft 4 writes differently",
    schemaVersion: 1,
    payload: z.object({
      mode: z.literal("fast"),
      weight: z.number().positive().lt(10),
      pair: z.tuple([z.string(), z.number()]),
      first: Step,
      rest: z.array(Step),
      const: z.string().default("const"),
      closed: z.strictObject({ n: z.number() }),
      open: z.record(z.string(), z.unknown()),
    }),
  });
  const envelope = jsonSchemas(registry, "draft-04")["demo.shaped.v1.json"] as Record<
    string,
    unknown
  >;
  const document = eventBridgeSchema({
    type: "demo.shaped",
    description: "demo",
    envelopeSchema: envelope,
    sourcePrefix: "agentbus",
  }) as { definitions?: Record<string, unknown>; properties: Record<string, unknown> };
  const payload = (
    document.properties.detail as {
      properties: { payload: { properties: Record<string, unknown> } };
    }
  ).properties.payload.properties;

  it("names draft 4 and the schema's id as `id`", () => {
    expect(envelope.$schema).toBe(DRAFT4_URI);
    expect(envelope.id).toBe("agentbus/demo.shaped/v1");
    expect(envelope).not.toHaveProperty("$id");
    expect(document).toMatchObject({ $schema: DRAFT4_URI, id: "agentbus/demo.shaped/v1" });
  });

  it("writes const as a one-value enum, and leaves data alone (a property named const, defaults)", () => {
    expect(payload.mode).toMatchObject({ enum: ["fast"] });
    expect(payload.mode).not.toHaveProperty("const");
    expect(payload.const).toMatchObject({ type: "string", default: "const" });
  });

  it("writes exclusive bounds in draft 4's boolean form", () => {
    expect(payload.weight).toMatchObject({
      minimum: 0,
      exclusiveMinimum: true,
      maximum: 10,
      exclusiveMaximum: true,
    });
  });

  it("keeps shared subschemas in definitions at the document's root, references resolved there", () => {
    expect(document.definitions).toHaveProperty("step");
    expect(payload.first).toEqual({ $ref: "#/definitions/step" });
    expect(payload.rest).toMatchObject({ items: { $ref: "#/definitions/step" } });
  });

  it("writes closed and open objects with draft 4's additionalProperties", () => {
    expect(payload.closed).toMatchObject({ type: "object", additionalProperties: false });
    expect(payload.open).toMatchObject({ type: "object", additionalProperties: {} });
  });

  it("writes tuples as an items array", () => {
    expect(payload.pair).toMatchObject({ items: [{ type: "string" }, { type: "number" }] });
    expect(JSON.stringify(document)).not.toContain("prefixItems");
  });
});
