import { describe, expect, it } from "vitest";
import { resourceInput, skippedTypes } from "../../lib/local/deploy";
import { createEventBusRequest, eventBusPhysical } from "../../lib/local/deploy/buses";
import { functionOf } from "../../lib/local/deploy/functions";
import { mappingOf } from "../../lib/local/deploy/mappings";
import type { Placement, ResourceInput } from "../../lib/local/deploy/model";
import { stackOutputs } from "../../lib/local/deploy/outputs";
import { pipeOf } from "../../lib/local/deploy/pipes";
import { createQueueRequest, queuePhysical } from "../../lib/local/deploy/queues";
import { DEPLOYED_TYPES, deployerOf } from "../../lib/local/deploy/registry";
import { ruleRequests } from "../../lib/local/deploy/rules";
import { isScheduleRule, rateSeconds, scheduleOf } from "../../lib/local/deploy/schedules";
import {
  createTableRequest,
  tablePhysical,
  timeToLiveRequest,
} from "../../lib/local/deploy/tables";
import { createTopicRequest, topicPhysical } from "../../lib/local/deploy/topics";
import type { Physical, Template, TemplateResource } from "../../lib/local/template";

/**
 * The local deployers' property readers, as data: each turns a template resource's (resolved)
 * properties into the request it sends to the emulator or into what the runtime runs.
 */
const placement: Placement = { stackName: "AgentBus-t", region: "us-east-1", accountId: "1" };

/** A resource whose properties are already resolved (what a deployer reads through its proxy). */
function input(
  logicalId: string,
  Type: string,
  Properties: Record<string, unknown>,
  Metadata?: Record<string, unknown>,
): ResourceInput {
  return { logicalId, resource: { Type, Properties, Metadata }, props: Properties };
}

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
  it("passes timeouts, FIFO, content-based dedup and the redrive policy on as attributes", () => {
    const redrive = { deadLetterTargetArn: "arn:aws:sqs:us-east-1:1:dlq.fifo", maxReceiveCount: 5 };
    const queue = input("Queue", "AWS::SQS::Queue", {
      QueueName: "q.fifo",
      FifoQueue: true,
      ContentBasedDeduplication: true,
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

describe("schedule rules", () => {
  const template = (sweeper: TemplateResource): Template => ({
    Resources: { Sweeper: sweeper },
  });
  const rule = input("Every", "AWS::Events::Rule", {
    ScheduleExpression: "rate(1 minute)",
    Targets: [{ Id: "T", Arn: { "Fn::GetAtt": ["Sweeper", "Arn"] } }],
  });

  it("records the rule's function targets for the runtime, with its rate", () => {
    expect(isScheduleRule(rule)).toBe(true);
    expect(scheduleOf(rule, template({ Type: "AWS::Lambda::Function" }))).toEqual({
      logicalId: "Every",
      expression: "rate(1 minute)",
      rateSeconds: 60,
      functionLogicalIds: ["Sweeper"],
    });
  });

  it("refuses a target that is not a function of the stack", () => {
    expect(() => scheduleOf(rule, template({ Type: "AWS::SQS::Queue" }))).toThrow(
      /schedule rule Every: the local runtime runs only function targets/,
    );
    expect(isScheduleRule(input("P", "AWS::Events::Rule", { EventPattern: {} }))).toBe(false);
  });

  it("reads rate expressions in minutes, hours and days, and nothing else", () => {
    expect(rateSeconds("rate(1 minute)")).toBe(60);
    expect(rateSeconds(" rate(5 minutes) ")).toBe(300);
    expect(rateSeconds("rate(2 hours)")).toBe(7200);
    expect(rateSeconds("rate(1 day)")).toBe(86_400);
    expect(rateSeconds("cron(0 12 * * ? *)")).toBeUndefined();
    expect(rateSeconds("rate(1 second)")).toBeUndefined();
  });
});

describe("function deployer", () => {
  it("records the handler module, kind, group, environment as strings and timeout", () => {
    const fn = input(
      "Consumer",
      "AWS::Lambda::Function",
      { Environment: { Variables: { STATE_TABLE: "state", BATCH: 10 } }, Timeout: 30 },
      {
        "agentbus:entry": "functions/handlers/consumer.ts",
        "agentbus:kind": "consumer",
        "agentbus:group": "worker",
      },
    );
    expect(functionOf(fn, placement)).toEqual({
      logicalId: "Consumer",
      name: "AgentBus-t-Consumer",
      entry: "functions/handlers/consumer.ts",
      kind: "consumer",
      group: "worker",
      environment: { STATE_TABLE: "state", BATCH: "10" },
      timeoutSeconds: 30,
    });
  });

  it("defaults as Lambda does and refuses a function without a handler module", () => {
    const fn = input(
      "F",
      "AWS::Lambda::Function",
      { FunctionName: "f" },
      { "agentbus:entry": "f.ts" },
    );
    expect(functionOf(fn, placement)).toMatchObject({
      name: "f",
      kind: "unknown",
      group: undefined,
      environment: {},
      timeoutSeconds: 3,
    });
    expect(() => functionOf(input("G", "AWS::Lambda::Function", {}), placement)).toThrow(
      /function G has no agentbus:entry metadata/,
    );
  });
});

describe("event source mapping deployer", () => {
  const mapping = (props: Record<string, unknown>, functionName: unknown = { Ref: "Fn" }) => {
    const resource = {
      Type: "AWS::Lambda::EventSourceMapping",
      Properties: { ...props, FunctionName: functionName },
    };
    return mappingOf({ logicalId: "M", resource, props: { ...props, FunctionName: "resolved" } });
  };

  it("reads an SQS mapping: batch size, partial batch response and concurrency", () => {
    expect(
      mapping({
        EventSourceArn: "arn:aws:sqs:us-east-1:1:q.fifo",
        BatchSize: 5,
        FunctionResponseTypes: ["ReportBatchItemFailures"],
        ScalingConfig: { MaximumConcurrency: 3 },
      }),
    ).toEqual({
      logicalId: "M",
      functionLogicalId: "Fn",
      eventSourceArn: "arn:aws:sqs:us-east-1:1:q.fifo",
      source: "sqs",
      batchSize: 5,
      reportBatchItemFailures: true,
      maximumConcurrency: 3,
      bisectBatchOnFunctionError: false,
      maximumRetryAttempts: undefined,
      startingPosition: undefined,
      filters: [],
      onFailureArn: undefined,
    });
  });

  it("reads a stream mapping: filters, retries, bisection and the on-failure destination", () => {
    const pattern = {
      eventName: ["INSERT"],
      dynamodb: { NewImage: { pk: { S: [{ prefix: "s#" }] } } },
    };
    expect(
      mapping({
        EventSourceArn: "arn:aws:dynamodb:us-east-1:1:table/events/stream/x",
        StartingPosition: "TRIM_HORIZON",
        BisectBatchOnFunctionError: true,
        MaximumRetryAttempts: "4",
        FilterCriteria: { Filters: [{ Pattern: JSON.stringify(pattern) }] },
        DestinationConfig: { OnFailure: { Destination: "arn:aws:sqs:us-east-1:1:failed" } },
      }),
    ).toMatchObject({
      source: "dynamodb-stream",
      batchSize: 100,
      reportBatchItemFailures: false,
      bisectBatchOnFunctionError: true,
      maximumRetryAttempts: 4,
      startingPosition: "TRIM_HORIZON",
      filters: [pattern],
      onFailureArn: "arn:aws:sqs:us-east-1:1:failed",
    });
    expect(mapping({ EventSourceArn: "arn:aws:sqs:us-east-1:1:q" }).batchSize).toBe(10);
  });

  it("refuses a mapping whose function is not a Ref to the stack's function", () => {
    expect(() => mapping({ EventSourceArn: "arn:aws:sqs:x" }, "fn-name")).toThrow(
      /event source mapping M: FunctionName must Ref a function of the stack/,
    );
  });
});

describe("pipe deployer", () => {
  it("reads an SQS to SQS pipe with its group and dedup paths and input template", () => {
    const pipe = input("Pipe", "AWS::Pipes::Pipe", {
      Source: "arn:aws:sqs:us-east-1:1:buffer",
      Target: "arn:aws:sqs:us-east-1:1:q.fifo",
      SourceParameters: { SqsQueueParameters: { BatchSize: 1 } },
      TargetParameters: {
        InputTemplate: "<$.body.detail>",
        SqsQueueParameters: {
          MessageGroupId: "$.body.detail.order_key",
          MessageDeduplicationId: "$.body.detail.event_id",
        },
      },
    });
    expect(pipeOf(pipe)).toEqual({
      logicalId: "Pipe",
      sourceArn: "arn:aws:sqs:us-east-1:1:buffer",
      targetArn: "arn:aws:sqs:us-east-1:1:q.fifo",
      batchSize: 1,
      messageGroupId: "$.body.detail.order_key",
      messageDeduplicationId: "$.body.detail.event_id",
      inputTemplate: "<$.body.detail>",
    });
  });

  it("takes batches of 10 by default and refuses anything but SQS to SQS", () => {
    const props = { Source: "arn:aws:sqs:us-east-1:1:a", Target: "arn:aws:sqs:us-east-1:1:b" };
    expect(pipeOf(input("P", "AWS::Pipes::Pipe", props)).batchSize).toBe(10);
    const toBus = { ...props, Target: "arn:aws:events:us-east-1:1:event-bus/b" };
    expect(() => pipeOf(input("P", "AWS::Pipes::Pipe", toBus))).toThrow(
      /pipe P: the local runtime runs SQS -> SQS pipes only/,
    );
  });
});

describe("the deployment as a whole", () => {
  const physical = new Map<string, Physical>([
    ["Queue", { ref: "http://q", attributes: { Arn: "arn:q" } }],
  ]);
  const ctx = { ...placement, physical };

  it("has a deployer for each type it creates or runs, and skips every other type", () => {
    expect([...DEPLOYED_TYPES].sort()).toEqual([
      "AWS::DynamoDB::Table",
      "AWS::Events::EventBus",
      "AWS::Events::Rule",
      "AWS::Lambda::EventSourceMapping",
      "AWS::Lambda::Function",
      "AWS::Pipes::Pipe",
      "AWS::SNS::Topic",
      "AWS::SQS::Queue",
    ]);
    expect(deployerOf("AWS::IAM::Role")).toBeUndefined();
    expect(deployerOf("toString")).toBeUndefined();
    const template: Template = {
      Resources: {
        Queue: { Type: "AWS::SQS::Queue" },
        Role: { Type: "AWS::IAM::Role" },
        Policy: { Type: "AWS::IAM::Policy" },
        Other: { Type: "AWS::IAM::Role" },
      },
    };
    expect(skippedTypes(template)).toEqual({ "AWS::IAM::Role": 2, "AWS::IAM::Policy": 1 });
  });

  it("resolves a property only when its deployer reads it", () => {
    const resource = {
      Type: "AWS::SQS::Queue",
      Properties: {
        RedrivePolicy: { deadLetterTargetArn: { "Fn::GetAtt": ["Queue", "Arn"] } },
        KmsMasterKeyId: { Ref: "SkippedKey" },
      },
    };
    const { props } = resourceInput("Q", resource, ctx);
    expect(props.RedrivePolicy).toEqual({ deadLetterTargetArn: "arn:q" });
    expect(() => props.KmsMasterKeyId).toThrow(/Ref SkippedKey/);
  });

  it("resolves the outputs it can and leaves out those about resources it skipped", () => {
    const template: Template = {
      Resources: {},
      Outputs: {
        QueueUrl: { Value: { Ref: "Queue" } },
        RoleArn: { Value: { "Fn::GetAtt": ["Role", "Arn"] } },
        Region: { Value: { Ref: "AWS::Region" } },
      },
    };
    expect(stackOutputs(template, ctx)).toEqual({ QueueUrl: "http://q", Region: "us-east-1" });
  });
});
