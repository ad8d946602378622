import { describe, expect, it } from "vitest";
import {
  type AttentionSignal,
  NEEDS_HUMAN,
  operatorCommand,
  raiseOn,
} from "../../functions/core/attention";
import type { Role } from "../../functions/core/role";
import { defineModule, type RoleModule } from "../../functions/core/role-module";
import { audit } from "../../functions/roles/audit/audit";
import { taskProjectionModule } from "../../functions/roles/task-projection/index";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import { dashboardBody, refersTo, resources, single, synthesizeStack } from "./synth";

/**
 * An attention signal is declared by the role that raises it, not enumerated by the hub: a role
 * from outside (its own signal, its own metric, its own alarm words) gets its alarm and its
 * dashboard line from its module alone, and signals that clash stop the synth.
 */

const ALARM = "AWS::CloudWatch::Alarm";
const GROUP = "ticket-desk";

/** A signal the hub has never heard of. */
const ESCALATED: AttentionSignal = {
  name: "escalated-tickets",
  metric: "TicketEscalated",
  alarm: {
    id: "EscalatedTicketAlarm",
    what: "tickets escalated",
    why: "a person owns them now",
    act: `Run ${operatorCommand("status")}`,
    tolerated: 2,
    windowMinutes: 10,
  },
};

/** A role outside the hub: it raises its own signal on two event types, and the hub's one. */
function ticketDesk(attention: RoleModule["deployment"]["attention"]): RoleModule {
  return defineModule({
    descriptor: { group: GROUP, subscriptions: ["task.accepted", "plan.created"] },
    entry: "functions/roles/task-projection/handler.ts",
    deployment: { attention },
    build: () => ({ ...taskProjection, group: GROUP }) as Role<unknown>,
  });
}

function topologyWith(...modules: RoleModule[]) {
  return defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      groupOf(taskProjectionModule),
      ...modules.map(groupOf),
      { name: "audit", role: audit, handler: "functions/roles/audit/handler.ts", ordering: "none" },
    ],
  });
}

describe("a signal declared by a role outside the hub", () => {
  const desk = ticketDesk([
    raiseOn("task.accepted", ESCALATED),
    raiseOn("plan.created", ESCALATED),
    raiseOn("plan.created", NEEDS_HUMAN),
  ]);
  const { stack, template } = synthesizeStack({ topology: topologyWith(desk) });
  const group = stack.groups.find((g) => g.groupName === GROUP);
  const attentionAlarms = resources(
    template,
    ALARM,
    (a) => a.Properties.Namespace === "AgentBus" && a.Metadata["agentbus:group"] === GROUP,
  );

  it("gets one alarm per signal its rules name, with its own metric, window, tolerance and words", () => {
    expect(attentionAlarms.map((a) => a.Properties.MetricName)).toEqual([
      "TicketEscalated",
      "AgentRunNeedsHuman",
    ]);
    const alarm = single(template, ALARM, (a) => a.Properties.MetricName === "TicketEscalated");
    expect(alarm.Properties).toMatchObject({
      Dimensions: [
        { Name: "consumer_group", Value: GROUP },
        { Name: "service", Value: GROUP },
      ],
      Statistic: "Sum",
      Period: 600,
      Threshold: 2,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
      AlarmDescription:
        "ticket-desk: more than 2 tickets escalated within 10 minutes (a person owns them now). Run `npx agentbus status`.",
    });
    expect(alarm.id).toMatch(/EscalatedTicketAlarm/);
    expect(Object.keys(group?.attentionAlarms ?? {})).toEqual(["escalated-tickets", "needs-human"]);
  });

  it("notifies the alarm topic like every counting alarm (no OK: a quiet window is not a fix)", () => {
    const topic = single(template, "AWS::SNS::Topic", () => true);
    for (const alarm of attentionAlarms) {
      expect((alarm.Properties.AlarmActions as unknown[]).map(refersTo)).toEqual([topic.id]);
      expect(alarm.Properties.OKActions).toBeUndefined();
    }
  });

  it("shows its signals on its dashboard graph of what needs a person, by name", () => {
    const widget = dashboardBody(template).widgets.find(
      (w) => w.properties.title === `${GROUP}: needs a person`,
    );
    const lines = widget?.properties.metrics ?? [];
    expect(lines.map((line) => line[1])).toEqual(["TicketEscalated", "AgentRunNeedsHuman"]);
    expect(lines.map((line) => (line.at(-1) as { label?: string }).label)).toEqual([
      "escalated-tickets",
      "needs-human",
    ]);
  });
});

describe("signals that clash stop the synth, naming them", () => {
  it("a name that is not kebab-case", () => {
    const desk = ticketDesk([raiseOn("task.accepted", { ...ESCALATED, name: "Escalated" })]);
    expect(() => topologyWith(desk)).toThrow(
      /attention signal name "Escalated" must be kebab-case/,
    );
  });

  it("two different signals of one name, in two groups", () => {
    const louder = { ...NEEDS_HUMAN, metric: "PagerNeedsHuman" };
    const desk = ticketDesk([raiseOn("task.accepted", louder)]);
    const other = defineModule({
      ...ticketDesk([raiseOn("plan.created", NEEDS_HUMAN)]),
      descriptor: { group: "ticket-triage", subscriptions: ["plan.created"] },
    });
    expect(() => topologyWith(desk, other)).toThrow(
      /two different attention signals are named "needs-human" \(they differ in metric\)/,
    );
  });

  it("two names of one metric, or of one alarm id", () => {
    const twin = { ...ESCALATED, name: "escalated-again" };
    const desk = ticketDesk([raiseOn("task.accepted", ESCALATED), raiseOn("plan.created", twin)]);
    expect(() => topologyWith(desk)).toThrow(
      /"escalated-tickets" and "escalated-again" share the metric "TicketEscalated"[\s\S]*share the alarm id "EscalatedTicketAlarm"/,
    );
  });

  it("but not the same signal named by two groups", () => {
    const desk = ticketDesk([raiseOn("task.accepted", ESCALATED)]);
    const other = defineModule({
      ...ticketDesk([raiseOn("plan.created", { ...ESCALATED })]),
      descriptor: { group: "ticket-triage", subscriptions: ["plan.created"] },
    });
    expect(() => topologyWith(desk, other)).not.toThrow();
  });
});
