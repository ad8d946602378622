import { type App, CfnResource, Stack, Validations } from "aws-cdk-lib";
import { CfnTable } from "aws-cdk-lib/aws-dynamodb";
import { CfnManagedPolicy, CfnPolicy } from "aws-cdk-lib/aws-iam";
import { CfnFunction } from "aws-cdk-lib/aws-lambda";
import { CfnQueue, Queue } from "aws-cdk-lib/aws-sqs";
import type { IConstruct } from "constructs";
import { describe, expect, it } from "vitest";
import { AgentBus } from "../../lib/infra/agentbus";
import { AgentBusStack, type AgentBusStackProps } from "../../lib/infra/agentbus-stack";
import { EMULATOR_CONTEXT_KEY } from "../../lib/infra/constructs/emulator";
import { XRAY_ACTIONS } from "../../lib/infra/constructs/function";
import { MODEL_ID_CONTEXT_KEY } from "../../lib/infra/constructs/model-access";
import { PROJECT_INTEGRATIONS, PROJECT_STACK } from "../../lib/infra/project";
import { nagFindings, printed } from "./nag";
import { FRONT_DOOR_CONTEXT, topologyWithPipe, topologyWithSubscriber } from "./synth";

/** The acknowledged wildcard of the repair policy: the replays of the stage (dev). */
const STAGE_REPLAYS =
  "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:events:<AWS::Region>:<AWS::AccountId>:replay/agentbus-dev-*]";

/** The reference stack as bin/agentbus.ts builds it, or the same on another topology. */
function agentBus(props: Partial<AgentBusStackProps> = {}) {
  return (app: App) => {
    const { topology, ...rest } = props;
    if (topology)
      new AgentBusStack(app, "AgentBus-nag", {
        integrations: PROJECT_INTEGRATIONS,
        ...rest,
        topology,
      });
    else new AgentBus(app, "AgentBus-nag", { ...PROJECT_STACK, ...rest });
  };
}

describe("cdk-nag AwsSolutions", () => {
  it("finds what it should: a plain queue has findings (the harness is not blind)", () => {
    const { findings } = nagFindings((app) => {
      new Queue(new Stack(app, "Canary"), "Plain");
    });
    expect(findings.map((f) => f.rule).sort()).toEqual(["AwsSolutions-SQS3", "AwsSolutions-SQS4"]);
    expect(findings.every((f) => f.path === "Canary/Plain/Resource")).toBe(true);
  });

  const { app, findings } = nagFindings(agentBus());

  it("the stack as deployed has no error and no warning left", () => {
    expect(printed(findings)).toEqual([]);
  });

  it("with a pipe-delivered group: no error and no warning left", () => {
    expect(printed(nagFindings(agentBus({ topology: topologyWithPipe() })).findings)).toEqual([]);
  });

  it("with a subscriber-delivered group: no error and no warning left", () => {
    const synthesized = nagFindings(agentBus({ topology: topologyWithSubscriber() }));
    expect(printed(synthesized.findings)).toEqual([]);
  });

  it.each([
    "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
    "anthropic.claude-haiku-4-5-20251001-v1:0",
  ])("with the model %s: no error and no warning left", (modelId) => {
    const synthesized = nagFindings(agentBus(), { [MODEL_ID_CONTEXT_KEY]: modelId });
    expect(printed(synthesized.findings)).toEqual([]);
  });

  it("with the front door (an HTTP API and its JWT authorizer): no error and no warning left", () => {
    const synthesized = nagFindings(agentBus(), FRONT_DOOR_CONTEXT);
    expect(printed(synthesized.findings)).toEqual([]);
  });

  it("with provisioned tables and the front door: no error and no warning left", () => {
    const provisioned = agentBus({
      tablesCapacity: { mode: "provisioned", maxWriteUnits: 100, maxReadUnits: 100 },
    });
    expect(printed(nagFindings(provisioned, FRONT_DOOR_CONTEXT).findings)).toEqual([]);
  });

  it.each(["localstack-free", "localstack"])(
    "for %s (what cdklocal synthesizes): no error and no warning left",
    (emulator) => {
      const synthesized = nagFindings(agentBus({ topology: topologyWithPipe() }), {
        [EMULATOR_CONTEXT_KEY]: emulator,
      });
      expect(printed(synthesized.findings)).toEqual([]);
    },
  );

  describe("acknowledgements: only deliberate decisions, each on the narrowest construct", () => {
    const acknowledged = acknowledgements(app);

    it("are exactly: L1 per function, IAM5 Resource::* per function policy, SQS3 on the relay's failure queue, the stage's replays, DDB3 on the customer keys", () => {
      const byRule = (rule: string) => acknowledged.filter((a) => a.rule === rule);
      expect(new Set(acknowledged.map((a) => a.rule))).toEqual(
        new Set([
          "AwsSolutions-L1",
          "AwsSolutions-IAM5[Resource::*]",
          "AwsSolutions-SQS3",
          STAGE_REPLAYS,
          "AwsSolutions-DDB3",
        ]),
      );
      // No point-in-time recovery: a restore would bring erased keys back.
      expect(byRule("AwsSolutions-DDB3").map((a) => a.path)).toEqual([
        "AgentBus-nag/CustomerKeys/Table",
      ]);
      // DescribeReplay on the replays agentbus replay names at run time, on the repair policy only.
      expect(byRule(STAGE_REPLAYS).map((a) => a.path)).toEqual([
        "AgentBus-nag/OperatorRead/RepairPolicy",
      ]);
      const functions = app.node.findAll().filter((c) => c instanceof CfnFunction);
      expect(byRule("AwsSolutions-L1").map((a) => a.construct)).toEqual(
        expect.arrayContaining(functions),
      );
      expect(byRule("AwsSolutions-L1")).toHaveLength(functions.length);
      // One per function's role policy, and one on the operator's read policy (GetMetricData).
      expect(byRule("AwsSolutions-IAM5[Resource::*]")).toHaveLength(functions.length + 1);
      expect(
        byRule("AwsSolutions-IAM5[Resource::*]").filter((a) => a.path.includes("/OperatorRead/")),
      ).toHaveLength(1);
      expect(byRule("AwsSolutions-SQS3").map((a) => a.path)).toEqual([
        "AgentBus-nag/Relay/FailureQueue/Resource",
      ]);
    });

    it("none is on a stack or the app (no blanket suppression)", () => {
      for (const a of acknowledged) {
        expect(a.construct instanceof Stack || a.construct === app, a.path).toBe(false);
        expect(
          a.construct instanceof CfnResource ||
            a.construct.node.defaultChild instanceof CfnResource,
          `${a.path} is a resource or its L2`,
        ).toBe(true);
      }
    });

    it("L1 sits on functions, IAM5 on role policies (or the operator's policy), SQS3 on a queue, DDB3 on a table", () => {
      for (const a of acknowledged) {
        const resource =
          a.construct instanceof CfnResource ? a.construct : a.construct.node.defaultChild;
        const operator = a.path.includes("/OperatorRead/");
        const expected = {
          "AwsSolutions-L1": CfnFunction,
          "AwsSolutions-IAM5[Resource::*]": operator ? CfnManagedPolicy : CfnPolicy,
          "AwsSolutions-SQS3": CfnQueue,
          "AwsSolutions-DDB3": CfnTable,
          [STAGE_REPLAYS]: CfnManagedPolicy,
        }[a.rule];
        expect(expected && resource instanceof expected, `${a.rule} at ${a.path}`).toBe(true);
      }
    });

    it("every IAM5 Resource::* reason names the actions it covers, X-Ray's first", () => {
      const iam5 = acknowledged.filter((x) => x.rule.startsWith("AwsSolutions-IAM5"));
      for (const a of iam5.filter((x) => !x.path.includes("/OperatorRead/"))) {
        for (const action of XRAY_ACTIONS) expect(a.reason, a.path).toContain(action);
      }
      const operator = iam5.find((a) => a.path.includes("/OperatorRead/"));
      expect(operator?.reason).toContain("cloudwatch:GetMetricData");
      const relay = acknowledged.find(
        (a) => a.rule.startsWith("AwsSolutions-IAM5") && a.path.includes("/Relay/"),
      );
      expect(relay?.reason).toContain("dynamodb:ListStreams");
    });

    it("every reason says why (printed here for review)", () => {
      for (const a of acknowledged) {
        expect(a.reason.length, `${a.rule} at ${a.path}`).toBeGreaterThan(60);
      }
      console.info(
        [...new Set(acknowledged.map((a) => `${a.rule}: ${a.reason}`))]
          .map((line) => `  ${line}`)
          .join("\n"),
      );
    });
  });
});

interface Acknowledgement {
  readonly rule: string;
  readonly reason: string;
  readonly path: string;
  readonly construct: IConstruct;
}

/** Every `Validations.of(...).acknowledge` in the tree, with the construct it is on. */
function acknowledgements(root: IConstruct): Acknowledgement[] {
  return root.node.findAll().flatMap((construct) =>
    construct.node.metadata
      .filter((entry) => entry.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((entry) => Object.entries(entry.data as Record<string, string>))
      .map(([id, reason]) => ({
        rule: id.replace(/^annotation::/i, ""),
        reason,
        path: construct.node.path,
        construct,
      })),
  );
}
