import { describe, expect, it } from "vitest";
import { audit } from "../../functions/roles/audit/audit";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { DISCARD_REASONS } from "../../lib/infra/constructs/consumer-group-monitoring";
import { defineTopology } from "../../lib/infra/topology";
import {
  allowedOn,
  dashboardBody,
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
 * Every kind of consumer group in one stack: FIFO through the dispatch function (the task
 * projection), FIFO through an EventBridge Pipe, and unordered (audit).
 */
const PIPED = "piped-projection";
const { template } = synthesizeStack({
  topology: defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      {
        name: "task-projection",
        role: taskProjection,
        handler: "functions/roles/task-projection/handler.ts",
      },
      {
        name: PIPED,
        role: { group: PIPED, subscriptions: ["task.accepted", "plan.created"] },
        handler: "functions/roles/task-projection/handler.ts",
        delivery: "pipe",
      },
      { name: "audit", role: audit, handler: "functions/roles/audit/handler.ts", ordering: "none" },
    ],
  }),
});
const GROUPS = ["task-projection", PIPED, "audit"];

const QUEUE = "AWS::SQS::Queue";
/** Event-pattern rules: the groups' subscriptions (schedule rules left out). */
const groupRules = () =>
  resources(template, "AWS::Events::Rule").filter((r) => r.Properties.EventPattern !== undefined);
const byId = (type: string, id: string | undefined) => single(template, type, (r) => r.id === id);
const env = (fn: Resource) =>
  (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
const consumerOf = (group: string) =>
  single(
    template,
    "AWS::Lambda::Function",
    (f) => f.Metadata["agentbus:group"] === group && f.Metadata["agentbus:kind"] === "consumer",
  );
const queueOf = (group: string) => byId(QUEUE, refersTo(env(consumerOf(group)).QUEUE_URL));
const redriveTarget = (queue: Resource) =>
  byId(
    QUEUE,
    refersTo(
      (queue.Properties.RedrivePolicy as { deadLetterTargetArn: unknown }).deadLetterTargetArn,
    ),
  );

describe("pipe delivery", () => {
  const pipe = single(template, "AWS::Pipes::Pipe", (p) => p.Metadata["agentbus:group"] === PIPED);
  const rule = single(template, "AWS::Events::Rule", (r) => r.Metadata["agentbus:group"] === PIPED);
  const buffer = byId(QUEUE, refersTo((rule.Properties.Targets as { Arn: unknown }[])[0]?.Arn));
  const fifo = queueOf(PIPED);

  it("a Pipe moves the group's buffer queue into its FIFO queue", () => {
    expect(refersTo(pipe.Properties.Source)).toBe(buffer.id);
    expect(refersTo(pipe.Properties.Target)).toBe(fifo.id);
    expect(fifo.Properties.FifoQueue).toBe(true);
    expect(buffer.Properties.FifoQueue).toBeUndefined();
    expect(pipe.Properties.DesiredState).toBe("RUNNING");
  });

  it("groups by the envelope's order key, de-duplicates by event id, forwards the whole event", () => {
    expect(pipe.Properties.TargetParameters).toEqual({
      InputTemplate: "<$.body>",
      SqsQueueParameters: {
        MessageGroupId: "$.body.detail.order_key",
        MessageDeduplicationId: "$.body.detail.event_id",
      },
    });
  });

  it("has no dispatch function", () => {
    expect(functionsOfKind(template, "dispatch").map((f) => f.Metadata["agentbus:group"])).toEqual([
      "task-projection",
    ]);
  });

  it("its role is for the pipes service of this account and this pipe only", () => {
    const role = byId("AWS::IAM::Role", refersTo(pipe.Properties.RoleArn));
    const [statement] = (
      role.Properties.AssumeRolePolicyDocument as { Statement: Record<string, unknown>[] }
    ).Statement;
    expect(statement).toMatchObject({
      Principal: { Service: "pipes.amazonaws.com" },
      Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
    });
    expect(JSON.stringify(statement)).toContain(`:pipe/${pipe.Properties.Name}`);
  });

  it("its role may only receive and delete on the buffer and send to the FIFO queue", () => {
    const role = byId("AWS::IAM::Role", refersTo(pipe.Properties.RoleArn));
    const statements = statementsOf(template, { ...pipe, Properties: { Role: { Ref: role.id } } });
    expect([...allowedOn(statements, getAtt(buffer.id, "Arn"))].sort()).toEqual([
      "sqs:DeleteMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
    ]);
    expect([...allowedOn(statements, getAtt(fifo.id, "Arn"))]).toEqual(["sqs:SendMessage"]);
    const resourcesGranted = statements.flatMap((s) => s.Resource.map((r) => JSON.stringify(r)));
    expect(new Set(resourcesGranted)).toEqual(
      new Set([getAtt(buffer.id, "Arn"), getAtt(fifo.id, "Arn")].map((r) => JSON.stringify(r))),
    );
  });

  it("is created after its role's policy (the pipe checks its permissions on creation)", () => {
    const role = byId("AWS::IAM::Role", refersTo(pipe.Properties.RoleArn));
    const policy = single(template, "AWS::IAM::Policy", (p) =>
      (p.Properties.Roles as unknown[]).some((r) => refersTo(r) === role.id),
    );
    const dependsOn = (template.toJSON().Resources[pipe.id] as { DependsOn?: string[] }).DependsOn;
    expect(dependsOn).toContain(policy.id);
  });
});

describe("alarms", () => {
  const alarms = resources(template, "AWS::CloudWatch::Alarm");
  const alarmOn = (queue: Resource, metric: string) =>
    alarms.filter(
      (a) =>
        a.Properties.MetricName === metric &&
        JSON.stringify(a.Properties.Dimensions) ===
          JSON.stringify([{ Name: "QueueName", Value: getAtt(queue.id, "QueueName") }]),
    );
  const queues = resources(template, QUEUE);
  const deadLetterQueues = [
    ...new Set([
      ...queues.filter((q) => q.Properties.RedrivePolicy).map((q) => redriveTarget(q).id),
      // Group rules (the sweeper's schedule rule targets a function and has no DLQ).
      ...groupRules().flatMap((r) =>
        (r.Properties.Targets as { DeadLetterConfig?: { Arn: unknown } }[]).map((t) =>
          refersTo(t.DeadLetterConfig?.Arn),
        ),
      ),
    ]),
  ];

  it("every dead-letter queue of every group alarms as soon as it holds a message", () => {
    expect(deadLetterQueues.length).toBeGreaterThanOrEqual(5);
    for (const id of deadLetterQueues) {
      const [alarm] = alarmOn(byId(QUEUE, id), "ApproximateNumberOfMessagesVisible");
      expect(alarm?.Properties, id).toMatchObject({
        ComparisonOperator: "GreaterThanThreshold",
        Threshold: 0,
        TreatMissingData: "notBreaching",
      });
    }
  });

  it("every queue a consumer or delivery reads alarms on the age of its oldest message", () => {
    const read = [
      ...GROUPS.map((g) => queueOf(g)),
      ...queues.filter((q) => q.Properties.QueueName?.toString().endsWith("-buffer")),
    ];
    expect(read.length).toBe(5);
    for (const queue of read) {
      const [alarm] = alarmOn(queue, "ApproximateAgeOfOldestMessage");
      expect(alarm?.Properties, String(queue.Properties.QueueName)).toMatchObject({
        Threshold: 300,
        Statistic: "Maximum",
      });
    }
  });
});

describe("what each group's rules match", () => {
  it("the audit group's match only unsequenced messages; every other group's match by type alone", () => {
    const patterns = groupRules().map((r) => ({
      group: r.Metadata["agentbus:group"],
      detail: (r.Properties.EventPattern as { detail?: unknown }).detail,
    }));
    expect(patterns.filter((p) => p.group === "audit").length).toBeGreaterThan(0);
    for (const { group, detail } of patterns)
      expect(detail, String(group)).toEqual(
        group === "audit" ? { aggregate: { version: [0] } } : undefined,
      );
  });
});

describe("group metadata", () => {
  it("every rule, pipe, queue (but the relay's) and group function carries agentbus:group", () => {
    for (const r of [...groupRules(), ...resources(template, "AWS::Pipes::Pipe")])
      expect(GROUPS, r.id).toContain(r.Metadata["agentbus:group"]);
    // No orchestrator in this topology, so no lease sweeper and no schedule rule: every rule
    // belongs to a group (the project's stack has the sweeper; see test/cdk/sweeper.test.ts).
    expect(
      resources(template, "AWS::Events::Rule").filter(
        (r) => r.Properties.ScheduleExpression !== undefined,
      ),
    ).toEqual([]);
    const untagged = resources(template, QUEUE).filter(
      (q) => q.Metadata["agentbus:group"] === undefined,
    );
    expect(untagged).toHaveLength(1); // the relay's failure queue
    for (const group of GROUPS) {
      expect(ofGroup(template, "AWS::Lambda::Function", group).length, group).toBeGreaterThan(0);
      expect(ofGroup(template, "AWS::CloudWatch::Alarm", group).length, group).toBeGreaterThan(0);
    }
  });
});

describe("dashboard", () => {
  const dashboard = single(template, "AWS::CloudWatch::Dashboard", () => true);
  const metrics = dashboardBody(template).widgets.flatMap((w) => w.properties.metrics ?? []);
  /** A metric line is [namespace, name, dim1, value1, ..., {options}]. */
  const lines = metrics.map((m) => m.filter((x) => typeof x === "string") as string[]);
  const has = (namespace: string, name: string, dimensions: Record<string, string>) =>
    lines.some(
      ([ns, metric, ...dims]) =>
        ns === namespace &&
        metric === name &&
        Object.entries(dimensions).every(([k, v]) => dims[dims.indexOf(k) + 1] === v) &&
        dims.length === Object.keys(dimensions).length * 2,
    );

  it("is one dashboard named after the stage", () => {
    expect(dashboard.Properties.DashboardName).toBe("agentbus-dev");
  });

  it("shows each group's consumer metrics with the dimensions the consumer publishes", () => {
    for (const group of GROUPS) {
      const dims = { service: group, consumer_group: group };
      for (const name of [
        "Applied",
        "Duplicate",
        "Rejected",
        "DeadLettered",
        "Retried",
        "GapRepaired",
      ]) {
        expect(has("AgentBus", name, dims), `${group}: ${name}`).toBe(true);
      }
    }
  });

  it("shows each group's discards by reason, one line per reason", () => {
    expect(DISCARD_REASONS).toEqual([
      "expired",
      "superseded",
      "cancelled",
      "invalidated_by_state_change",
    ]);
    for (const group of GROUPS) {
      for (const reason of DISCARD_REASONS) {
        expect(
          has("AgentBus", "DiscardedByReason", { service: group, consumer_group: group, reason }),
          `${group}: ${reason}`,
        ).toBe(true);
      }
    }
  });

  it("shows the depth of every dead-letter queue and the age of every group queue", () => {
    const queueMetric = (name: string, queue: Resource) =>
      has("AWS/SQS", name, { QueueName: `@GetAtt:${queue.id}.QueueName` });
    for (const group of GROUPS) {
      const queue = queueOf(group);
      expect(queueMetric("ApproximateAgeOfOldestMessage", queue), group).toBe(true);
      expect(queueMetric("ApproximateNumberOfMessagesVisible", redriveTarget(queue)), group).toBe(
        true,
      );
    }
    for (const buffer of resources(template, QUEUE, (q) =>
      String(q.Properties.QueueName).endsWith("-buffer"),
    )) {
      expect(queueMetric("ApproximateNumberOfMessagesVisible", redriveTarget(buffer))).toBe(true);
      expect(queueMetric("ApproximateAgeOfOldestMessage", buffer)).toBe(true);
    }
  });

  it("shows the relay's iterator age, events relayed, PutEvents calls and retried entries", () => {
    const [relay] = functionsOfKind(template, "relay");
    expect(has("AWS/Lambda", "IteratorAge", { FunctionName: `@Ref:${relay?.id}` })).toBe(true);
    for (const name of ["Relayed", "PutEventsCalls", "RelayRetriedEntries"]) {
      expect(has("AgentBus", name, { service: "relay" }), name).toBe(true);
    }
  });
});
