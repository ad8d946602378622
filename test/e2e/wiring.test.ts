import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { DescribeTableCommand, DescribeTimeToLiveCommand } from "@aws-sdk/client-dynamodb";
import {
  DescribeArchiveCommand,
  DescribeRuleCommand,
  ListTargetsByRuleCommand,
} from "@aws-sdk/client-eventbridge";
import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AwsClients,
  deployTemplate,
  emulatorClients,
  type LocalDeployment,
} from "../../lib/dev/local/deploy";
import { ROOT, synthesize } from "../../lib/dev/local/synth";
import { resolve, type Template } from "../../lib/dev/local/template";
import { PROJECT_INTEGRATIONS, topology } from "../../lib/infra/project";
import { defineTopology } from "../../lib/infra/topology";
import { emulator } from "../support/aws";

/** The project's groups and one more, delivered by a subscriber of the events topic's new bus. */
function withSubscriberGroup() {
  return defineTopology({
    topics: topology.topics,
    groups: [
      ...topology.groups,
      {
        name: "subscribed-projection",
        role: { group: "subscribed-projection", subscriptions: ["task.accepted", "plan.created"] },
        handler: "functions/roles/task-projection/handler.ts",
        delivery: "subscriber",
      },
    ],
  });
}

/**
 * The local runtime's wiring equals the synthesized template's: every queue, rule, pattern,
 * target, table and event source mapping in the template is read back from the emulator (or from
 * the runtime's mapping table) and compared with the template's own properties.
 */
describe("local wiring equals the synthesized template", () => {
  let template: Template;
  let deployment: LocalDeployment;
  let clients: AwsClients;
  const of = (type: string) =>
    Object.entries(template.Resources).filter(([, r]) => r.Type === type);
  const props = (logicalId: string, key: string) =>
    resolve(template.Resources[logicalId]?.Properties?.[key], {
      region: deployment.region,
      accountId: deployment.accountId,
      stackName: deployment.stackName,
      physical: deployment.resources,
    });
  const physical = (logicalId: string) => {
    const p = deployment.resources.get(logicalId);
    if (!p) throw new Error(`${logicalId} was not deployed`);
    return p;
  };

  beforeAll(async () => {
    const stage = `wire${ulid().slice(-6).toLowerCase()}`;
    const synth = synthesize(stage, {
      topology: withSubscriberGroup(),
      integrations: PROJECT_INTEGRATIONS,
    });
    template = synth.template;
    clients = emulatorClients(emulator().endpoint);
    deployment = await deployTemplate(template, clients, {
      stackName: synth.stackName,
      region: "us-east-1",
    });
  }, 120_000);

  afterAll(() => {
    clients?.dynamodb.destroy();
    clients?.sqs.destroy();
    clients?.eventbridge.destroy();
  });

  it("deploys every queue with the template's FIFO, throughput, timeout, retention and redrive settings", async () => {
    expect(of("AWS::SQS::Queue").length).toBeGreaterThan(0);
    for (const [id] of of("AWS::SQS::Queue")) {
      const { Attributes = {} } = await clients.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: physical(id).ref, AttributeNames: ["All"] }),
      );
      const fifo = props(id, "FifoQueue") === true;
      expect(Attributes.FifoQueue === "true", id).toBe(fifo);
      for (const key of [
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DeduplicationScope",
        "FifoThroughputLimit",
      ]) {
        const expected = props(id, key);
        if (expected !== undefined)
          expect(Attributes[key as keyof typeof Attributes], `${id}.${key}`).toBe(String(expected));
      }
      const redrive = props(id, "RedrivePolicy") as
        | { deadLetterTargetArn: string; maxReceiveCount: number }
        | undefined;
      if (redrive) {
        expect(JSON.parse(Attributes.RedrivePolicy ?? "{}"), id).toMatchObject({
          deadLetterTargetArn: redrive.deadLetterTargetArn,
          maxReceiveCount: Number(redrive.maxReceiveCount),
        });
      } else {
        expect(Attributes.RedrivePolicy, id).toBeUndefined();
      }
    }
  });

  it("deploys every rule with the template's pattern, bus, targets, target DLQ and retry policy", async () => {
    const patternRules = of("AWS::Events::Rule").filter(
      ([, r]) => !r.Properties?.ScheduleExpression,
    );
    expect(patternRules.length).toBeGreaterThan(0);
    for (const [id] of patternRules) {
      if (deployment.bridges.some((b) => b.logicalId === id)) continue;
      const bus = String(props(id, "EventBusName")).split("/").at(-1);
      const rule = await clients.eventbridge.send(
        new DescribeRuleCommand({ Name: physical(id).ref, EventBusName: bus }),
      );
      expect(JSON.parse(rule.EventPattern ?? "{}"), id).toEqual(props(id, "EventPattern"));
      const { Targets = [] } = await clients.eventbridge.send(
        new ListTargetsByRuleCommand({ Rule: physical(id).ref, EventBusName: bus }),
      );
      const expected = props(id, "Targets") as Record<string, unknown>[];
      expect(Targets.map((t) => t.Arn).sort(), id).toEqual(expected.map((t) => t.Arn).sort());
      for (const target of expected) {
        const deployed = Targets.find((t) => t.Id === target.Id);
        if (target.DeadLetterConfig)
          expect(deployed?.DeadLetterConfig, id).toEqual(target.DeadLetterConfig);
        if (target.RetryPolicy) expect(deployed?.RetryPolicy, id).toEqual(target.RetryPolicy);
      }
    }
  });

  it("forwards what a bridge rule matches on the classic bus to the new bus it targets", async () => {
    const bridges = of("AWS::Events::Rule").filter(([, r]) =>
      JSON.stringify(r.Properties?.Targets ?? []).includes("EventBusArn"),
    );
    expect(bridges.length).toBe(1);
    expect(deployment.bridges.map((b) => b.logicalId)).toEqual(bridges.map(([id]) => id));
    for (const [id, rule] of bridges) {
      const bus = String(props(id, "EventBusName")).split("/").at(-1);
      const described = await clients.eventbridge.send(
        new DescribeRuleCommand({ Name: physical(id).ref, EventBusName: bus }),
      );
      expect(JSON.parse(described.EventPattern ?? "{}"), id).toEqual(props(id, "EventPattern"));
      const { Targets = [] } = await clients.eventbridge.send(
        new ListTargetsByRuleCommand({ Rule: physical(id).ref, EventBusName: bus }),
      );
      const bridge = deployment.bridges.find((b) => b.logicalId === id);
      const { Attributes } = await clients.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: bridge?.queueUrl,
          AttributeNames: ["QueueArn"],
        }),
      );
      expect(Targets.map((t) => t.Arn)).toEqual([Attributes?.QueueArn]);
      const [target] = (rule.Properties?.Targets ?? []) as { Arn: unknown }[];
      expect(bridge?.busArn).toBe(
        resolve(target?.Arn, {
          region: deployment.region,
          accountId: deployment.accountId,
          stackName: deployment.stackName,
          physical: deployment.resources,
        }),
      );
    }
  });

  it("runs every new bus and subscriber of the template with its filter, target and ids", () => {
    const buses = of("AWS::EventsV2::EventBus");
    expect(buses.length).toBe(1);
    expect(deployment.subscriberBuses.map((b) => b.logicalId)).toEqual(buses.map(([id]) => id));
    for (const [id] of buses) {
      const local = deployment.subscriberBuses.find((b) => b.logicalId === id);
      expect(local?.arn).toBe(physical(id).attributes.EventBusArn);
      expect(local?.name).toBe(props(id, "Name"));
      expect(local?.retentionDays).toBe(
        (props(id, "StorageConfiguration") as { RetentionPeriodInDays: number })
          .RetentionPeriodInDays,
      );
    }
    const subscribers = of("AWS::EventsV2::Subscriber");
    expect(subscribers.length).toBe(1);
    expect(deployment.subscribers.map((s) => s.logicalId)).toEqual(subscribers.map(([id]) => id));
    for (const [id, subscriber] of subscribers) {
      const invoke = subscriber.Properties?.InvokeConfiguration as {
        TargetArn: unknown;
        SqsParameters: { MessageGroupId: string; MessageDeduplicationId: string };
      };
      const filters = (props(id, "FilterConfiguration") as { Filters: { Pattern: string }[] })
        .Filters;
      expect(
        deployment.subscribers.find((s) => s.logicalId === id),
        id,
      ).toEqual({
        logicalId: id,
        name: props(id, "Name"),
        busArn: props(id, "EventBusArn"),
        fifo: props(id, "Type") === "FIFO",
        patterns: filters.map((f) => JSON.parse(f.Pattern)),
        targetArn: resolve(invoke.TargetArn, {
          region: deployment.region,
          accountId: deployment.accountId,
          stackName: deployment.stackName,
          physical: deployment.resources,
        }),
        messageGroupId: invoke.SqsParameters.MessageGroupId,
        messageDeduplicationId: invoke.SqsParameters.MessageDeduplicationId,
        onFailureArn: (props(id, "OnFailureConfiguration") as { Arn: string }).Arn,
        maxRetryAttempts: (props(id, "RetryPolicy") as { MaxRetryAttempts: number })
          .MaxRetryAttempts,
      });
    }
  });

  it("deploys every archive on its bus with the template's pattern and retention", async () => {
    expect(of("AWS::Events::Archive").length).toBeGreaterThan(0);
    for (const [id] of of("AWS::Events::Archive")) {
      const archive = await clients.eventbridge.send(
        new DescribeArchiveCommand({ ArchiveName: physical(id).ref }),
      );
      expect(archive.ArchiveArn, id).toBe(physical(id).attributes.Arn);
      expect(archive.EventSourceArn, id).toBe(props(id, "SourceArn"));
      expect(JSON.parse(archive.EventPattern ?? "{}"), id).toEqual(props(id, "EventPattern"));
      expect(archive.RetentionDays, id).toBe(props(id, "RetentionDays"));
    }
  });

  it("deploys every table with the template's keys, indexes, stream and TTL", async () => {
    for (const [id] of of("AWS::DynamoDB::Table")) {
      const { Table } = await clients.dynamodb.send(
        new DescribeTableCommand({ TableName: physical(id).ref }),
      );
      expect(Table?.KeySchema, id).toEqual(props(id, "KeySchema"));
      const indexes =
        (props(id, "GlobalSecondaryIndexes") as
          | { IndexName: string; KeySchema: unknown }[]
          | undefined) ?? [];
      expect(
        (Table?.GlobalSecondaryIndexes ?? []).map((g) => ({
          IndexName: g.IndexName,
          KeySchema: g.KeySchema,
        })),
        id,
      ).toEqual(
        expect.arrayContaining(
          indexes.map((g) => ({ IndexName: g.IndexName, KeySchema: g.KeySchema })),
        ),
      );
      expect(Table?.GlobalSecondaryIndexes?.length ?? 0, id).toBe(indexes.length);
      const stream = props(id, "StreamSpecification") as { StreamViewType: string } | undefined;
      expect(Table?.StreamSpecification?.StreamViewType, id).toBe(stream?.StreamViewType);
      const ttl = props(id, "TimeToLiveSpecification") as { AttributeName: string } | undefined;
      const described = await clients.dynamodb.send(
        new DescribeTimeToLiveCommand({ TableName: physical(id).ref }),
      );
      expect(described.TimeToLiveDescription?.AttributeName, id).toBe(ttl?.AttributeName);
    }
  });

  it("runs every event source mapping of the template with its settings", () => {
    const mappings = of("AWS::Lambda::EventSourceMapping");
    expect(deployment.mappings.map((m) => m.logicalId).sort()).toEqual(
      mappings.map(([id]) => id).sort(),
    );
    for (const [id, resource] of mappings) {
      const local = deployment.mappings.find((m) => m.logicalId === id);
      const functionName = resource.Properties?.FunctionName as { Ref: string };
      const scaling = props(id, "ScalingConfig") as { MaximumConcurrency?: number } | undefined;
      expect(local, id).toMatchObject({
        functionLogicalId: functionName.Ref,
        eventSourceArn: props(id, "EventSourceArn"),
        reportBatchItemFailures: (
          (props(id, "FunctionResponseTypes") as string[] | undefined) ?? []
        ).includes("ReportBatchItemFailures"),
        maximumConcurrency: scaling?.MaximumConcurrency,
        bisectBatchOnFunctionError: props(id, "BisectBatchOnFunctionError") === true,
      });
      const batch = props(id, "BatchSize");
      if (batch !== undefined) expect(local?.batchSize, id).toBe(Number(batch));
      const filters =
        (props(id, "FilterCriteria") as { Filters?: { Pattern: string }[] } | undefined)?.Filters ??
        [];
      expect(local?.filters, id).toEqual(filters.map((f) => JSON.parse(f.Pattern)));
    }
  });

  it("runs every function with the template's environment and a handler module it can load", async () => {
    const functions = of("AWS::Lambda::Function").filter(([, r]) => r.Metadata?.["agentbus:entry"]);
    expect(deployment.functions.map((f) => f.logicalId).sort()).toEqual(
      functions.map(([id]) => id).sort(),
    );
    for (const fn of deployment.functions) {
      const env =
        (props(fn.logicalId, "Environment") as { Variables?: Record<string, unknown> } | undefined)
          ?.Variables ?? {};
      expect(fn.environment, fn.logicalId).toEqual(
        Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])),
      );
      const module = (await import(
        /* @vite-ignore */ pathToFileURL(join(ROOT, fn.entry)).href
      )) as {
        create?: unknown;
        handler?: unknown;
      };
      expect(typeof module.create, fn.entry).toBe("function");
      expect(typeof module.handler, fn.entry).toBe("function");
    }
  });

  it("runs every schedule rule's target functions itself (the emulator cannot invoke Lambda)", () => {
    const schedules = of("AWS::Events::Rule").filter(([, r]) => r.Properties?.ScheduleExpression);
    expect(schedules.length).toBeGreaterThan(0);
    expect(deployment.schedules.map((s) => s.logicalId).sort()).toEqual(
      schedules.map(([id]) => id).sort(),
    );
    for (const [id, rule] of schedules) {
      const local = deployment.schedules.find((s) => s.logicalId === id);
      const targets = (rule.Properties?.Targets ?? []) as { Arn: { "Fn::GetAtt": string[] } }[];
      expect(local, id).toMatchObject({
        expression: rule.Properties?.ScheduleExpression,
        functionLogicalIds: targets.map((t) => t.Arn["Fn::GetAtt"][0]),
      });
      expect(local?.rateSeconds, id).toBe(60);
      for (const fn of local?.functionLogicalIds ?? [])
        expect(deployment.functions.find((f) => f.logicalId === fn)?.kind, fn).toBe("sweeper");
    }
  });

  it("runs every pipe of the template with its group and deduplication ids", () => {
    const pipes = of("AWS::Pipes::Pipe");
    expect(deployment.pipes.map((p) => p.logicalId).sort()).toEqual(pipes.map(([id]) => id).sort());
    for (const [id] of pipes) {
      const target = props(id, "TargetParameters") as {
        SqsQueueParameters?: { MessageGroupId?: string };
      };
      expect(
        deployment.pipes.find((p) => p.logicalId === id),
        id,
      ).toMatchObject({
        sourceArn: props(id, "Source"),
        targetArn: props(id, "Target"),
        messageGroupId: target.SqsQueueParameters?.MessageGroupId,
      });
    }
  });
});
