import { describe, expect, it } from "vitest";
import { EMULATOR_CONTEXT_KEY } from "../../lib/infra/constructs/emulator";
import { REPLAY_NAME_PATTERN, replayName } from "../../lib/infra/replay-names";
import {
  getAtt,
  PIPED_GROUP,
  type Resource,
  refersTo,
  resources,
  single,
  synthesizeStack,
  topologyWithPipe,
} from "./synth";

/**
 * What `agentbus replay` needs of a deployed stack: the archive and bus of each topic and every
 * group's rule as outputs, a repair policy that may start replays from exactly those archives and
 * follow the replays of its stage, and delivery paths that keep a replay's `replay-name` up to the
 * consumer.
 */

const { template } = synthesizeStack({ topology: topologyWithPipe() });
const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
const archives = resources(template, "AWS::Events::Archive");
const groupRules = resources(
  template,
  "AWS::Events::Rule",
  (r) => r.Metadata["agentbus:group"] !== undefined && r.Properties.EventPattern !== undefined,
);

interface Statement {
  readonly Action: string | string[];
  readonly Resource: unknown;
}

function repairStatements(): Statement[] {
  const policy = single(template, "AWS::IAM::ManagedPolicy", (r) =>
    /^OperatorReadRepairPolicy[0-9A-F]{8}$/.test(r.id),
  );
  return (policy.Properties.PolicyDocument as { Statement: Statement[] }).Statement;
}

const resourcesOf = (action: string) =>
  repairStatements()
    .filter((s) => ([] as string[]).concat(s.Action).includes(action))
    .flatMap((s) => ([] as unknown[]).concat(s.Resource));

const sortedIds = (values: readonly unknown[]) => values.map((v) => refersTo(v) ?? "?").sort();

describe("agentbus replay: what the stack provides", () => {
  it("outputs each topic's bus ARN and archive ARN", () => {
    for (const topic of ["Commands", "Events", "Audit"]) {
      const bus = refersTo(outputs[`${topic}BusName`]?.Value) ?? "";
      expect(outputs[`${topic}BusArn`]?.Value, topic).toEqual(getAtt(bus, "Arn"));
      const archive = refersTo(outputs[`${topic}ArchiveArn`]?.Value) ?? "";
      const found = archives.find((a) => a.id === archive) as Resource;
      expect(found, topic).toBeDefined();
      expect(found.Properties.SourceArn).toEqual(getAtt(bus, "Arn"));
    }
  });

  it("outputs every group's rule as <Group><Topic>RuleArn", () => {
    const ruleOutputs = Object.entries(outputs).filter(([id]) => id.endsWith("RuleArn"));
    expect(sortedIds(ruleOutputs.map(([, o]) => o.Value))).toEqual(
      groupRules.map((r) => r.id).sort(),
    );
    expect(outputs.TaskProjectionEventsRuleArn?.Value).toEqual(
      getAtt(
        groupRules.find(
          (r) =>
            r.Metadata["agentbus:group"] === "task-projection" &&
            JSON.stringify(r.Properties.EventBusName).includes("EventsTopic"),
        )?.id ?? "?",
        "Arn",
      ),
    );
  });

  it("the repair policy starts replays from the archives only and reads their retention", () => {
    expect(sortedIds(resourcesOf("events:StartReplay"))).toEqual(archives.map((a) => a.id).sort());
    expect(resourcesOf("events:DescribeArchive")).toEqual(resourcesOf("events:StartReplay"));
    for (const r of resourcesOf("events:StartReplay"))
      expect(r).toEqual(getAtt(refersTo(r) ?? "", "Arn"));
  });

  it("reads the groups' rules (their patterns) and nothing else of EventBridge's", () => {
    expect(sortedIds(resourcesOf("events:DescribeRule"))).toEqual(
      groupRules.map((r) => r.id).sort(),
    );
  });

  it("follows only the replays of its stage, whose names agentbus replay derives", () => {
    const [pattern] = resourcesOf("events:DescribeReplay");
    expect(resourcesOf("events:DescribeReplay")).toHaveLength(1);
    const text = JSON.stringify(pattern);
    expect(text).toMatch(/:replay\/agentbus-dev-\*"\]\]\}$/);
    const name = replayName({
      stage: "dev",
      topic: "events",
      from: new Date("2026-11-01T00:00:00Z"),
      to: new Date("2026-11-02T00:00:00Z"),
      groups: ["task-projection"],
    });
    expect(name.startsWith("agentbus-dev-")).toBe(true);
    expect(name).toMatch(REPLAY_NAME_PATTERN);
  });

  it("every rule and the pipe forward the whole event, so replay-name reaches the consumer", () => {
    for (const rule of groupRules)
      for (const target of rule.Properties.Targets as Record<string, unknown>[]) {
        expect(target.InputPath, rule.id).toBeUndefined();
        expect(target.InputTransformer, rule.id).toBeUndefined();
        expect(target.Input, rule.id).toBeUndefined();
      }
    const pipe = single(
      template,
      "AWS::Pipes::Pipe",
      (p) => p.Metadata["agentbus:group"] === PIPED_GROUP,
    );
    const parameters = pipe.Properties.TargetParameters as { InputTemplate?: string };
    expect(parameters.InputTemplate).toBe("<$.body>");
  });

  it("without archives (LocalStack's free image) there is nothing to replay and no replay grant", () => {
    const free = synthesizeStack({}, "AgentBus-test", {
      [EMULATOR_CONTEXT_KEY]: "localstack-free",
    }).template;
    const freeOutputs = Object.keys(free.toJSON().Outputs as object);
    expect(freeOutputs.filter((id) => id.endsWith("ArchiveArn"))).toEqual([]);
    expect(JSON.stringify(free.toJSON())).not.toContain("events:StartReplay");
  });
});
