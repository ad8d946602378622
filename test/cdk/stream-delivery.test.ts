import { Duration } from "aws-cdk-lib";
import { describe, expect, it } from "vitest";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import {
  MAX_FILTER_PATTERN_LENGTH,
  streamFilterOf,
} from "../../lib/infra/constructs/consumer-group-delivery";
import { type GroupDeclaration, groupProblems } from "../../lib/infra/topology";
import {
  allowedOn,
  functionsOfKind,
  getAtt,
  ofGroup,
  type Resource,
  refersTo,
  resources,
  single,
  statementsOf,
  synthesizeStack,
} from "./synth";

/**
 * `delivery: "stream"`: the reference stack's conversation projection reads the events table's
 * stream, filtered to its types, with no rule, buffer, dispatch function or FIFO queue.
 */
const GROUP = conversationProjection.group;
const { template } = synthesizeStack();
const QUEUE = "AWS::SQS::Queue";
const MAPPING = "AWS::Lambda::EventSourceMapping";
const consumer = single(
  template,
  "AWS::Lambda::Function",
  (f) => f.Metadata["agentbus:group"] === GROUP && f.Metadata["agentbus:kind"] === "consumer",
);
const events = single(template, "AWS::DynamoDB::Table", (t) =>
  String(JSON.stringify(t.Properties.StreamSpecification)).includes("NEW_IMAGE"),
);
const mappings = resources(
  template,
  MAPPING,
  (m) => refersTo(m.Properties.FunctionName) === consumer.id,
);
const streamMapping = mappings.find(
  (m) =>
    JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify(getAtt(events.id, "StreamArn")),
) as Resource;
const env = (consumer.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const queueOf = (ref: unknown) => single(template, QUEUE, (q) => q.id === refersTo(ref));

describe("stream delivery (the conversation projection)", () => {
  it("has no rule, no buffer, no dispatch function and no FIFO queue", () => {
    expect(ofGroup(template, "AWS::Events::Rule", GROUP)).toEqual([]);
    expect(
      functionsOfKind(template, "dispatch").map((f) => f.Metadata["agentbus:group"]),
    ).not.toContain(GROUP);
    const queues = ofGroup(template, QUEUE, GROUP);
    expect(queues).toHaveLength(2);
    for (const q of queues) expect(q.Properties.FifoQueue).toBeUndefined();
  });

  it("reads the events table's stream from its oldest record, in batches gathered for 2 s, one batch a shard at a time", () => {
    expect(streamMapping).toBeDefined();
    expect(streamMapping.Properties).toMatchObject({
      StartingPosition: "TRIM_HORIZON",
      BatchSize: 100,
      MaximumBatchingWindowInSeconds: 2,
      ParallelizationFactor: 1,
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 5,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("lets through only the INSERTs of the types the role subscribes to", () => {
    const filters = (streamMapping.Properties.FilterCriteria as { Filters: { Pattern: string }[] })
      .Filters;
    expect(filters).toHaveLength(1);
    const pattern = JSON.parse(filters[0]?.Pattern ?? "{}");
    expect(pattern.eventName).toEqual(["INSERT"]);
    expect([...pattern.dynamodb.NewImage.event_type.S].sort()).toEqual(
      [...conversationProjection.subscriptions].sort(),
    );
  });

  it("parks the batches whose retries ran out in the group's standard dead-letter queue", () => {
    const destination = (
      streamMapping.Properties.DestinationConfig as { OnFailure: { Destination: unknown } }
    ).OnFailure.Destination;
    const dlq = queueOf(env.DEAD_LETTER_QUEUE_URL);
    expect(refersTo(destination)).toBe(dlq.id);
    // The group's queue holds redriven dead letters only, read in batches of at most 10.
    const queue = queueOf(env.QUEUE_URL);
    const sqsMapping = mappings.find((m) => refersTo(m.Properties.EventSourceArn) === queue.id);
    expect(sqsMapping?.Properties.BatchSize).toBe(10);
    expect(mappings).toHaveLength(2);
  });

  it("may read the stream and send to its dead-letter queue, and nothing on the bus", () => {
    const statements = statementsOf(template, consumer);
    const onStream = allowedOn(statements, getAtt(events.id, "StreamArn"));
    for (const action of [
      "dynamodb:GetRecords",
      "dynamodb:GetShardIterator",
      "dynamodb:DescribeStream",
    ])
      expect(onStream).toContain(action);
    const dlq = queueOf(env.DEAD_LETTER_QUEUE_URL);
    expect(allowedOn(statements, getAtt(dlq.id, "Arn"))).toContain("sqs:SendMessage");
    expect(statements.flatMap((s) => s.Action)).not.toContain("events:PutEvents");
  });

  it("alarms when it falls behind the stream", () => {
    const alarm = single(
      template,
      "AWS::CloudWatch::Alarm",
      (a) => a.Metadata["agentbus:group"] === GROUP && a.Properties.MetricName === "IteratorAge",
    );
    expect(alarm.Properties.Threshold).toBe(Duration.minutes(5).toSeconds());
  });

  it("keeps the filter of the longest subscription list within Lambda's pattern limit", () => {
    expect(
      JSON.stringify(streamFilterOf(conversationProjection.subscriptions)).length,
    ).toBeLessThan(MAX_FILTER_PATTERN_LENGTH);
  });
});

describe("which groups may read the stream", () => {
  const declared = (role: GroupDeclaration["role"], extra: Partial<GroupDeclaration> = {}) =>
    groupProblems(
      {
        name: role.group,
        role,
        handler: "functions/roles/task-projection/handler.ts",
        delivery: "stream",
        ...extra,
      },
      new Set(["commands", "events", "audit"]),
    );

  it("accepts a projection of stored events, with batches up to 10,000", () => {
    expect(declared(conversationProjection, { batchSize: 10_000 })).toEqual([]);
    expect(declared(conversationProjection, { batchSize: 10_001 })).toEqual([
      expect.stringMatching(/batchSize is 10001, must be an integer from 1 to 10000/),
    ]);
  });

  it("refuses a role that emits, naming what it emits", () => {
    const emitting = { ...conversationProjection, emits: ["support.routed"] };
    expect(declared(emitting)).toEqual([
      expect.stringMatching(/emit nothing, and the role emits "support.routed"/),
    ]);
  });

  it("refuses unsequenced types, which the event store does not hold (the task projection's feedback)", () => {
    expect(declared(taskProjection)).toEqual([
      expect.stringMatching(/does not hold the unsequenced "task.feedback.received"/),
    ]);
  });

  it("refuses a heartbeat that extends a message's visibility", () => {
    expect(declared(conversationProjection, { needs: { heartbeat: "visibility" } })).toEqual([
      expect.stringMatching(/no message visibility to extend/),
    ]);
  });
});
