import { describe, expect, it } from "vitest";
import { resourceInput, skippedTypes } from "../../lib/dev/local/deploy";
import { functionOf } from "../../lib/dev/local/deploy/functions";
import { mappingOf } from "../../lib/dev/local/deploy/mappings";
import { stackOutputs } from "../../lib/dev/local/deploy/outputs";
import { pipeOf } from "../../lib/dev/local/deploy/pipes";
import { DEPLOYED_TYPES, deployerOf } from "../../lib/dev/local/deploy/registry";
import { isScheduleRule, rateSeconds, scheduleOf } from "../../lib/dev/local/deploy/schedules";
import type { Physical, Template, TemplateResource } from "../../lib/dev/local/template";
import { input, placement } from "./deployer-input";

/**
 * The deployers of what the local runtime runs (functions, mappings, pipes, schedules) and the
 * deployment as a whole, as data.
 */
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
  it("records the handler module, kind, group, AWS client, environment as strings and timeout", () => {
    const fn = input(
      "Consumer",
      "AWS::Lambda::Function",
      {
        Environment: { Variables: { STATE_TABLE: "state", BATCH: 10 } },
        Timeout: 30,
        MemorySize: 512,
        Architectures: ["arm64"],
      },
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
      memoryMb: 512,
      architecture: "arm64",
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
      memoryMb: 128,
      architecture: "x86_64",
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
    return mappingOf({
      logicalId: "M",
      resource,
      props: { ...props, FunctionName: "resolved" },
      resolve: (value) => value,
    });
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
        MaximumBatchingWindowInSeconds: 2,
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
      maximumBatchingWindowSeconds: 2,
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
      "AWS::Events::Archive",
      "AWS::Events::EventBus",
      "AWS::Events::Rule",
      "AWS::EventsV2::EventBus",
      "AWS::EventsV2::Subscriber",
      "AWS::KMS::Key",
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
