import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";
import { FRONT_DOOR_CONTEXT, synthesizeStack, topologyWithSubscriber } from "./synth";

/**
 * An outside check of the synthesized templates: cfn-lint (AWS's CloudFormation linter, installed
 * beside moto) over the stack with and without the front door. No error; each warning it gives is
 * either fixed or acknowledged here with its reason.
 */

const ACKNOWLEDGED: Readonly<Record<string, string>> = {
  W3005:
    "aws-cdk-lib's Function adds DependsOn on its execution role and the role's default policy; the role's is also implied by the function's GetAtt of it. Harmless, and CDK's to emit: the policy's DependsOn is what matters (the function must not start before it may act).",
};

/**
 * cfn-lint 1.51 knows nothing of EventBridge's new buses (a group with `delivery: "subscriber"`):
 * it reports each `AWS::EventsV2::*` resource as a type that does not exist (E3006), checking
 * nothing inside it, and the actions only such a bus has as unknown (W3037): `events:PutRawEvents`
 * (what forwarding into one needs) and the operator's `events:DescribeSubscriber`,
 * `ListSubscribers` and `CreateSubscriber` (a subscriber group's replay). Only those findings, for
 * exactly those names, are acknowledged.
 */
const unknownToThisLinter = (f: Finding) =>
  (f.Rule.Id === "E3006" && /'AWS::EventsV2::(EventBus|Subscriber)'/.test(f.Message)) ||
  (f.Rule.Id === "W3037" &&
    /^'(putrawevents|describesubscriber|listsubscribers|createsubscriber)' is not one of/.test(
      f.Message,
    ));

interface Finding {
  readonly Level: "Error" | "Warning" | "Informational";
  readonly Message: string;
  readonly Rule: { readonly Id: string };
  readonly Location: { readonly Path: readonly (string | number)[] };
}

const cfnLint = spawnSync("cfn-lint", ["--version"], { encoding: "utf8" });
const installed = cfnLint.status === 0;
if (!installed)
  console.warn(
    "cfn-lint check skipped: the `cfn-lint` command is not installed here (pip install cfn-lint)",
  );

describe.skipIf(!installed)("cfn-lint over the synthesized templates", () => {
  const dir = mkdtempSync(join(tmpdir(), "agentbus-cfn-lint-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const lint = (name: string, template: unknown): Finding[] => {
    const file = join(dir, `${name}.template.json`);
    writeFileSync(file, JSON.stringify(template));
    const run = spawnSync("cfn-lint", ["--format", "json", file], { encoding: "utf8" });
    // Exit codes: 0 clean, 2 errors, 4 warnings, 8 informational (or-ed); 1 a failure of its own.
    if (run.status === 1 || run.stdout.trim() === "")
      throw new Error(`cfn-lint failed: ${run.stderr || run.stdout}`);
    return JSON.parse(run.stdout) as Finding[];
  };

  for (const [name, context, props] of [
    ["AgentBus", {}, {}],
    ["AgentBus-front-door", FRONT_DOOR_CONTEXT, {}],
    ["AgentBus-subscriber", {}, { topology: topologyWithSubscriber() }],
    [
      "AgentBus-provisioned",
      {},
      { tablesCapacity: { mode: "provisioned", maxWriteUnits: 200, maxReadUnits: 400 } },
    ],
  ] as const) {
    it(
      `${name}: no error, and no warning but those acknowledged`,
      () => {
        const { template } = synthesizeStack(props, name, context);
        const findings = lint(name, template.toJSON());
        const errors = findings.filter((f) => f.Level === "Error" && !unknownToThisLinter(f));
        const unacknowledged = findings.filter(
          (f) =>
            f.Level === "Warning" &&
            ACKNOWLEDGED[f.Rule.Id] === undefined &&
            !unknownToThisLinter(f),
        );
        const line = (f: Finding) => `${f.Rule.Id} ${f.Location.Path.join("/")}: ${f.Message}`;
        expect(errors.map(line)).toEqual([]);
        expect(unacknowledged.map(line)).toEqual([]);
        // CloudFormation's hard limits, which no linter rule reports until they are passed: a
        // template body of 1,000,000 bytes and 500 resources. `cdk synth` adds what this synthesis
        // leaves out (asset metadata on each function, the CDK metadata resource): some 4%, so the
        // body here must stay under 950,000 bytes and the resources under 499.
        const json = template.toJSON() as { Resources: Record<string, unknown> };
        const bytes = Buffer.byteLength(JSON.stringify(json, null, 1));
        const count = Object.keys(json.Resources).length;
        console.info(`${name}: ${bytes} bytes, ${count} resources`);
        expect(bytes).toBeLessThan(950_000);
        expect(count).toBeLessThan(499);
      },
      SLOW_STEP_TIMEOUT_MS,
    );
  }

  it(
    "finds what it should: a template with an error is not clean",
    () => {
      const broken = {
        Resources: {
          Queue: { Type: "AWS::SQS::Queue", Properties: { VisibilityTimeout: "soon" } },
        },
      };
      expect(lint("broken", broken).filter((f) => f.Level === "Error").length).toBeGreaterThan(0);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
