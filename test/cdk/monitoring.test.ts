import { Duration, type Stack } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import type { Command } from "commander";
import { describe, expect, it } from "vitest";
import { agentbusProgram } from "../../bin/cli/program";
import { type AttentionSignal, NEEDS_HUMAN } from "../../functions/core/attention";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import { HELD_REPLIES } from "../../functions/roles/customer-support/reply-generation/review";
import { ConsumerGroup } from "../../lib/infra/constructs/consumer-group";
import type { ConsumerGroupProps } from "../../lib/infra/constructs/consumer-group-props";
import { Relay } from "../../lib/infra/constructs/relay";
import { AgentBusTables } from "../../lib/infra/constructs/tables";
import { Topic } from "../../lib/infra/constructs/topic";
import {
  dashboardBody,
  functionsOfKind,
  type Resource,
  refersTo,
  resources,
  single,
  synthesizeStack,
  testStack,
} from "./synth";

/**
 * What an operator is told (seed 000 §15): consumer lag, processing time, queue depth, model
 * latency and tokens on the dashboard, and alarms with the command to run where a person must
 * act (unknown side-effect outcomes, held replies, failed runs, NEEDS_HUMAN agent runs, a relay
 * falling behind its stream).
 */

const ALARM = "AWS::CloudWatch::Alarm";
const { template } = synthesizeStack();
const alarms = resources(template, ALARM);

/** The consumer metric alarms of one metric, by the group of their dimensions. */
function consumerAlarms(metric: string): Map<string, Resource> {
  const found = new Map<string, Resource>();
  for (const alarm of alarms.filter(
    (a) => a.Properties.Namespace === "AgentBus" && a.Properties.MetricName === metric,
  )) {
    const dims = alarm.Properties.Dimensions as { Name: string; Value: string }[];
    const group = dims.find((d) => d.Name === "consumer_group")?.Value;
    expect(dims.find((d) => d.Name === "service")?.Value).toBe(group);
    expect(dims).toHaveLength(2);
    found.set(String(group), alarm);
  }
  return found;
}

const ANY_WITHIN_5_MINUTES = {
  Statistic: "Sum",
  Period: 300,
  EvaluationPeriods: 1,
  Threshold: 0,
  ComparisonOperator: "GreaterThanThreshold",
  TreatMissingData: "notBreaching",
};

describe("alarms where a person must act", () => {
  it("any unknown side-effect outcome of the sender and of the refund agent's refunds", () => {
    const found = consumerAlarms("UnknownSideEffectOutcome");
    expect([...found.keys()]).toEqual(["sender", "refund-review"]);
    for (const alarm of found.values())
      expect(alarm.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("anything waiting for a person's approval: a tool call, a content agent's confirmation, a plan that writes", () => {
    const found = consumerAlarms("ApprovalRequested");
    expect([...found.keys()].sort()).toEqual(
      [...CONTENT_ROLES, "refund-review", "orchestrator"].sort(),
    );
    for (const alarm of found.values())
      expect(alarm.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("any held reply of reply generation within 15 minutes (the default window)", () => {
    const found = consumerAlarms("ReplyHeldForReview");
    expect([...found.keys()]).toEqual(["reply-generation"]);
    expect(found.get("reply-generation")?.Properties).toMatchObject({
      ...ANY_WITHIN_5_MINUTES,
      Period: 900,
    });
  });

  it("any model output the output guard refused, in a reply or in the refund agent's reason", () => {
    const found = consumerAlarms("OutputGuardRefused");
    expect([...found.keys()].sort()).toEqual(["refund-review", "reply-generation"]);
    for (const alarm of found.values()) {
      expect(alarm.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
      expect(String(alarm.Properties.AlarmDescription)).toMatch(
        /`npx agentbus reply list`.*output_guard\.refused.*rotate a secret/,
      );
    }
  });

  it("any failed workflow run of the orchestrator", () => {
    const found = consumerAlarms("WorkflowFailed");
    expect([...found.keys()]).toEqual(["orchestrator"]);
    expect(found.get("orchestrator")?.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("any PARTIAL workflow run of the orchestrator", () => {
    const found = consumerAlarms("WorkflowPartial");
    expect([...found.keys()]).toEqual(["orchestrator"]);
    expect(found.get("orchestrator")?.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("any support turn handed off to a person, by the two steps that can fail for good", () => {
    const found = consumerAlarms("SupportTurnHandedOff");
    expect([...found.keys()].sort()).toEqual(["order-lookup", "reply-generation"]);
    for (const alarm of found.values())
      expect(alarm.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("any agent run ending NEEDS_HUMAN, for each content agent and the refund agent", () => {
    const found = consumerAlarms("AgentRunNeedsHuman");
    expect([...found.keys()].sort()).toEqual([...CONTENT_ROLES, "refund-review"].sort());
    for (const alarm of found.values())
      expect(alarm.Properties).toMatchObject(ANY_WITHIN_5_MINUTES);
  });

  it("the relay more than 5 minutes behind its stream (IteratorAge maximum over a minute)", () => {
    const [relay] = functionsOfKind(template, "relay");
    const alarm = single(
      template,
      ALARM,
      (a) =>
        a.Properties.MetricName === "IteratorAge" &&
        refersTo((a.Properties.Dimensions as { Value: unknown }[])[0]?.Value) === relay?.id,
    );
    expect(alarm.Properties).toMatchObject({
      Namespace: "AWS/Lambda",
      Dimensions: [{ Name: "FunctionName", Value: { Ref: relay?.id } }],
      Statistic: "Maximum",
      Period: 60,
      EvaluationPeriods: 1,
      Threshold: 300_000,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
    });
  });

  it("every alarm tells the operator which command to run", () => {
    expect(alarms.length).toBeGreaterThan(0);
    for (const alarm of alarms)
      expect(alarm.Properties.AlarmDescription, alarm.id).toMatch(
        /Run `npx agentbus (status|approvals|dlq list|send list|reply list)`/,
      );
  });

  it("names only commands the CLI has, as typed (`npx agentbus <command> <subcommand>`)", async () => {
    const program = await agentbusProgram();
    const has = (words: readonly string[]) => {
      let command: Command | undefined = program;
      for (const word of words) command = command?.commands.find((c) => c.name() === word);
      return command !== undefined;
    };
    const named = alarms.flatMap((alarm) =>
      [...String(alarm.Properties.AlarmDescription).matchAll(/`([^`]*agentbus [^`]*)`/g)].map(
        (m) => m[1] ?? "",
      ),
    );
    expect(named.length).toBeGreaterThanOrEqual(alarms.length);
    for (const command of named) {
      expect(command, "typed as npx agentbus ...").toMatch(/^npx agentbus /);
      // The command's words come before its first argument or option (`<run id>`, `--as`).
      const words = command.slice("npx agentbus ".length).split(" ");
      const end = words.findIndex((word) => !/^[a-z]+$/.test(word));
      expect(has(end === -1 ? words : words.slice(0, end)), command).toBe(true);
    }
  });

  it("names the command that shows what the alarm is about", () => {
    const description = (metric: string) =>
      String([...consumerAlarms(metric).values()][0]?.Properties.AlarmDescription);
    expect(description("UnknownSideEffectOutcome")).toMatch(
      /`npx agentbus send list`.*`npx agentbus send resolve <key>/,
    );
    expect(description("ReplyHeldForReview")).toMatch(
      /`npx agentbus reply list`.*`npx agentbus reply approve <task id>/,
    );
    expect(description("WorkflowFailed")).toMatch(/`npx agentbus workflow show <run id>`/);
    expect(description("WorkflowPartial")).toMatch(/`npx agentbus workflow show <run id>`/);
    expect(description("ApprovalRequested")).toMatch(/`npx agentbus approvals`/);
    expect(description("SupportTurnHandedOff")).toMatch(
      /`npx agentbus status`.*`npx agentbus trace <conversation id>`/,
    );
    const deadLetters = alarms.filter(
      (a) =>
        a.Properties.Namespace === "AWS/SQS" &&
        a.Properties.MetricName === "ApproximateNumberOfMessagesVisible" &&
        a.Metadata["agentbus:group"] !== undefined,
    );
    expect(deadLetters.length).toBeGreaterThan(0);
    for (const alarm of deadLetters)
      expect(alarm.Properties.AlarmDescription).toMatch(/`npx agentbus dlq list`/);
  });
});

describe("dashboard", () => {
  const widgets = dashboardBody(template).widgets;
  const consumers = functionsOfKind(template, "consumer");
  const groups = consumers.map((c) => String(c.Metadata["agentbus:group"]));
  /** The metric lines of the widget with this title. */
  const linesOf = (title: string) => {
    const widget = widgets.find((w) => w.properties.title === title);
    expect(widget, title).toBeDefined();
    return (widget?.properties.metrics ?? []).map((line) => ({
      names: line.filter((x) => typeof x === "string") as string[],
      options: line.find((x) => typeof x === "object") as Record<string, unknown> | undefined,
    }));
  };
  const dims = (group: string) => ["consumer_group", group, "service", group];

  it("shows each group's main-queue depth (the queue its consumer reads)", () => {
    for (const consumer of consumers) {
      const group = String(consumer.Metadata["agentbus:group"]);
      const env = (consumer.Properties.Environment as { Variables: Record<string, unknown> })
        .Variables;
      const queue = refersTo(env.QUEUE_URL);
      expect(linesOf(`${group}: queue depth (messages waiting)`)[0]?.names).toEqual([
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "QueueName",
        `@GetAtt:${queue}.QueueName`,
      ]);
    }
  });

  it("shows each group's consumer lag and processing time at p50, p99 and maximum", () => {
    for (const group of groups) {
      for (const [title, metric] of [
        ["consumer lag (ms)", "ConsumerLag"],
        ["processing time (ms)", "ProcessingTime"],
      ]) {
        const lines = linesOf(`${group}: ${title}`);
        expect(lines.map((l) => l.names)).toEqual(
          Array(3).fill(["AgentBus", metric, ...dims(group)]),
        );
        expect(lines.map((l) => l.options?.stat)).toEqual(["p50", "p99", "Maximum"]);
      }
    }
  });

  it("shows what needs a person for the groups that emit it, and no such graph for others", () => {
    const expected: Record<string, string[]> = {
      sender: ["UnknownSideEffectOutcome"],
      "reply-generation": ["ReplyHeldForReview", "SupportTurnHandedOff", "OutputGuardRefused"],
      "order-lookup": ["SupportTurnHandedOff"],
      orchestrator: ["WorkflowFailed", "WorkflowPartial", "ApprovalRequested"],
      ...Object.fromEntries(
        CONTENT_ROLES.map((role) => [role, ["AgentRunNeedsHuman", "ApprovalRequested"]]),
      ),
      "refund-review": [
        "ApprovalRequested",
        "UnknownSideEffectOutcome",
        "AgentRunNeedsHuman",
        "OutputGuardRefused",
      ],
    };
    for (const group of groups) {
      const title = `${group}: needs a person`;
      const metrics = expected[group];
      if (!metrics) {
        expect(widgets.some((w) => w.properties.title === title)).toBe(false);
        continue;
      }
      const lines = linesOf(title);
      expect(lines.map((l) => l.names)).toEqual(
        metrics.map((m) => ["AgentBus", m, ...dims(group)]),
      );
      expect(lines.every((l) => l.options?.stat === "Sum")).toBe(true);
    }
  });

  it("shows model latency and input and output tokens for the groups that call a model", () => {
    const withModel = ["reply-generation", ...CONTENT_ROLES, "refund-review"];
    for (const group of groups) {
      const latency = widgets.find((w) => w.properties.title === `${group}: model latency (ms)`);
      expect(latency !== undefined, group).toBe(withModel.includes(group));
      if (!latency) continue;
      expect(linesOf(`${group}: model latency (ms)`).map((l) => l.names[1])).toEqual(
        Array(3).fill("ModelLatency"),
      );
      expect(linesOf(`${group}: model tokens`).map((l) => [l.names[1], l.options?.stat])).toEqual([
        ["ModelInputTokens", "Sum"],
        ["ModelOutputTokens", "Sum"],
      ]);
    }
  });

  it("marks the relay's iterator age alarm threshold on its graph", () => {
    const widget = widgets.find((w) => w.properties.title === "relay: stream iterator age (ms)");
    expect(widget?.properties.annotations?.horizontal?.map((a) => a.value)).toEqual([300_000]);
  });
});

/** A stack with tables and the commands topic, and a reply generation group from `overrides`. */
function replyGeneration(overrides: Partial<ConsumerGroupProps> = {}) {
  const stack: Stack = testStack();
  const group = new ConsumerGroup(stack, "Group", {
    groupName: "reply-generation",
    subscriptions: [
      {
        topic: new Topic(stack, "Commands", { topicName: "commands" }),
        eventTypes: ["reply.generation.requested"],
      },
    ],
    entry: "functions/roles/customer-support/reply-generation/handler.ts",
    tables: new AgentBusTables(stack, "Tables"),
    ...overrides,
  });
  return { group, template: Template.fromStack(stack) };
}

describe("attention alarms: props", () => {
  it("a signal's tolerance and window are its declaration's", () => {
    const tolerant = {
      ...HELD_REPLIES,
      alarm: { ...HELD_REPLIES.alarm, tolerated: 3, windowMinutes: 60 },
    };
    const { group, template } = replyGeneration({ attention: [tolerant] });
    template.hasResourceProperties(ALARM, {
      MetricName: "ReplyHeldForReview",
      Threshold: 3,
      Period: 3600,
      AlarmDescription: Match.stringLikeRegexp(
        "^reply-generation: more than 3 replies held for review within 1 hour ",
      ),
    });
    expect(group.attention).toEqual([tolerant]);
    expect(group.alarms).toContain(group.attentionAlarms["held-replies"]);
  });

  it("a group is watched for what its props name, never for what its handler's file is called", () => {
    const none = replyGeneration();
    expect(none.template.findResources(ALARM, { Properties: { Namespace: "AgentBus" } })).toEqual(
      {},
    );
    // A signal named twice (two rules of it) is one alarm.
    const more = replyGeneration({ attention: [HELD_REPLIES, NEEDS_HUMAN, HELD_REPLIES] });
    const metrics = resources(more.template, ALARM)
      .filter((a) => a.Properties.Namespace === "AgentBus")
      .map((a) => a.Properties.MetricName);
    expect(metrics).toEqual(["ReplyHeldForReview", "AgentRunNeedsHuman"]);
    expect(Object.keys(more.group.attentionAlarms)).toEqual(["held-replies", "needs-human"]);
  });

  it("rejects a window that is not whole minutes up to a day, and a negative tolerance", () => {
    const held = (alarm: Partial<AttentionSignal["alarm"]>) => ({
      attention: [{ ...HELD_REPLIES, alarm: { ...HELD_REPLIES.alarm, ...alarm } }],
    });
    expect(() => replyGeneration(held({ windowMinutes: 1.5 }))).toThrow(
      /attention signal "held-replies": alarm.windowMinutes is 1\.5/,
    );
    expect(() => replyGeneration(held({ windowMinutes: 2880 }))).toThrow(
      /alarm.windowMinutes is 2880/,
    );
    expect(() => replyGeneration(held({ tolerated: -1 }))).toThrow(/alarm.tolerated is -1/);
  });

  it("rejects a name that is not kebab-case, and two signals of one name or one metric, naming them", () => {
    expect(() => replyGeneration({ attention: [{ ...NEEDS_HUMAN, name: "Pager" }] })).toThrow(
      /attention signal name "Pager" must be kebab-case/,
    );
    const louder = { ...NEEDS_HUMAN, alarm: { ...NEEDS_HUMAN.alarm, why: "louder" } };
    expect(() => replyGeneration({ attention: [NEEDS_HUMAN, louder] })).toThrow(
      /two different attention signals are named "needs-human" \(they differ in alarm.why\)/,
    );
    const copy = {
      ...NEEDS_HUMAN,
      name: "agent-gave-up",
      alarm: { ...NEEDS_HUMAN.alarm, id: "X" },
    };
    expect(() => replyGeneration({ attention: [NEEDS_HUMAN, copy] })).toThrow(
      /attention signals "needs-human" and "agent-gave-up" share the metric "AgentRunNeedsHuman"/,
    );
  });
});

describe("relay iterator age alarm: props", () => {
  const relay = (maxIteratorAge?: Duration) => {
    const stack = testStack();
    const construct = new Relay(stack, "Relay", {
      topics: [new Topic(stack, "Events", { topicName: "events" })],
      tables: new AgentBusTables(stack, "Tables"),
      maxIteratorAge,
    });
    return { construct, template: Template.fromStack(stack) };
  };

  it("alarms above the configured age, in milliseconds", () => {
    const { construct, template } = relay(Duration.minutes(2));
    template.hasResourceProperties(ALARM, { MetricName: "IteratorAge", Threshold: 120_000 });
    expect(construct.alarms).toEqual([construct.failureAlarm, construct.iteratorAgeAlarm]);
  });

  it("rejects an age that is not whole seconds from 1 second to 24 hours, naming it", () => {
    expect(() => relay(Duration.millis(1500))).toThrow(/maxIteratorAge is 1 second 500 millis/);
    expect(() => relay(Duration.hours(25))).toThrow(/maxIteratorAge is 1 day 1 hour,/);
  });
});
