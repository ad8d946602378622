import { describe, expect, it } from "vitest";
import { REPLAY_NAME_PATTERN, replayName, replayNamePrefix } from "../../lib/infra/replay-names";
import {
  archiveNameOf,
  chosenGroups,
  leavesOutRelay,
  patternTypes,
  planReplays,
  planSubscriberReplays,
  ReplayRefused,
  replayTargets,
  replayWindow,
  retentionProblem,
  ruleOfArn,
} from "../../lib/operator/replay-plan";

const NOW = new Date("2026-11-30T12:00:00.000Z");
const arn = (rest: string) => `arn:aws:events:us-east-1:123456789012:${rest}`;

/** The outputs of a stack with two topics; audit is on both, task-projection on events only. */
const OUTPUTS: Record<string, string> = {
  EventsBusArn: arn("event-bus/agentbus-t-events"),
  EventsArchiveArn: arn("archive/agentbus-t-events"),
  CommandsBusArn: arn("event-bus/agentbus-t-commands"),
  CommandsArchiveArn: arn("archive/agentbus-t-commands"),
  TaskProjectionEventsRuleArn: arn("rule/agentbus-t-events/tp"),
  AuditEventsRuleArn: arn("rule/agentbus-t-events/au"),
  AuditCommandsRuleArn: arn("rule/agentbus-t-commands/au"),
};
const TOPICS = ["commands", "events"];
const GROUPS = ["task-projection", "audit", "orchestrator"];
const WINDOW = { from: new Date("2026-11-30T10:00:00Z"), to: new Date("2026-11-30T11:00:00Z") };

describe("replay names", () => {
  const identity = { stage: "t", topic: "events", ...WINDOW, groups: ["audit", "task-projection"] };

  it("are derived from stage, topic, window and groups (in any order), under the stage's prefix", () => {
    const name = replayName(identity);
    expect(name).toBe(replayName({ ...identity, groups: ["task-projection", "audit", "audit"] }));
    expect(name.startsWith(`${replayNamePrefix("t")}events-`)).toBe(true);
    expect(name).toMatch(REPLAY_NAME_PATTERN);
    const others = [
      { ...identity, stage: "u" },
      { ...identity, topic: "commands" },
      { ...identity, from: new Date(WINDOW.from.getTime() + 1) },
      { ...identity, to: new Date(WINDOW.to.getTime() - 1) },
      { ...identity, groups: ["audit"] },
    ].map(replayName);
    expect(new Set([name, ...others]).size).toBe(6);
  });

  it("stay within 64 characters of [.-_A-Za-z0-9] with the longest stage and a long topic", () => {
    const name = replayName({ ...identity, stage: "a".repeat(20), topic: "t".repeat(60) });
    expect(name.length).toBeLessThanOrEqual(64);
    expect(name).toMatch(REPLAY_NAME_PATTERN);
    expect(name.startsWith(replayNamePrefix("a".repeat(20)))).toBe(true);
  });
});

describe("the replay window", () => {
  const refused = (from?: string, to?: string) => () => replayWindow({ from, to }, NOW);

  it("takes ISO 8601 times with Z or an offset, and dates", () => {
    expect(replayWindow({ from: "2026-11-29", to: "2026-11-30T10:00:00+02:00" }, NOW)).toEqual({
      from: new Date("2026-11-29T00:00:00Z"),
      to: new Date("2026-11-30T08:00:00Z"),
    });
    expect(
      replayWindow({ from: "2026-11-30T10:00:00.123Z", to: "2026-11-30T12:00:00Z" }, NOW).from,
    ).toEqual(new Date("2026-11-30T10:00:00.123Z"));
  });

  it("refuses what is not ISO 8601, a time without offset, and a missing end", () => {
    for (const bad of [
      "yesterday",
      "2026-11-30 10:00",
      "2026-11-30T10:00",
      "Nov 30 2026",
      "1764500000",
    ])
      expect(refused(bad, "2026-11-30T11:00:00Z"), bad).toThrow(ReplayRefused);
    expect(refused("2026-11-30T10:00:00Z", undefined)).toThrow(/--to is required/);
  });

  it("refuses --from not before --to, and --to in the future", () => {
    expect(refused("2026-11-30T11:00:00Z", "2026-11-30T11:00:00Z")).toThrow(/is not before --to/);
    expect(refused("2026-11-30T11:00:00Z", "2026-11-30T10:00:00Z")).toThrow(/is not before --to/);
    expect(refused("2026-11-30T11:00:00Z", "2026-11-30T12:00:01Z")).toThrow(/in the future/);
    expect(replayWindow({ from: "2026-11-30T11:00:00Z", to: NOW.toISOString() }, NOW).to).toEqual(
      NOW,
    );
  });

  it("must start within the archive's retention (0 days: kept for ever)", () => {
    const archive = { name: "agentbus-t-events", retentionDays: 30 };
    const old = { from: new Date("2026-10-30T11:59:59Z"), to: NOW };
    expect(retentionProblem(WINDOW, archive, NOW)).toBeUndefined();
    expect(retentionProblem(old, archive, NOW)).toMatch(
      /outside the retention of archive agentbus-t-events \(30 days: nothing before 2026-10-31T12:00:00.000Z/,
    );
    expect(retentionProblem(old, { ...archive, retentionDays: 0 }, NOW)).toBeUndefined();
  });
});

describe("the replay plan", () => {
  const targets = replayTargets(OUTPUTS, TOPICS, GROUPS);

  it("reads each topic's bus, archive and groups' rules from the outputs", () => {
    expect(targets).toEqual([
      {
        topic: "commands",
        busArn: OUTPUTS.CommandsBusArn,
        archiveArn: OUTPUTS.CommandsArchiveArn,
        rules: { audit: OUTPUTS.AuditCommandsRuleArn },
        subscribers: {},
      },
      {
        topic: "events",
        busArn: OUTPUTS.EventsBusArn,
        archiveArn: OUTPUTS.EventsArchiveArn,
        rules: {
          "task-projection": OUTPUTS.TaskProjectionEventsRuleArn,
          audit: OUTPUTS.AuditEventsRuleArn,
        },
        subscribers: {},
      },
    ]);
  });

  it("replays a group delivered by a subscriber of a new bus with a point-in-time subscriber, named as its archive replay would be", () => {
    const subscriberArn = "arn:aws:events:us-east-1:111122223333:subscriber/live/x";
    const withSubscriber = replayTargets(
      { ...OUTPUTS, OrchestratorEventsSubscriberArn: subscriberArn },
      TOPICS,
      GROUPS,
    );
    expect(withSubscriber.map((t) => t.subscribers)).toEqual([{}, { orchestrator: subscriberArn }]);
    expect(chosenGroups(["orchestrator", "audit"], GROUPS, withSubscriber)).toEqual([
      "orchestrator",
      "audit",
    ]);
    expect(chosenGroups([], GROUPS, withSubscriber)).toEqual([
      "task-projection",
      "audit",
      "orchestrator",
    ]);
    const groups = ["orchestrator", "audit"];
    expect(planSubscriberReplays("t", withSubscriber, groups, WINDOW)).toEqual([
      {
        topic: "events",
        group: "orchestrator",
        name: replayName({ stage: "t", topic: "events", ...WINDOW, groups: ["orchestrator"] }),
        subscriberArn,
      },
    ]);
    // Its archive plans leave it out; a subscriber group alone plans no archive replay.
    expect(planReplays("t", withSubscriber, groups, WINDOW).flatMap((p) => p.groups)).toEqual([
      "audit",
      "audit",
    ]);
    expect(planReplays("t", withSubscriber, ["orchestrator"], WINDOW)).toEqual([]);
  });

  it("refuses an unknown group and lists the known ones; no group means every group with a rule", () => {
    expect(() => chosenGroups(["nope", "audit"], GROUPS, targets)).toThrow(
      "no consumer group nope (groups: audit, orchestrator, task-projection)",
    );
    expect(chosenGroups([], GROUPS, targets)).toEqual(["task-projection", "audit"]);
    expect(chosenGroups(["audit", "audit"], GROUPS, targets)).toEqual(["audit"]);
  });

  it("replays only the archives whose bus feeds a chosen group, filtered to its rules", () => {
    const plans = planReplays("t", targets, ["task-projection"], WINDOW);
    expect(plans).toEqual([
      {
        topic: "events",
        name: replayName({ stage: "t", topic: "events", ...WINDOW, groups: ["task-projection"] }),
        archiveArn: OUTPUTS.EventsArchiveArn,
        busArn: OUTPUTS.EventsBusArn,
        groups: ["task-projection"],
        ruleArns: [OUTPUTS.TaskProjectionEventsRuleArn],
      },
    ]);
    const all = planReplays("t", targets, ["task-projection", "audit"], WINDOW);
    expect(all.map((p) => [p.topic, p.ruleArns.length])).toEqual([
      ["commands", 1],
      ["events", 2],
    ]);
  });

  it("refuses a stack without archives, or without rule outputs", () => {
    const { EventsArchiveArn: _, ...noArchive } = OUTPUTS;
    expect(() =>
      planReplays("t", replayTargets(noArchive, TOPICS, GROUPS), ["task-projection"], WINDOW),
    ).toThrow(/no archive .* for topic events/);
    expect(() => planReplays("t", targets, ["orchestrator"], WINDOW)).toThrow(
      /no rule or subscriber of orchestrator/,
    );
  });

  it("reads names from ARNs and the types a rule's pattern selects", () => {
    expect(archiveNameOf(OUTPUTS.EventsArchiveArn as string)).toBe("agentbus-t-events");
    expect(ruleOfArn(arn("rule/agentbus-t-events/tp"))).toEqual({
      bus: "agentbus-t-events",
      name: "tp",
    });
    expect(ruleOfArn(arn("rule/on-default"))).toEqual({ bus: "default", name: "on-default" });
    expect(patternTypes('{"source":[{"prefix":"agentbus"}],"detail-type":["a.b","c.d"]}')).toEqual([
      "a.b",
      "c.d",
    ]);
    expect(patternTypes('{"source":["x"]}')).toBeUndefined();
    expect(patternTypes("not json")).toBeUndefined();
  });

  it("knows a relay-delivered group's rule, which leaves the relay's stored events out of a replay", () => {
    expect(
      leavesOutRelay('{"source":[{"anything-but":["agentbus.relay"]}],"detail-type":["a.b"]}'),
    ).toBe(true);
    expect(leavesOutRelay('{"source":[{"prefix":"agentbus"}],"detail-type":["a.b"]}')).toBe(false);
    expect(leavesOutRelay('{"source":[{"anything-but":["agentbus.cli"]}]}')).toBe(false);
    expect(leavesOutRelay("not json")).toBe(false);
  });
});
