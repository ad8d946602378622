import { Duration, type Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { Queue } from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import { ConsumerGroup } from "../../lib/infra/constructs/consumer-group";
import type { ConsumerGroupProps } from "../../lib/infra/constructs/consumer-group-props";
import { AgentBusTables } from "../../lib/infra/constructs/tables";
import { Topic } from "../../lib/infra/constructs/topic";
import { functionsOfKind, resources, single, testStack } from "./synth";

const ENTRY = "functions/roles/task-projection/handler.ts";

/** A stack with tables and an events and a commands topic, and a group built from `overrides`. */
function build(
  overrides: (topics: { events: Topic; commands: Topic }) => Partial<ConsumerGroupProps>,
) {
  const stack: Stack = testStack();
  const tables = new AgentBusTables(stack, "Tables");
  const topics = {
    events: new Topic(stack, "Events", { topicName: "events" }),
    commands: new Topic(stack, "Commands", { topicName: "commands" }),
  };
  const group = new ConsumerGroup(stack, "Group", {
    groupName: "test-group",
    subscriptions: [{ topic: topics.events, eventTypes: ["task.accepted"] }],
    entry: ENTRY,
    tables,
    ...overrides(topics),
  });
  return { stack, group };
}

describe("ConsumerGroup validation", () => {
  it("rejects an event type that is not in the registry, naming it", () => {
    expect(() =>
      build(({ events }) => ({ subscriptions: [{ topic: events, eventTypes: ["task.nope"] }] })),
    ).toThrow(/"task\.nope" is not in the registry/);
  });

  it("rejects an event type subscribed from the wrong topic, naming type and topics", () => {
    expect(() =>
      build(({ commands }) => ({
        subscriptions: [{ topic: commands, eventTypes: ["task.accepted"] }],
      })),
    ).toThrow(/"task\.accepted" is published on topic "events", not "commands"/);
  });

  it("rejects a visibility timeout under 6x the function timeout, naming both", () => {
    expect(() =>
      build(() => ({
        functionTimeout: Duration.seconds(60),
        visibilityTimeout: Duration.seconds(300),
      })),
    ).toThrow(/visibilityTimeout 300s is under 6x functionTimeout 60s/);
  });

  it("rejects a group name that is not kebab-case, naming it", () => {
    expect(() => build(() => ({ groupName: "Task_Projection" }))).toThrow(/"Task_Projection"/);
  });

  it("rejects a batch size above 10 (FIFO), naming it", () => {
    expect(() => build(() => ({ batchSize: 11 }))).toThrow(/batchSize is 11/);
  });

  it("rejects a concurrency outside 2..1000, naming it", () => {
    expect(() => build(() => ({ maxConcurrency: 1 }))).toThrow(/maxConcurrency is 1/);
  });

  it("rejects a retry ceiling above 12 hours - 1 second, naming it", () => {
    expect(() => build(() => ({ retryMaxSeconds: 43_200 }))).toThrow(/retryMaxSeconds is 43200/);
  });

  it("rejects a delivery it does not implement, naming it", () => {
    expect(() =>
      build(() => ({ delivery: "carrier-pigeon" as unknown as ConsumerGroupProps["delivery"] })),
    ).toThrow(/delivery "carrier-pigeon" is not supported/);
  });

  it("gathers the delivery hop's batches for the window asked, dispatcher or pipe", () => {
    const window = Duration.seconds(2);
    const dispatched = Template.fromStack(build(() => ({ deliveryBatchingWindow: window })).stack);
    const [dispatcher] = functionsOfKind(dispatched, "dispatch");
    const mapping = single(dispatched, "AWS::Lambda::EventSourceMapping", (m) =>
      JSON.stringify(m.Properties.FunctionName).includes(dispatcher?.id ?? "?"),
    );
    expect(mapping.Properties).toMatchObject({ BatchSize: 10, MaximumBatchingWindowInSeconds: 2 });
    const piped = Template.fromStack(
      build(() => ({ delivery: "pipe", deliveryBatchingWindow: window })).stack,
    );
    expect(single(piped, "AWS::Pipes::Pipe", () => true).Properties.SourceParameters).toEqual({
      SqsQueueParameters: { BatchSize: 10, MaximumBatchingWindowInSeconds: 2 },
    });
    const plain = Template.fromStack(build(() => ({})).stack);
    for (const m of resources(plain, "AWS::Lambda::EventSourceMapping"))
      expect(m.Properties.MaximumBatchingWindowInSeconds, m.id).toBeUndefined();
  });

  it("rejects a delivery batching window on an unordered group or past 300 s, naming it", () => {
    expect(() =>
      build(() => ({ ordering: "none", deliveryBatchingWindow: Duration.seconds(1) })),
    ).toThrow(/deliveryBatchingWindow 1 second needs a FIFO group/);
    expect(() => build(() => ({ deliveryBatchingWindow: Duration.seconds(301) }))).toThrow(
      /deliveryBatchingWindow \(seconds\) .*301/,
    );
  });

  it("keys the FIFO queue by tenant lane with tenantConcurrency, and only a dispatcher can", () => {
    const laned = Template.fromStack(
      build(() => ({ maxConcurrency: 3, tenantConcurrency: 2 })).stack,
    );
    const variablesOf = (fn: { Properties: Record<string, unknown> } | undefined) =>
      (fn?.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables ?? {};
    const [dispatcher] = functionsOfKind(laned, "dispatch");
    expect(variablesOf(dispatcher).TENANT_CONCURRENCY).toBe("2");
    const consumerMapping = resources(laned, "AWS::Lambda::EventSourceMapping").find(
      (m) => !JSON.stringify(m.Properties.FunctionName).includes(dispatcher?.id ?? "?"),
    );
    expect(consumerMapping?.Properties.ScalingConfig).toEqual({ MaximumConcurrency: 3 });
    const [plain] = functionsOfKind(Template.fromStack(build(() => ({})).stack), "dispatch");
    expect(variablesOf(plain)).toHaveProperty("TARGET_QUEUE_URL");
    expect(variablesOf(plain)).not.toHaveProperty("TENANT_CONCURRENCY");
    expect(() =>
      build(() => ({ delivery: "pipe", maxConcurrency: 3, tenantConcurrency: 2 })),
    ).toThrow(/tenantConcurrency 2 needs delivery "dispatch-function"/);
    expect(() => build(() => ({ tenantConcurrency: 2 }))).toThrow(
      /tenantConcurrency is 2, must be an integer from 1 to 1/,
    );
  });

  it("rejects a pipe delivery without ordering", () => {
    expect(() => build(() => ({ ordering: "none", delivery: "pipe" }))).toThrow(
      /delivery "pipe" needs ordering "fifo"/,
    );
  });

  it("rejects a subscriber delivery without ordering, with tenant lanes or with a batching window", () => {
    expect(() => build(() => ({ ordering: "none", delivery: "subscriber" }))).toThrow(
      /delivery "subscriber" needs ordering "fifo"/,
    );
    expect(() =>
      build(() => ({ delivery: "subscriber", maxConcurrency: 3, tenantConcurrency: 2 })),
    ).toThrow(
      /tenantConcurrency 2 needs delivery "dispatch-function" or "relay" \(a subscriber copies/,
    );
    expect(() =>
      build(() => ({ delivery: "subscriber", deliveryBatchingWindow: Duration.seconds(2) })),
    ).toThrow(/deliveryBatchingWindow 2 seconds needs delivery "dispatch-function" or "pipe"/);
    expect(() => build(() => ({ delivery: "subscriber" }))).not.toThrow();
  });

  it("rejects a pipe name over 64 characters, naming it", () => {
    expect(() =>
      build(() => ({
        delivery: "pipe",
        stage: "staging-eu-west1",
        groupName: "a-rather-long-consumer-group-name-here-x",
      })),
    ).toThrow(
      /pipe name "agentbus-staging-eu-west1-a-rather-long-consumer-group-name-here-x" is 66/,
    );
  });

  it("accepts a stage of 20 characters, and rejects a queue name over 80 characters, naming it", () => {
    const stage = "pr-1234-feature-abcd";
    expect(() => build(() => ({ stage }))).not.toThrow();
    expect(() =>
      build(() => ({ stage, groupName: "a-rather-long-consumer-group-name-here-x" })),
    ).toThrow(
      /queue name "agentbus-pr-1234-feature-abcd-a-rather-long-consumer-group-name-here-x-buffer-dlq" is 81 characters, SQS allows 80/,
    );
  });

  it("rejects a standard dead-letter queue for a FIFO group, naming it", () => {
    const stack = testStack();
    const standard = new Queue(stack, "StandardDlq");
    expect(
      () =>
        new ConsumerGroup(stack, "Group", {
          groupName: "test-group",
          subscriptions: [
            {
              topic: new Topic(stack, "Events", { topicName: "events" }),
              eventTypes: ["plan.created"],
            },
          ],
          entry: ENTRY,
          tables: new AgentBusTables(stack, "Tables"),
          deadLetterQueue: standard,
        }),
    ).toThrow(
      /deadLetterQueue Test\/StandardDlq is a standard queue: the dead-letter queue of a FIFO queue must be FIFO/,
    );
  });

  it("rejects a FIFO dead-letter queue for a standard group", () => {
    const stack = testStack();
    const fifo = new Queue(stack, "FifoDlq", { fifo: true });
    expect(
      () =>
        new ConsumerGroup(stack, "Group", {
          groupName: "test-group",
          ordering: "none",
          subscriptions: [
            {
              topic: new Topic(stack, "Events", { topicName: "events" }),
              eventTypes: ["plan.created"],
            },
          ],
          entry: ENTRY,
          tables: new AgentBusTables(stack, "Tables"),
          deadLetterQueue: fifo,
        }),
    ).toThrow(/deadLetterQueue Test\/FifoDlq is a FIFO queue/);
  });

  it("rejects a batch size above 10000 on a standard queue, naming it", () => {
    expect(() => build(() => ({ ordering: "none", batchSize: 10_001 }))).toThrow(
      /batchSize is 10001, must be an integer from 1 to 10000/,
    );
  });

  it("rejects a batching window on a FIFO queue", () => {
    expect(() => build(() => ({ maxBatchingWindow: Duration.seconds(5) }))).toThrow(
      /maxBatchingWindow 5 seconds is not supported on a FIFO queue/,
    );
  });

  it("rejects two subscriptions to one topic (one rule per topic)", () => {
    expect(() =>
      build(({ events }) => ({
        subscriptions: [
          { topic: events, eventTypes: ["task.accepted"] },
          { topic: events, eventTypes: ["plan.created"] },
        ],
      })),
    ).toThrow(/topic "events" appears in two subscriptions/);
  });
});

describe("ConsumerGroup settings reach the template", () => {
  const { stack } = build(() => ({
    maxReceiveCount: 3,
    batchSize: 4,
    maxConcurrency: 7,
    functionTimeout: Duration.seconds(60),
    retryBaseSeconds: 5,
    retryMaxSeconds: 600,
    inboxTtl: Duration.days(14),
    maxMessageAge: Duration.minutes(10),
  }));
  const template = Template.fromStack(stack);
  const fifo = single(
    template,
    "AWS::SQS::Queue",
    (q) => q.Properties.FifoQueue === true && q.Properties.RedrivePolicy !== undefined,
  );
  const [consumer] = functionsOfKind(template, "consumer");

  it("maxReceiveCount applies to the FIFO queue and the buffer queue", () => {
    const redriven = resources(
      template,
      "AWS::SQS::Queue",
      (q) => q.Properties.RedrivePolicy !== undefined,
    );
    expect(redriven.length).toBeGreaterThan(0);
    for (const queue of redriven) {
      expect(queue.Properties.RedrivePolicy, queue.id).toMatchObject({ maxReceiveCount: 3 });
    }
  });

  it("the visibility timeout defaults to 6x the function timeout", () => {
    expect(consumer?.Properties.Timeout).toBe(60);
    expect(fifo.Properties.VisibilityTimeout).toBe(360);
  });

  it("batch size and concurrency go to the consumer's event source mapping", () => {
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: { "Fn::GetAtt": [fifo.id, "Arn"] },
      BatchSize: 4,
      ScalingConfig: { MaximumConcurrency: 7 },
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("retry and inbox settings go to the consumer's environment", () => {
    expect(consumer?.Properties.Environment).toMatchObject({
      Variables: { RETRY_BASE_SECONDS: "5", RETRY_MAX_SECONDS: "600", INBOX_TTL_DAYS: "14" },
    });
  });

  it("the message age alarm uses the configured threshold", () => {
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateAgeOfOldestMessage",
      Dimensions: [{ Name: "QueueName", Value: { "Fn::GetAtt": [fifo.id, "QueueName"] } }],
      Threshold: 600,
    });
  });

  it("queue names carry stage and group, FIFO ones ending in .fifo", () => {
    const names = resources(template, "AWS::SQS::Queue").map((q) => q.Properties.QueueName);
    expect(names).toEqual(
      expect.arrayContaining([
        "agentbus-dev-test-group.fifo",
        "agentbus-dev-test-group-dlq.fifo",
        "agentbus-dev-test-group-buffer",
        "agentbus-dev-test-group-buffer-dlq",
      ]),
    );
  });
});

describe("ConsumerGroup without ordering, large batches", () => {
  const { stack } = build(() => ({ ordering: "none", batchSize: 500 }));
  const template = Template.fromStack(stack);

  it("gathers batches over 10 for a second (Lambda requires a batching window then)", () => {
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      BatchSize: 500,
      MaximumBatchingWindowInSeconds: 1,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("has standard queues only, and no buffer", () => {
    const names = resources(template, "AWS::SQS::Queue").map((q) => q.Properties.QueueName);
    expect(names.sort()).toEqual(["agentbus-dev-test-group", "agentbus-dev-test-group-dlq"]);
  });
});
