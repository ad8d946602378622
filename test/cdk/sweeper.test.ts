import { describe, expect, it } from "vitest";
import { HEARTBEAT_TARGETS_ENV } from "../../functions/core/heartbeat-routes";
import { packedJsonText } from "../../functions/core/packed-json";
import { stepRolesOf } from "../../functions/core/steps";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import { ROLE_MODULES } from "../../functions/roles/modules";
import * as z from "../../schemas/zod";
import {
  allowedOn,
  functionsOfKind,
  getAtt,
  ofGroup,
  type Resource,
  refersTo,
  resources,
  type Statement,
  single,
  statementsOf,
  synthesizeStack,
} from "./synth";

/**
 * The orchestration wiring of the stack: the scheduled lease sweeper (function, schedule rule,
 * least-privilege grants, the state table's by-due index), the content agents' heartbeat
 * settings and the orchestrator's queue-depth source.
 */
const { template } = synthesizeStack();

const env = (fn: Resource) =>
  ((fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)?.Variables ??
    {}) as Record<string, unknown>;
const stateTable = single(
  template,
  "AWS::DynamoDB::Table",
  (t) =>
    JSON.stringify(t.Properties.KeySchema) ===
      JSON.stringify([{ AttributeName: "pk", KeyType: "HASH" }]) &&
    JSON.stringify(t.Properties).includes("by-due"),
);
const buses = resources(template, "AWS::Events::EventBus");
const busNamed = (topic: string) =>
  single(template, "AWS::Events::EventBus", (b) => String(b.Properties.Name).endsWith(`-${topic}`));
const consumerOf = (group: string) =>
  ofGroup(template, "AWS::Lambda::Function", group).filter(
    (f) => f.Metadata["agentbus:kind"] === "consumer",
  )[0] as Resource;
const queueOfGroup = (group: string) => refersTo(env(consumerOf(group)).QUEUE_URL) as string;
const allowed = (statements: Statement[]) => statements.filter((s) => s.Effect === "Allow");
const actionsOn = (statements: Statement[], prefix: string) =>
  allowed(statements).filter((s) => s.Action.some((a) => a.startsWith(prefix)));

describe("lease sweeper", () => {
  const [sweeper, ...others] = functionsOfKind(template, "sweeper");

  it("is one function of kind sweeper running functions/handlers/sweeper.ts", () => {
    expect(others).toEqual([]);
    expect(sweeper?.Metadata["agentbus:entry"]).toBe("functions/handlers/sweeper.ts");
    const variables = env(sweeper as Resource);
    expect(variables.STATE_TABLE).toEqual({ Ref: stateTable.id });
    expect(variables.BUS_EVENTS).toEqual(getAtt(busNamed("events").id, "Name"));
    expect(variables.BUS_COMMANDS).toEqual(getAtt(busNamed("commands").id, "Name"));
    // The schedule's period, which a report's attempt is counted in.
    expect(variables.SWEEP_RATE_SECONDS).toBe("60");
  });

  it("an EventBridge schedule rule runs it every minute", () => {
    const rule = single(
      template,
      "AWS::Events::Rule",
      (r) => r.Properties.ScheduleExpression !== undefined,
    );
    expect(rule.Properties.ScheduleExpression).toBe("rate(1 minute)");
    expect(rule.Properties.State).toBe("ENABLED");
    const targets = rule.Properties.Targets as { Arn: unknown }[];
    expect(targets.map((t) => refersTo(t.Arn))).toEqual([sweeper?.id]);
    const permission = single(
      template,
      "AWS::Lambda::Permission",
      (p) => refersTo(p.Properties.FunctionName) === sweeper?.id,
    );
    expect(permission.Properties.Principal).toBe("events.amazonaws.com");
    expect(refersTo(permission.Properties.SourceArn)).toBe(rule.id);
  });

  it("may Query the by-due index, read state items and put events on the two buses: nothing else", () => {
    const statements = statementsOf(template, sweeper as Resource);
    const dynamodb = actionsOn(statements, "dynamodb:");
    const stateArn = getAtt(stateTable.id, "Arn");
    const byDue = { "Fn::Join": ["", [stateArn, "/index/by-due"]] };
    const grants = dynamodb.map((s) => ({ actions: [...s.Action].sort(), resources: s.Resource }));
    expect(grants).toEqual(
      expect.arrayContaining([
        { actions: ["dynamodb:Query"], resources: [byDue] },
        { actions: ["dynamodb:BatchGetItem", "dynamodb:GetItem"], resources: [stateArn] },
      ]),
    );
    expect(grants).toHaveLength(2);
    const putEvents = actionsOn(statements, "events:");
    expect([...new Set(putEvents.flatMap((s) => s.Action))]).toEqual(["events:PutEvents"]);
    expect(putEvents.flatMap((s) => s.Resource).sort()).toEqual(
      [getAtt(busNamed("commands").id, "Arn"), getAtt(busNamed("events").id, "Arn")].sort(),
    );
    expect(buses.length).toBeGreaterThanOrEqual(2);
    const services = new Set(
      allowed(statements).flatMap((s) => s.Action.map((a) => a.split(":")[0])),
    );
    expect([...services].sort()).toEqual(["dynamodb", "events", "logs", "xray"]);
  });

  it("the state table has the sparse by-due index (due_shard, due_at), keys only", () => {
    const indexes = stateTable.Properties.GlobalSecondaryIndexes as {
      IndexName: string;
      KeySchema: unknown;
      Projection: unknown;
    }[];
    expect(indexes.find((i) => i.IndexName === "by-due")).toEqual({
      IndexName: "by-due",
      KeySchema: [
        { AttributeName: "due_shard", KeyType: "HASH" },
        { AttributeName: "due_at", KeyType: "RANGE" },
      ],
      Projection: { ProjectionType: "KEYS_ONLY" },
    });
  });
});

describe("heartbeat and queue depth", () => {
  it("content agents heartbeat every 20 s to the queue's visibility timeout, straight to the orchestrator's queue, not on the bus nor to the audit group", () => {
    const queueNamed = (group: string) =>
      single(template, "AWS::SQS::Queue", (q) => q.id === queueOfGroup(group));
    const orchestratorQueue = queueNamed("orchestrator");
    const auditQueue = queueNamed("audit");
    for (const role of CONTENT_ROLES) {
      const fn = consumerOf(role);
      const variables = env(fn);
      expect(variables.HEARTBEAT_SECONDS, role).toBe("20");
      expect(variables.VISIBILITY_TIMEOUT_SECONDS, role).toBe(
        String(queueNamed(role).Properties.VisibilityTimeout),
      );
      // No group fed by the bus takes a heartbeat: nothing goes on the bus.
      expect(variables.EVENTS_BUS_NAME, role).toBeUndefined();
      expect(actionsOn(statementsOf(template, fn), "events:"), role).toEqual([]);
      const targets = packedJsonText(
        z.array(z.looseObject({ group: z.string(), queue: z.string() })),
        HEARTBEAT_TARGETS_ENV,
      ).parse(variables[HEARTBEAT_TARGETS_ENV]);
      const beats = expect.arrayContaining(["node.started", "node.heartbeat"]);
      expect(targets, role).toEqual([
        {
          group: "orchestrator",
          queue: orchestratorQueue.Properties.QueueName,
          rules: { events: { "detail-type": beats } },
        },
      ]);
      // sqs:SendMessage on exactly that queue besides its own (its dead-letter queue): not the
      // audit group's, which takes no heartbeat.
      const statements = statementsOf(template, fn);
      const sendable = resources(template, "AWS::SQS::Queue").filter((q) =>
        allowedOn(statements, getAtt(q.id, "Arn")).has("sqs:SendMessage"),
      );
      expect(
        sendable.map((q) => q.id),
        role,
      ).toContain(orchestratorQueue.id);
      expect(
        sendable.filter((q) => q.Metadata?.["agentbus:group"] !== role).map((q) => q.id),
        role,
      ).toEqual([orchestratorQueue.id]);
      expect(sendable.map((q) => q.id)).not.toContain(auditQueue.id);
    }
    // No other consumer heartbeats or publishes.
    for (const group of ["task-projection", "audit", "orchestrator"]) {
      const fn = consumerOf(group);
      expect(env(fn).HEARTBEAT_SECONDS, group).toBeUndefined();
      expect(actionsOn(statementsOf(template, fn), "events:"), group).toEqual([]);
    }
  });

  it("the orchestrator reads the depth of exactly the step roles' queues", () => {
    const fn = consumerOf("orchestrator");
    const variables = env(fn);
    expect(variables.QUEUE_DEPTH_THRESHOLD).toBe("100");
    const urls = JSON.stringify(variables.AGENT_QUEUE_URLS);
    // The content agents and the refund agent, which reviews a refund as a node.
    const stepRoles = Object.keys(stepRolesOf(ROLE_MODULES));
    expect(stepRoles.sort()).toEqual([...CONTENT_ROLES, "refund-review"].sort());
    for (const role of stepRoles) {
      expect(urls, role).toContain(role);
      expect(urls, role).toContain(JSON.stringify({ Ref: queueOfGroup(role) }));
    }
    const statements = allowed(statementsOf(template, fn)).filter((s) =>
      s.Action.includes("sqs:GetQueueAttributes"),
    );
    // Its own queue and dead-letter queue come with consuming and dead-lettering.
    const own = [queueOfGroup("orchestrator"), refersTo(variables.DEAD_LETTER_QUEUE_URL)];
    const readable = [
      ...new Set(
        statements.flatMap((s) => s.Resource.map(refersTo)).filter((q) => !own.includes(q)),
      ),
    ].sort();
    expect(readable).toEqual(stepRoles.map(queueOfGroup).sort());
  });
});
