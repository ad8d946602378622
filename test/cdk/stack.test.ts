import { existsSync } from "node:fs";
import { join } from "node:path";
import { Match } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { REPO_ROOT } from "../../lib/infra/constructs/function";
import { EVENTS_INDEXES } from "../../lib/infra/constructs/tables";
import { topology } from "../../lib/infra/project";
import { registry } from "../../schemas";
import {
  agentBusStack,
  allowedOn,
  functionsOfKind,
  getAtt,
  ofGroup,
  outputProblems,
  type Resource,
  refersTo,
  resources,
  single,
  statementsOf,
} from "./synth";

const { template, violations } = agentBusStack();

const QUEUE = "AWS::SQS::Queue";
const TABLE = "AWS::DynamoDB::Table";
const FUNCTION = "AWS::Lambda::Function";
const MAPPING = "AWS::Lambda::EventSourceMapping";
const RULE = "AWS::Events::Rule";
const ALARM = "AWS::CloudWatch::Alarm";

const only = <T>(items: readonly T[]): T => {
  if (items.length !== 1) throw new Error(`expected exactly one, found ${items.length}`);
  return items[0] as T;
};
const GROUP = "task-projection";
const ofTheGroup = (fn: Resource) => fn.Metadata["agentbus:group"] === GROUP;
const consumer = only(functionsOfKind(template, "consumer").filter(ofTheGroup));
const dispatcher = only(functionsOfKind(template, "dispatch").filter(ofTheGroup));
const relay = only(functionsOfKind(template, "relay"));
const env = (fn: Resource) =>
  (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const byId = (type: string, id: string | undefined) =>
  single(template, type, (resource) => resource.id === id);
const mappingOf = (fn: Resource) =>
  single(template, MAPPING, (m) => refersTo(m.Properties.FunctionName) === fn.id);
const redriveTarget = (queue: Resource) =>
  byId(
    QUEUE,
    refersTo((queue.Properties.RedrivePolicy as Record<string, unknown>).deadLetterTargetArn),
  );

const groupQueue = byId(QUEUE, refersTo(env(consumer).QUEUE_URL));
const rule = only(ofGroup(template, RULE, GROUP));
const ruleTarget = only(rule.Properties.Targets as Record<string, unknown>[]);
const bufferQueue = byId(QUEUE, refersTo(ruleTarget.Arn));
const buses = resources(template, "AWS::Events::EventBus");
const bus = single(
  template,
  "AWS::Events::EventBus",
  (b) => b.Properties.Name === "agentbus-dev-events",
);
const table = (variable: string) => byId(TABLE, refersTo(env(consumer)[variable]));

describe("AgentBus stack: template", () => {
  it("passes CloudFormation's built-in validation", () => {
    expect(violations).toEqual([]);
  });
});

describe("AgentBus stack: the consumer group's FIFO queue", () => {
  it("is a FIFO queue with a .fifo name", () => {
    expect(groupQueue.Properties.FifoQueue).toBe(true);
    expect(groupQueue.Properties.QueueName).toMatch(/\.fifo$/);
  });

  it("redrives after the default maxReceiveCount of 5", () => {
    expect(groupQueue.Properties.RedrivePolicy).toMatchObject({ maxReceiveCount: 5 });
  });

  it("every FIFO queue redrives to a FIFO dead-letter queue with a .fifo name", () => {
    const fifoWithRedrive = resources(
      template,
      QUEUE,
      (q) => q.Properties.FifoQueue === true && q.Properties.RedrivePolicy !== undefined,
    );
    expect(fifoWithRedrive.length).toBeGreaterThan(0);
    for (const queue of fifoWithRedrive) {
      const dlq = redriveTarget(queue);
      expect(dlq.Properties.FifoQueue, queue.id).toBe(true);
      expect(dlq.Properties.QueueName, queue.id).toMatch(/\.fifo$/);
    }
  });

  it("feeds the consumer with partial batch responses and bounded concurrency", () => {
    const mapping = mappingOf(consumer);
    expect(refersTo(mapping.Properties.EventSourceArn)).toBe(groupQueue.id);
    expect(mapping.Properties).toMatchObject({
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      ScalingConfig: { MaximumConcurrency: 2 },
      BatchSize: 10,
    });
  });
});

describe("AgentBus stack: rule and buffer", () => {
  it("the rule's pattern lists exactly the subscribed types, from agentbus sources", () => {
    const pattern = rule.Properties.EventPattern as Record<string, unknown[]>;
    expect(pattern.source).toEqual([{ prefix: "agentbus" }]);
    expect([...(pattern["detail-type"] as string[])].sort()).toEqual(
      [...taskProjection.subscriptions].sort(),
    );
    expect(Object.keys(pattern).sort()).toEqual(["detail-type", "source"]);
  });

  it("the rule is on the topic's bus, named with Fn::GetAtt (moto cannot Ref a custom bus)", () => {
    expect(rule.Properties.EventBusName).toEqual(getAtt(bus.id, "Name"));
    expect(bus.Properties.Name).toBe("agentbus-dev-events");
  });

  it("the rule targets the buffer queue with a dead-letter queue and a retry policy", () => {
    expect(bufferQueue.Properties.FifoQueue).toBeUndefined();
    expect(ruleTarget).toMatchObject({
      DeadLetterConfig: { Arn: expect.anything() },
      RetryPolicy: { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86_400 },
    });
    const targetDlq = byId(QUEUE, refersTo((ruleTarget.DeadLetterConfig as { Arn: unknown }).Arn));
    expect(targetDlq.id).toBe(redriveTarget(bufferQueue).id);
  });

  it("the buffer queue redrives to a dead-letter queue", () => {
    expect(bufferQueue.Properties.RedrivePolicy).toMatchObject({ maxReceiveCount: 5 });
    expect(redriveTarget(bufferQueue).Properties.FifoQueue).toBeUndefined();
  });

  it("the dispatcher consumes the buffer queue with partial batch responses", () => {
    const mapping = mappingOf(dispatcher);
    expect(refersTo(mapping.Properties.EventSourceArn)).toBe(bufferQueue.id);
    expect(mapping.Properties.FunctionResponseTypes).toEqual(["ReportBatchItemFailures"]);
  });

  it("every queue is encrypted and refuses plain HTTP", () => {
    const queues = resources(template, QUEUE);
    const policies = resources(template, "AWS::SQS::QueuePolicy");
    for (const queue of queues) {
      expect(queue.Properties.SqsManagedSseEnabled ?? queue.Properties.KmsMasterKeyId).toBeTruthy();
      const denied = policies.some(
        (p) =>
          (p.Properties.Queues as unknown[]).some((q) => refersTo(q) === queue.id) &&
          JSON.stringify(p.Properties.PolicyDocument).includes('"aws:SecureTransport":"false"'),
      );
      expect(denied, queue.id).toBe(true);
    }
  });
});

describe("AgentBus stack: the audit group (no ordering)", () => {
  const auditConsumer = only(
    functionsOfKind(template, "consumer").filter((f) => f.Metadata["agentbus:group"] === "audit"),
  );
  const auditQueue = byId(QUEUE, refersTo(env(auditConsumer).QUEUE_URL));
  /** One rule per topic the registry has types on. */
  const auditRules = ofGroup(template, RULE, "audit");
  const auditTargets = auditRules.map((r) =>
    only(r.Properties.Targets as Record<string, unknown>[]),
  );

  it("reads a standard queue that redrives to a standard dead-letter queue", () => {
    expect(auditQueue.Properties.FifoQueue).toBeUndefined();
    expect(auditQueue.Properties.QueueName).toBe("agentbus-dev-audit");
    const dlq = redriveTarget(auditQueue);
    expect(dlq.Properties.FifoQueue).toBeUndefined();
    expect(refersTo(env(auditConsumer).DEAD_LETTER_QUEUE_URL)).toBe(dlq.id);
  });

  it("has no buffer and no dispatch function: its rules target its queue with the whole event", () => {
    // One dispatch function per FIFO group delivered through the bus (not audit, nor a group
    // that reads the events table's stream).
    expect(
      functionsOfKind(template, "dispatch")
        .map((f) => f.Metadata["agentbus:group"])
        .sort(),
    ).toEqual(
      topology.groups
        .filter((g) => g.ordering === "fifo" && g.delivery !== "stream")
        .map((g) => g.name)
        .sort(),
    );
    expect(auditTargets.length).toBeGreaterThan(0);
    for (const auditTarget of auditTargets) {
      expect(refersTo(auditTarget.Arn)).toBe(auditQueue.id);
      // The whole event, so an archive replay's replay-name reaches the consumer.
      expect(auditTarget.InputPath).toBeUndefined();
      expect(auditTarget.InputTransformer).toBeUndefined();
      expect(refersTo((auditTarget.DeadLetterConfig as { Arn: unknown }).Arn)).toBe(
        redriveTarget(auditQueue).id,
      );
    }
  });

  it("subscribes to every registered event type but heartbeats, one rule per topic on that topic's bus", () => {
    const subscribed = auditRules.flatMap((rule) => {
      const types = (rule.Properties.EventPattern as Record<string, string[]>)["detail-type"] ?? [];
      const ruleBus = byId("AWS::Events::EventBus", refersTo(rule.Properties.EventBusName));
      const topics = new Set(
        registry
          .definitions()
          .filter((d) => types.includes(d.type))
          .map((d) => d.topic),
      );
      expect([...topics].map((t) => `agentbus-dev-${t}`)).toEqual([ruleBus.Properties.Name]);
      return types;
    });
    const notBeats = registry.definitions().filter((d) => !d.heartbeat);
    expect(subscribed.sort()).toEqual([...new Set(notBeats.map((d) => d.type))].sort());
  });

  it("feeds the consumer with partial batch responses and bounded concurrency", () => {
    expect(mappingOf(auditConsumer).Properties).toMatchObject({
      EventSourceArn: getAtt(auditQueue.id, "Arn"),
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      ScalingConfig: { MaximumConcurrency: 2 },
    });
  });
});

describe("AgentBus stack: tables", () => {
  it("the events table streams NEW_IMAGE", () => {
    expect(table("EVENTS_TABLE").Properties.StreamSpecification).toEqual({
      StreamViewType: "NEW_IMAGE",
    });
  });

  it("the events table is keyed by pk and numeric version", () => {
    const events = table("EVENTS_TABLE").Properties;
    expect(events.KeySchema).toEqual([
      { AttributeName: "pk", KeyType: "HASH" },
      { AttributeName: "version", KeyType: "RANGE" },
    ]);
    expect(events.AttributeDefinitions).toContainEqual({
      AttributeName: "version",
      AttributeType: "N",
    });
  });

  it("the events and inbox tables have the trace index (keys and task) and the task roots (keys and correlation)", () => {
    for (const [variable, sort] of [
      ["EVENTS_TABLE", "event_id"],
      ["INBOX_TABLE", "pk"],
    ] as const)
      expect(table(variable).Properties.GlobalSecondaryIndexes, variable).toEqual(
        expect.arrayContaining(
          [
            ["trace-by-correlation", "correlation_id", ["task_id", "trace_task_id"]],
            ["task-roots", "task_id", ["correlation_id"]],
          ].map(([name, key, projected]) => ({
            IndexName: name,
            KeySchema: [
              { AttributeName: key, KeyType: "HASH" },
              { AttributeName: sort, KeyType: "RANGE" },
            ],
            Projection: { ProjectionType: "INCLUDE", NonKeyAttributes: projected },
          })),
        ),
      );
  });

  it("the inbox expires items on the ttl attribute, and so does the state table", () => {
    for (const variable of ["INBOX_TABLE", "STATE_TABLE"])
      expect(table(variable).Properties.TimeToLiveSpecification).toEqual({
        AttributeName: "ttl",
        Enabled: true,
      });
  });

  it("state, inbox and side-effects are keyed as designed", () => {
    const hash = (variable: string) => table(variable).Properties.KeySchema;
    expect(hash("STATE_TABLE")).toEqual([{ AttributeName: "pk", KeyType: "HASH" }]);
    expect(hash("INBOX_TABLE")).toEqual([{ AttributeName: "pk", KeyType: "HASH" }]);
    expect(hash("SIDE_EFFECTS_TABLE")).toEqual([{ AttributeName: "effect_key", KeyType: "HASH" }]);
  });

  it("every table is on demand, encrypted, retained, with point-in-time recovery but the customer keys'", () => {
    const tables = resources(template, TABLE);
    expect(tables.length).toBeGreaterThan(1);
    for (const t of tables) {
      // A restore of the customer-keys table would bring erased keys back (CustomerKeys).
      const recovery = !t.id.startsWith("CustomerKeysTable");
      expect(t.Properties, t.id).toMatchObject({
        BillingMode: "PAY_PER_REQUEST",
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: recovery },
        SSESpecification: { SSEEnabled: true },
      });
    }
    template.allResources(TABLE, { DeletionPolicy: "Retain", UpdateReplacePolicy: "Retain" });
  });
});

describe("AgentBus stack: relay", () => {
  const mapping = mappingOf(relay);

  it("reads the events table stream from the trim horizon, 100 records at a time", () => {
    expect(mapping.Properties).toMatchObject({
      EventSourceArn: getAtt(table("EVENTS_TABLE").id, "StreamArn"),
      StartingPosition: "TRIM_HORIZON",
      BatchSize: 100,
      MaximumRetryAttempts: 10,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
  });

  it("bisects failing batches", () => {
    expect(mapping.Properties.BisectBatchOnFunctionError).toBe(true);
  });

  it("sends batches it gives up on to an encrypted failure queue", () => {
    const destination = (
      mapping.Properties.DestinationConfig as { OnFailure: { Destination: unknown } }
    ).OnFailure.Destination;
    expect(byId(QUEUE, refersTo(destination)).Properties.SqsManagedSseEnabled).toBe(true);
  });

  it("only receives INSERT records", () => {
    const filters = (mapping.Properties.FilterCriteria as { Filters: { Pattern: string }[] })
      .Filters;
    expect(filters.map((f) => JSON.parse(f.Pattern))).toEqual([{ eventName: ["INSERT"] }]);
  });

  it("may put events on the topic buses and nowhere else", () => {
    const statements = statementsOf(template, relay).filter((s) =>
      s.Action.includes("events:PutEvents"),
    );
    const busArns = buses.map((b) => JSON.stringify(getAtt(b.id, "Arn")));
    const granted = statements.flatMap((s) => s.Resource.map((r) => JSON.stringify(r)));
    expect([...new Set(granted)].sort()).toEqual([...busArns].sort());
  });

  it("may read the events table stream", () => {
    const allowed = allowedOn(
      statementsOf(template, relay),
      getAtt(table("EVENTS_TABLE").id, "StreamArn"),
    );
    for (const action of [
      "dynamodb:GetRecords",
      "dynamodb:GetShardIterator",
      "dynamodb:DescribeStream",
    ]) {
      expect(allowed).toContain(action);
    }
  });
});

describe("AgentBus stack: functions", () => {
  const functions = resources(template, FUNCTION);

  it("every function runs Node.js 22 on arm64 with active tracing", () => {
    expect(functions.length).toBeGreaterThan(0);
    for (const fn of functions) {
      expect(fn.Properties, fn.id).toMatchObject({
        Runtime: "nodejs22.x",
        Architectures: ["arm64"],
        TracingConfig: { Mode: "Active" },
        Handler: "index.handler",
      });
    }
  });

  it("every function's agentbus:entry metadata names a handler file that exists", () => {
    for (const fn of functions) {
      const entry = fn.Metadata["agentbus:entry"];
      expect(typeof entry, fn.id).toBe("string");
      expect(existsSync(join(REPO_ROOT, entry as string)), `${fn.id}: ${entry}`).toBe(true);
      expect(["relay", "dispatch", "consumer", "sweeper"]).toContain(fn.Metadata["agentbus:kind"]);
    }
  });

  it("group functions carry their group in agentbus:group metadata", () => {
    expect(consumer.Metadata).toMatchObject({
      "agentbus:entry": "functions/roles/task-projection/handler.ts",
      "agentbus:group": "task-projection",
    });
    expect(dispatcher.Metadata).toMatchObject({
      "agentbus:entry": "functions/handlers/dispatch.ts",
      "agentbus:group": "task-projection",
    });
    expect(relay.Metadata["agentbus:entry"]).toBe("functions/handlers/relay.ts");
  });

  it("every function logs to a log group with a retention", () => {
    for (const fn of functions) {
      const logGroup = byId(
        "AWS::Logs::LogGroup",
        refersTo((fn.Properties.LoggingConfig as { LogGroup: unknown }).LogGroup),
      );
      expect(logGroup.Properties.RetentionInDays, fn.id).toBeGreaterThan(0);
    }
  });

  it("every function gets the Powertools settings, and no source maps parsed at init", () => {
    for (const fn of functions) {
      expect(env(fn), fn.id).toMatchObject({
        POWERTOOLS_SERVICE_NAME: expect.any(String),
        POWERTOOLS_METRICS_NAMESPACE: "AgentBus",
      });
      // --enable-source-maps would parse the bundle's map at every cold start; the handlers map
      // stack traces lazily instead (functions/handlers/source-maps.ts).
      expect(env(fn).NODE_OPTIONS, fn.id).toBeUndefined();
    }
  });

  it("every SQS-fed function's queue has a visibility timeout of at least 6x its timeout", () => {
    const sqsMappings = resources(template, MAPPING, (m) =>
      resources(template, QUEUE).some((q) => q.id === refersTo(m.Properties.EventSourceArn)),
    );
    expect(sqsMappings.length).toBeGreaterThan(0);
    for (const mapping of sqsMappings) {
      const queue = byId(QUEUE, refersTo(mapping.Properties.EventSourceArn));
      const fn = byId(FUNCTION, refersTo(mapping.Properties.FunctionName));
      const visibility = (queue.Properties.VisibilityTimeout as number | undefined) ?? 30;
      const timeout = (fn.Properties.Timeout as number | undefined) ?? 3;
      expect(visibility, `${queue.id} feeding ${fn.id}`).toBeGreaterThanOrEqual(6 * timeout);
    }
  });
});

describe("AgentBus stack: environment contract", () => {
  const own = (fn: Resource) =>
    Object.keys(env(fn))
      .filter((k) => !k.startsWith("POWERTOOLS_") && k !== "NODE_OPTIONS")
      .sort();

  it("the relay gets the bus name of each deployed topic, its failure queue, the topics of the application types and the types it leaves unpublished, and no customer key (it publishes events sealed, as stored)", () => {
    expect(own(relay)).toEqual([
      "BUS_AUDIT",
      "BUS_COMMANDS",
      "BUS_EVENTS",
      "DIRECT_GROUPS",
      "EVENT_TOPICS",
      "RELAY_FAILURE_QUEUE_URL",
      "UNPUBLISHED_TYPES",
    ]);
    const queue = single(template, "AWS::SQS::Queue", (q) => q.id.startsWith("RelayFailureQueue"));
    expect(env(relay).RELAY_FAILURE_QUEUE_URL).toEqual({ Ref: queue.id });
    for (const topic of ["audit", "commands", "events"]) {
      const topicBus = single(
        template,
        "AWS::Events::EventBus",
        (b) => b.Properties.Name === `agentbus-dev-${topic}`,
      );
      expect(env(relay)[`BUS_${topic.toUpperCase()}`]).toEqual(getAtt(topicBus.id, "Name"));
    }
  });

  it("the dispatcher gets its target FIFO queue, its buffer queue, the buffer DLQ, its group and the inbox for failure records", () => {
    expect(own(dispatcher)).toEqual([
      "DEAD_LETTER_QUEUE_URL",
      "GROUP_NAME",
      "INBOX_TABLE",
      "INBOX_TTL_DAYS",
      "SOURCE_QUEUE_URL",
      "TARGET_QUEUE_URL",
    ]);
    expect(env(dispatcher).INBOX_TABLE).toEqual(env(consumer).INBOX_TABLE);
    expect(env(dispatcher).INBOX_TTL_DAYS).toBe(env(consumer).INBOX_TTL_DAYS);
    expect(refersTo(env(dispatcher).TARGET_QUEUE_URL)).toBe(groupQueue.id);
    expect(refersTo(env(dispatcher).SOURCE_QUEUE_URL)).toBe(bufferQueue.id);
    expect(refersTo(env(dispatcher).DEAD_LETTER_QUEUE_URL)).toBe(redriveTarget(bufferQueue).id);
    expect(env(dispatcher).GROUP_NAME).toBe("task-projection");
  });

  it("the consumer gets its tables, its queues, its group and its retry settings", () => {
    expect(own(consumer)).toEqual(
      [
        "DEAD_LETTER_QUEUE_URL",
        "EVENTS_TABLE",
        "GROUP_NAME",
        "INBOX_TABLE",
        "INBOX_TTL_DAYS",
        "QUEUE_URL",
        "RETRY_BASE_SECONDS",
        "RETRY_MAX_SECONDS",
        "SIDE_EFFECTS_TABLE",
        "STATE_TABLE",
      ].sort(),
    );
    expect(refersTo(env(consumer).DEAD_LETTER_QUEUE_URL)).toBe(redriveTarget(groupQueue).id);
    expect(env(consumer)).toMatchObject({
      GROUP_NAME: "task-projection",
      INBOX_TTL_DAYS: "7",
      RETRY_BASE_SECONDS: "2",
      RETRY_MAX_SECONDS: "300",
    });
    const tableIds = ["STATE_TABLE", "EVENTS_TABLE", "INBOX_TABLE", "SIDE_EFFECTS_TABLE"].map(
      (v) => table(v).id,
    );
    expect(new Set(tableIds).size).toBe(4);
  });
});

describe("AgentBus stack: grants", () => {
  const consumerStatements = statementsOf(template, consumer);
  const arn = (variable: string) => getAtt(table(variable).id, "Arn");

  it("no statement of any function allows a wildcard action", () => {
    for (const fn of resources(template, FUNCTION)) {
      for (const s of statementsOf(template, fn)) {
        for (const action of s.Action) expect(action, fn.id).not.toMatch(/\*/);
      }
    }
  });

  it("the consumer may read and transactionally write state and inbox items", () => {
    for (const variable of ["STATE_TABLE", "INBOX_TABLE"]) {
      const allowed = allowedOn(consumerStatements, arn(variable));
      for (const action of [
        "GetItem",
        "BatchGetItem",
        "PutItem",
        "UpdateItem",
        "ConditionCheckItem",
      ]) {
        expect(allowed, `${variable}: ${action}`).toContain(`dynamodb:${action}`);
      }
      expect(allowed).not.toContain("dynamodb:Scan");
      expect(allowed).not.toContain("dynamodb:DeleteItem");
    }
  });

  it("the consumer may read and append events, and query each index by name (no index/*)", () => {
    const allowed = allowedOn(consumerStatements, arn("EVENTS_TABLE"));
    for (const action of ["GetItem", "BatchGetItem", "Query", "PutItem"]) {
      expect(allowed, action).toContain(`dynamodb:${action}`);
    }
    expect(allowed).not.toContain("dynamodb:UpdateItem");
    for (const index of Object.values(EVENTS_INDEXES)) {
      const onIndex = allowedOn(consumerStatements, {
        "Fn::Join": ["", [arn("EVENTS_TABLE"), `/index/${index}`]],
      });
      expect([...onIndex], index).toEqual(["dynamodb:Query"]);
    }
    const indexWildcard = consumerStatements.flatMap((s) =>
      s.Resource.filter((r) => JSON.stringify(r).includes("/index/*")),
    );
    expect(indexWildcard).toEqual([]);
  });

  it("the consumer may read and write side-effect records", () => {
    const allowed = allowedOn(consumerStatements, arn("SIDE_EFFECTS_TABLE"));
    for (const action of ["GetItem", "PutItem", "UpdateItem"]) {
      expect(allowed, action).toContain(`dynamodb:${action}`);
    }
  });

  it("the consumer may consume its queue, change visibility, and send to its dead-letter queue", () => {
    const own = allowedOn(consumerStatements, getAtt(groupQueue.id, "Arn"));
    for (const action of ["ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility"]) {
      expect(own, action).toContain(`sqs:${action}`);
    }
    expect(allowedOn(consumerStatements, getAtt(redriveTarget(groupQueue).id, "Arn"))).toContain(
      "sqs:SendMessage",
    );
  });

  it("the dispatcher may consume the buffer and send to the FIFO queue and the buffer DLQ", () => {
    const statements = statementsOf(template, dispatcher);
    const buffer = allowedOn(statements, getAtt(bufferQueue.id, "Arn"));
    expect(buffer).toContain("sqs:ReceiveMessage");
    expect(buffer).toContain("sqs:DeleteMessage");
    expect(allowedOn(statements, getAtt(groupQueue.id, "Arn"))).toContain("sqs:SendMessage");
    expect(allowedOn(statements, getAtt(redriveTarget(bufferQueue).id, "Arn"))).toContain(
      "sqs:SendMessage",
    );
  });

  it("EventBridge may send to the buffer queue and its DLQ only from the group's rule", () => {
    for (const queue of [bufferQueue, redriveTarget(bufferQueue)]) {
      template.hasResourceProperties("AWS::SQS::QueuePolicy", {
        Queues: [{ Ref: queue.id }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: "Allow",
              Principal: { Service: "events.amazonaws.com" },
              Condition: { ArnEquals: { "aws:SourceArn": getAtt(rule.id, "Arn") } },
            }),
          ]),
        },
      });
    }
  });
});

describe("AgentBus stack: alarms", () => {
  const alarms = resources(template, ALARM);
  const alarmOn = (queue: Resource, metric: string) =>
    alarms.filter(
      (a) =>
        a.Properties.MetricName === metric &&
        a.Properties.Namespace === "AWS/SQS" &&
        JSON.stringify(a.Properties.Dimensions) ===
          JSON.stringify([{ Name: "QueueName", Value: getAtt(queue.id, "QueueName") }]),
    );

  it("every dead-letter queue alarms as soon as it holds a message", () => {
    const deadLetterQueues = [
      ...new Set(
        resources(template, QUEUE, (q) => q.Properties.RedrivePolicy !== undefined).map(
          (q) => redriveTarget(q).id,
        ),
      ),
      refersTo(
        (mappingOf(relay).Properties.DestinationConfig as { OnFailure: { Destination: unknown } })
          .OnFailure.Destination,
      ),
    ];
    expect(deadLetterQueues.length).toBeGreaterThan(0);
    for (const id of deadLetterQueues) {
      const [alarm] = alarmOn(byId(QUEUE, id), "ApproximateNumberOfMessagesVisible");
      expect(alarm?.Properties, id).toMatchObject({
        ComparisonOperator: "GreaterThanThreshold",
        Threshold: 0,
        EvaluationPeriods: 1,
        TreatMissingData: "notBreaching",
      });
    }
  });

  it("the FIFO queue alarms when its oldest message is older than 5 minutes", () => {
    const [alarm] = alarmOn(groupQueue, "ApproximateAgeOfOldestMessage");
    expect(alarm?.Properties).toMatchObject({
      ComparisonOperator: "GreaterThanThreshold",
      Threshold: 300,
      Statistic: "Maximum",
    });
  });
});

describe("AgentBus stack: outputs", () => {
  it("outputs the bus name, queue URLs and table names", () => {
    const values = Object.values(template.findOutputs("*")).map((o) => JSON.stringify(o.Value));
    const expected = [
      getAtt(bus.id, "Name"),
      { Ref: groupQueue.id },
      { Ref: redriveTarget(groupQueue).id },
      { Ref: redriveTarget(bufferQueue).id },
      ...["STATE_TABLE", "EVENTS_TABLE", "INBOX_TABLE", "SIDE_EFFECTS_TABLE"].map((v) => ({
        Ref: table(v).id,
      })),
    ];
    for (const value of expected) expect(values).toContain(JSON.stringify(value));
  });

  it("outputs every bus name, every queue URL of every group and every table, none exported", () => {
    expect(outputProblems(template)).toEqual([]);
  });
});
