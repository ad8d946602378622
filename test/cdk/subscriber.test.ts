import { describe, expect, it } from "vitest";
import {
  SUBSCRIBER_FALLBACK_WARNING,
  SUBSCRIBER_PREVIEW_WARNING,
} from "../../lib/infra/agentbus-stack";
import { EMULATOR_CONTEXT_KEY } from "../../lib/infra/constructs/emulator";
import {
  allowedOn,
  functionsOfKind,
  getAtt,
  type Resource,
  refersTo,
  resources,
  SUBSCRIBED_GROUP,
  single,
  statementsOf,
  synthesizeStack,
  topologyWithSubscriber,
} from "./synth";

/**
 * `delivery: "subscriber"`: the group's FIFO queue is fed by a FIFO subscriber of the events
 * topic's new EventBridge bus (AWS::EventsV2), with no rule, buffer queue or dispatch function.
 */
const { stack, template } = synthesizeStack({ topology: topologyWithSubscriber() });
const QUEUE = "AWS::SQS::Queue";
const byId = (type: string, id: string | undefined) => single(template, type, (r) => r.id === id);
const ofSubscribedGroup = (type: string) =>
  resources(template, type, (r) => r.Metadata["agentbus:group"] === SUBSCRIBED_GROUP);
const subscriber = single(template, "AWS::EventsV2::Subscriber", () => true);
const invoke = subscriber.Properties.InvokeConfiguration as {
  TargetArn: unknown;
  RoleArn: unknown;
  SqsParameters: unknown;
};
const consumer = single(
  template,
  "AWS::Lambda::Function",
  (f) =>
    f.Metadata["agentbus:group"] === SUBSCRIBED_GROUP && f.Metadata["agentbus:kind"] === "consumer",
);
const env = (fn: Resource) =>
  (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const fifo = byId(QUEUE, refersTo(env(consumer).QUEUE_URL));
const onFailure = byId(
  QUEUE,
  refersTo((subscriber.Properties.OnFailureConfiguration as { Arn: unknown }).Arn),
);

describe("subscriber delivery", () => {
  it("has no rule, no buffer queue and no dispatch function", () => {
    expect(ofSubscribedGroup("AWS::Events::Rule")).toEqual([]);
    expect(ofSubscribedGroup("AWS::Pipes::Pipe")).toEqual([]);
    expect(ofSubscribedGroup(QUEUE).map((q) => q.Properties.QueueName)).toEqual(
      expect.not.arrayContaining([expect.stringMatching(/-buffer$/)]),
    );
    expect(ofSubscribedGroup(QUEUE)).toHaveLength(3);
    expect(functionsOfKind(template, "dispatch").map((f) => f.Metadata["agentbus:group"])).toEqual([
      "task-projection",
    ]);
  });

  it("one new bus for the events topic, keeping its events 14 days", () => {
    const buses = resources(template, "AWS::EventsV2::EventBus");
    expect(buses.map((b) => b.Metadata["agentbus:topic"])).toEqual(["events"]);
    expect(buses[0]?.Properties.StorageConfiguration).toEqual({ RetentionPeriodInDays: 14 });
    expect(refersTo(subscriber.Properties.EventBusArn)).toBe(buses[0]?.id);
  });

  it("is a FIFO subscriber of the group's types, grouped by event group and de-duplicated by id", () => {
    expect(subscriber.Properties.Type).toBe("FIFO");
    expect(subscriber.Properties.FilterConfiguration).toEqual({
      Filters: [
        {
          Scope: "DATA",
          Pattern: JSON.stringify({
            source: [{ prefix: "agentbus" }],
            "detail-type": ["task.accepted", "plan.created"],
          }),
        },
      ],
    });
    expect(refersTo(invoke.TargetArn)).toBe(fifo.id);
    expect(fifo.Properties.FifoQueue).toBe(true);
    expect(invoke.SqsParameters).toEqual({
      MessageGroupId: "{% $events.Data.detail.order_key %}",
      MessageDeduplicationId: "{% $events.Data.detail.event_id %}",
    });
  });

  it("dead-letters to a standard queue that alarms, and retries like a rule", () => {
    expect(onFailure.Properties.FifoQueue).toBeUndefined();
    expect(onFailure.Properties.QueueName).toMatch(/-buffer-dlq$/);
    expect(subscriber.Properties.RetryPolicy).toEqual({
      MaxRetryAttempts: 185,
      MaxEventAgeInSeconds: 86_400,
    });
    const alarm = single(
      template,
      "AWS::CloudWatch::Alarm",
      (a) =>
        a.Metadata["agentbus:group"] === SUBSCRIBED_GROUP &&
        JSON.stringify(a.Properties.Dimensions ?? []).includes(onFailure.id),
    );
    expect(alarm.Properties.AlarmDescription).toContain("could not deliver");
  });

  it("its role is EventBridge's in this account, sending to the FIFO queue and the DLQ only", () => {
    const role = byId("AWS::IAM::Role", refersTo(invoke.RoleArn));
    const [trust] = (
      role.Properties.AssumeRolePolicyDocument as { Statement: Record<string, unknown>[] }
    ).Statement;
    expect(trust).toMatchObject({
      Principal: { Service: "events.amazonaws.com" },
      Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
    });
    const statements = statementsOf(template, {
      ...subscriber,
      Properties: { Role: { Ref: role.id } },
    });
    expect([...allowedOn(statements, getAtt(fifo.id, "Arn"))]).toEqual(["sqs:SendMessage"]);
    expect([...allowedOn(statements, getAtt(onFailure.id, "Arn"))]).toEqual(["sqs:SendMessage"]);
    expect(statements.flatMap((s) => s.Resource)).toHaveLength(2);
    const dependsOn = (template.toJSON().Resources[subscriber.id] as { DependsOn?: string[] })
      .DependsOn;
    expect(dependsOn).toEqual(expect.arrayContaining([role.id]));
  });

  it("what is put on the classic bus is forwarded to the new bus, by a role that may only publish there", () => {
    const bus = single(template, "AWS::EventsV2::EventBus", () => true);
    const bridge = single(template, "AWS::Events::Rule", (r) =>
      JSON.stringify(r.Properties.Targets ?? []).includes(bus.id),
    );
    // Every source but the relay's, which publishes to the new bus itself.
    expect(bridge.Properties.EventPattern).toEqual({
      source: [{ "anything-but": ["agentbus.relay"] }],
    });
    const [target] = bridge.Properties.Targets as { Arn: unknown; RoleArn: unknown }[];
    expect(target?.Arn).toEqual(getAtt(bus.id, "EventBusArn"));
    const role = byId("AWS::IAM::Role", refersTo(target?.RoleArn));
    const statements = statementsOf(template, {
      ...bridge,
      Properties: { Role: { Ref: role.id } },
    });
    expect([...allowedOn(statements, getAtt(bus.id, "EventBusArn"))].sort()).toEqual([
      "events:PutEvents",
      "events:PutRawEvents",
    ]);
    expect(statements.flatMap((s) => s.Resource)).toHaveLength(1);
  });

  it("the relay gets the bus's ARN and may publish to that bus only", () => {
    const relay = single(
      template,
      "AWS::Lambda::Function",
      (f) => f.Metadata["agentbus:kind"] === "relay",
    );
    const bus = single(template, "AWS::EventsV2::EventBus", () => true);
    expect(env(relay).BUS_V2_EVENTS).toEqual(getAtt(bus.id, "EventBusArn"));
    expect(env(relay).BUS_V2_COMMANDS).toBeUndefined();
    const statements = statementsOf(template, relay);
    expect([...allowedOn(statements, getAtt(bus.id, "EventBusArn"))]).toEqual(["events:PutEvents"]);
  });

  it("lets a repairing operator replay the group: describe its subscriber, create a copy named by the stage on its bus, pass its delivery role", () => {
    const policy = single(template, "AWS::IAM::ManagedPolicy", (p) =>
      p.id.startsWith("OperatorReadRepairPolicy"),
    );
    const statements = (
      (policy.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement ?? []
    ).map((s) => ({
      Effect: s.Effect as string,
      Action: ([] as string[]).concat(s.Action as string | string[]),
      Resource: ([] as unknown[]).concat(s.Resource),
      Condition: s.Condition,
    }));
    const bus = single(template, "AWS::EventsV2::EventBus", () => true);
    expect([...allowedOn(statements, getAtt(subscriber.id, "SubscriberArn"))]).toEqual([
      "events:DescribeSubscriber",
    ]);
    expect([...allowedOn(statements, getAtt(bus.id, "EventBusArn"))].sort()).toEqual([
      "events:CreateSubscriber",
      "events:DescribeEventBus",
      "events:ListSubscribers",
    ]);
    const named = statements.filter((s) =>
      JSON.stringify(s.Resource).includes(":subscriber/agentbus-dev-*"),
    );
    expect(named.flatMap((s) => s.Action)).toEqual(["events:CreateSubscriber"]);
    const pass = statements.filter((s) => s.Action.includes("iam:PassRole"));
    expect(pass).toEqual([
      {
        Effect: "Allow",
        Action: ["iam:PassRole"],
        Resource: [invoke.RoleArn],
        Condition: { StringEquals: { "iam:PassedToService": "events.amazonaws.com" } },
      },
    ]);
  });

  it("outputs the subscriber's ARN, which agentbus replay reads to know the group has no archive replay", () => {
    const outputs = template.findOutputs("SubscribedProjectionEventsSubscriberArn");
    expect(Object.values(outputs)[0]?.Value).toEqual(getAtt(subscriber.id, "SubscriberArn"));
    expect(template.findOutputs("SubscribedProjectionEventsRuleArn")).toEqual({});
  });

  it("warns at synth time that the relay's eventbridgev2 client is not yet verified in an account", () => {
    const warnings = stack.node
      .findAll()
      .flatMap((c) =>
        c.node.metadata.map((m) => ({ path: c.node.path, data: JSON.stringify(m.data) })),
      )
      .filter((m) => m.data.includes(SUBSCRIBER_PREVIEW_WARNING));
    expect(warnings.map((w) => w.path)).toEqual(["AgentBus-test/SubscribedProjection"]);
    expect(warnings[0]?.data).toContain("AgentBus's own eventbridgev2 client");
  });

  it("falls back to the dispatch function, with a warning, for an emulator", () => {
    for (const emulator of ["localstack-free", "localstack"]) {
      const local = synthesizeStack({ topology: topologyWithSubscriber() }, "AgentBus-test", {
        [EMULATOR_CONTEXT_KEY]: emulator,
      });
      expect(resources(local.template, "AWS::EventsV2::Subscriber")).toEqual([]);
      expect(resources(local.template, "AWS::EventsV2::EventBus")).toEqual([]);
      expect(
        functionsOfKind(local.template, "dispatch")
          .map((f) => f.Metadata["agentbus:group"])
          .sort(),
      ).toEqual([SUBSCRIBED_GROUP, "task-projection"]);
      const warnings = local.stack.node
        .findAll()
        .flatMap((c) => c.node.metadata)
        .filter((m) => JSON.stringify(m.data).includes(SUBSCRIBER_FALLBACK_WARNING));
      expect(warnings).toHaveLength(1);
    }
    expect(
      stack.node
        .findAll()
        .flatMap((c) => c.node.metadata)
        .some((m) => JSON.stringify(m.data).includes(SUBSCRIBER_FALLBACK_WARNING)),
    ).toBe(false);
  });
});
