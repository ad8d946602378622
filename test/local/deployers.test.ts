import { describe, expect, it } from "vitest";
import { archivePhysical, createArchiveRequest } from "../../lib/dev/local/deploy/archives";
import { createEventBusRequest, eventBusPhysical } from "../../lib/dev/local/deploy/buses";
import { createKeyRequest, keyPhysical } from "../../lib/dev/local/deploy/keys";
import { createQueueRequest, queuePhysical } from "../../lib/dev/local/deploy/queues";
import { ruleRequests } from "../../lib/dev/local/deploy/rules";
import {
  createTableRequest,
  tablePhysical,
  timeToLiveRequest,
} from "../../lib/dev/local/deploy/tables";
import { createTopicRequest, topicPhysical } from "../../lib/dev/local/deploy/topics";
import { input, placement } from "./deployer-input";

/**
 * The deployers of what the emulator holds, as data: each turns a template resource's (resolved)
 * properties into the requests it sends to the emulator.
 */
describe("table deployer", () => {
  const keys = {
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
    AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
  };

  it("asks for the template's keys, indexes and stream, on demand unless billed otherwise", () => {
    const indexes = [{ IndexName: "due", KeySchema: [], Projection: { ProjectionType: "ALL" } }];
    const table = input("Events", "AWS::DynamoDB::Table", {
      TableName: "events",
      ...keys,
      GlobalSecondaryIndexes: indexes,
      StreamSpecification: { StreamViewType: "NEW_IMAGE" },
    });
    expect(createTableRequest(table, placement)).toEqual({
      TableName: "events",
      ...keys,
      BillingMode: "PAY_PER_REQUEST",
      GlobalSecondaryIndexes: indexes,
      StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_IMAGE" },
    });
  });

  it("names an unnamed table after the stack and logical id", () => {
    const table = input("State", "AWS::DynamoDB::Table", { ...keys, BillingMode: "PROVISIONED" });
    expect(createTableRequest(table, placement)).toMatchObject({
      TableName: "AgentBus-t-State",
      BillingMode: "PROVISIONED",
      StreamSpecification: undefined,
    });
  });

  it("provisions a table that holds provisioned throughput and names no billing mode (CloudFormation's default)", () => {
    const throughput = { ReadCapacityUnits: 1, WriteCapacityUnits: 1 };
    const table = input("State", "AWS::DynamoDB::Table", {
      ...keys,
      ProvisionedThroughput: throughput,
    });
    expect(createTableRequest(table, placement)).toMatchObject({
      BillingMode: "PROVISIONED",
      ProvisionedThroughput: throughput,
    });
  });

  it("turns an enabled TimeToLiveSpecification into its own request, and no other", () => {
    const ttl = (spec: unknown) =>
      timeToLiveRequest(input("T", "AWS::DynamoDB::Table", { TimeToLiveSpecification: spec }), "t");
    expect(ttl({ AttributeName: "expires_at", Enabled: true })).toEqual({
      TableName: "t",
      TimeToLiveSpecification: { AttributeName: "expires_at", Enabled: true },
    });
    expect(ttl({ AttributeName: "expires_at", Enabled: false })).toBeUndefined();
    expect(ttl({ Enabled: true })).toBeUndefined();
    expect(ttl(undefined)).toBeUndefined();
  });

  it("gives Ref the name and GetAtt the ARN and, with a stream, the stream ARN", () => {
    expect(tablePhysical("t", "arn:t", "arn:s")).toEqual({
      ref: "t",
      attributes: { Arn: "arn:t", StreamArn: "arn:s" },
    });
    expect(tablePhysical("t", "arn:t", undefined)).toEqual({
      ref: "t",
      attributes: { Arn: "arn:t" },
    });
  });
});

describe("queue deployer", () => {
  it("passes timeouts, FIFO, high throughput, content-based dedup and the redrive policy on as attributes", () => {
    const redrive = { deadLetterTargetArn: "arn:aws:sqs:us-east-1:1:dlq.fifo", maxReceiveCount: 5 };
    const queue = input("Queue", "AWS::SQS::Queue", {
      QueueName: "q.fifo",
      FifoQueue: true,
      ContentBasedDeduplication: true,
      DeduplicationScope: "messageGroup",
      FifoThroughputLimit: "perMessageGroupId",
      VisibilityTimeout: 180,
      MessageRetentionPeriod: 1_209_600,
      RedrivePolicy: redrive,
      KmsMasterKeyId: "alias/aws/sqs",
    });
    expect(createQueueRequest(queue, placement)).toEqual({
      QueueName: "q.fifo",
      Attributes: {
        VisibilityTimeout: "180",
        MessageRetentionPeriod: "1209600",
        DeduplicationScope: "messageGroup",
        FifoThroughputLimit: "perMessageGroupId",
        FifoQueue: "true",
        ContentBasedDeduplication: "true",
        RedrivePolicy: JSON.stringify(redrive),
      },
    });
  });

  it("names an unnamed FIFO queue with the .fifo suffix inside the 80-character limit", () => {
    const long = "L".repeat(100);
    const { QueueName } = createQueueRequest(
      input(long, "AWS::SQS::Queue", { FifoQueue: "true" }),
      placement,
    );
    expect(QueueName).toHaveLength(80);
    expect(QueueName).toMatch(/^AgentBus-t-L+\.fifo$/);
    expect(createQueueRequest(input("Q", "AWS::SQS::Queue", {}), placement)).toEqual({
      QueueName: "AgentBus-t-Q",
      Attributes: {},
    });
  });

  it("gives Ref the URL and GetAtt the ARN, name and URL", () => {
    expect(queuePhysical("q", "http://q", "arn:q")).toEqual({
      ref: "http://q",
      attributes: { Arn: "arn:q", QueueName: "q", QueueUrl: "http://q" },
    });
  });
});

describe("topic and bus deployers", () => {
  it("creates a FIFO topic with content-based dedup; Ref is its ARN", () => {
    const topic = input("Replies", "AWS::SNS::Topic", {
      TopicName: "replies.fifo",
      FifoTopic: true,
      ContentBasedDeduplication: false,
    });
    expect(createTopicRequest(topic, placement)).toEqual({
      Name: "replies.fifo",
      Attributes: { FifoTopic: "true", ContentBasedDeduplication: "false" },
    });
    expect(createTopicRequest(input("R", "AWS::SNS::Topic", {}), placement)).toEqual({
      Name: "AgentBus-t-R",
      Attributes: {},
    });
    expect(topicPhysical("r", "arn:r")).toEqual({
      ref: "arn:r",
      attributes: { TopicArn: "arn:r", TopicName: "r" },
    });
  });

  it("creates a bus by its name; Ref is the name", () => {
    const bus = input("Bus", "AWS::Events::EventBus", { Name: "agentbus-t-events" });
    expect(createEventBusRequest(bus)).toEqual({ Name: "agentbus-t-events" });
    expect(eventBusPhysical("b", "arn:b")).toEqual({
      ref: "b",
      attributes: { Arn: "arn:b", Name: "b" },
    });
  });
});

describe("KMS key deployer", () => {
  it("creates a key with the template's description, spec and usage, and no policy", () => {
    const key = input("Key", "AWS::KMS::Key", {
      Description: "wraps data keys",
      EnableKeyRotation: true,
      KeyPolicy: { Statement: [] },
    });
    expect(createKeyRequest(key)).toEqual({ Description: "wraps data keys" });
    const signing = input("Key", "AWS::KMS::Key", { KeySpec: "RSA_2048", KeyUsage: "SIGN_VERIFY" });
    expect(createKeyRequest(signing)).toEqual({ KeySpec: "RSA_2048", KeyUsage: "SIGN_VERIFY" });
  });

  it("gives Ref the key id and GetAtt its ARN and id", () => {
    const arn = "arn:aws:kms:us-east-1:123456789012:key/k-1";
    expect(keyPhysical("k-1", arn)).toEqual({ ref: "k-1", attributes: { Arn: arn, KeyId: "k-1" } });
  });
});

describe("archive deployer", () => {
  it("archives the bus's events that match the pattern, for the retention, under the template's name", () => {
    const archive = input("Archive", "AWS::Events::Archive", {
      ArchiveName: "agentbus-t-events",
      SourceArn: "arn:aws:events:us-east-1:1:event-bus/agentbus-t-events",
      Description: "every agentbus* event",
      EventPattern: { source: [{ prefix: "agentbus" }] },
      RetentionDays: 30,
    });
    expect(createArchiveRequest(archive, placement)).toEqual({
      ArchiveName: "agentbus-t-events",
      EventSourceArn: "arn:aws:events:us-east-1:1:event-bus/agentbus-t-events",
      Description: "every agentbus* event",
      EventPattern: JSON.stringify({ source: [{ prefix: "agentbus" }] }),
      RetentionDays: 30,
    });
    expect(archivePhysical("a", "arn:a")).toEqual({
      ref: "a",
      attributes: { Arn: "arn:a", ArchiveName: "a" },
    });
  });

  it("names an unnamed archive after the stack and logical id, at most 48 characters", () => {
    const archive = input("A".repeat(60), "AWS::Events::Archive", { SourceArn: "arn:b" });
    const request = createArchiveRequest(archive, placement);
    expect(request.ArchiveName).toHaveLength(48);
    expect(request.ArchiveName.startsWith("AgentBus-t-AAA")).toBe(true);
    expect(request).not.toHaveProperty("RetentionDays");
  });
});

describe("rule deployer", () => {
  it("puts a pattern rule on the bus named by the last part of its ARN, with its targets", () => {
    const pattern = { "detail-type": ["task.requested"] };
    const rule = input("Rule", "AWS::Events::Rule", {
      EventBusName: "arn:aws:events:us-east-1:1:event-bus/agentbus-t-events",
      EventPattern: pattern,
      Targets: [
        {
          Id: "Target0",
          Arn: "arn:aws:sqs:us-east-1:1:q.fifo",
          SqsParameters: { MessageGroupId: "g" },
          DeadLetterConfig: { Arn: "arn:dlq" },
          RetryPolicy: { MaximumRetryAttempts: 3 },
          InputPath: "$.detail",
          RoleArn: "arn:role",
        },
      ],
    });
    expect(ruleRequests(rule, placement)).toEqual({
      rule: {
        Name: "AgentBus-t-Rule",
        EventBusName: "agentbus-t-events",
        EventPattern: JSON.stringify(pattern),
        State: "ENABLED",
      },
      targets: {
        Rule: "AgentBus-t-Rule",
        EventBusName: "agentbus-t-events",
        Targets: [
          {
            Id: "Target0",
            Arn: "arn:aws:sqs:us-east-1:1:q.fifo",
            SqsParameters: { MessageGroupId: "g" },
            DeadLetterConfig: { Arn: "arn:dlq" },
            RetryPolicy: { MaximumRetryAttempts: 3 },
            InputPath: "$.detail",
          },
        ],
      },
    });
  });

  it("puts a named rule without targets on the default bus, and no targets", () => {
    const rule = input("R", "AWS::Events::Rule", {
      Name: "r",
      EventPattern: { source: ["x"] },
      State: "DISABLED",
    });
    expect(ruleRequests(rule, placement)).toEqual({
      rule: {
        Name: "r",
        EventBusName: "default",
        EventPattern: '{"source":["x"]}',
        State: "DISABLED",
      },
    });
  });
});
