import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { deploymentSettings } from "../../lib/infra/agentbus-stack";
import { REPO_ROOT } from "../../lib/infra/constructs/function";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";
import { cdkJsonContext } from "./synth";

/** The deployment settings bin/agentbus.ts reads: `-c stage/region/account`, then the CLI's. */
describe("deployment settings", () => {
  const from = (context: Record<string, unknown>, defaults = {}) =>
    deploymentSettings((key) => context[key], defaults);

  it("defaults to stage dev and an environment-agnostic stack", () => {
    expect(from({})).toEqual({ stage: "dev", env: undefined });
  });

  it("takes stage, region and account from the context", () => {
    expect(from({ stage: "prod", region: "eu-west-1", account: "123456789012" })).toEqual({
      stage: "prod",
      env: { region: "eu-west-1", account: "123456789012" },
    });
  });

  it("falls back to CDK_DEFAULT_REGION / CDK_DEFAULT_ACCOUNT; the context wins", () => {
    const defaults = { region: "us-east-1", account: "111111111111" };
    expect(from({}, defaults).env).toEqual(defaults);
    expect(from({ region: "eu-central-1" }, defaults).env).toEqual({
      region: "eu-central-1",
      account: "111111111111",
    });
    expect(from({}, { region: "", account: "" }).env).toBeUndefined();
  });

  it("accepts a stage of 20 characters of lower-case letters, digits and hyphens", () => {
    expect(from({ stage: "pr-1234-feature-abcd" }).stage).toBe("pr-1234-feature-abcd");
  });

  it.each([
    ["Prod", '"Prod"'],
    ["prod_eu", '"prod_eu"'],
    ["pr-1234-feature-abcde", '"pr-1234-feature-abcde"'],
    ["-prod", '"-prod"'],
    ["", '""'],
    [42, "42"],
  ])("rejects the stage %j, naming it", (stage, named) => {
    expect(() => from({ stage })).toThrow(`context "stage" ${named} must be kebab-case`);
  });

  it("rejects a bad region or account, naming each and where it came from", () => {
    expect(() => from({ region: "Europe", account: "12345" })).toThrow(
      /context "region" "Europe" must be an AWS region[\s\S]*context "account" "12345" must be a 12-digit account id/,
    );
    expect(() => from({}, { region: "nowhere" })).toThrow(/CDK_DEFAULT_REGION "nowhere"/);
  });
});

/**
 * bin/agentbus.ts run as the CDK CLI runs it (context in CDK_CONTEXT_JSON, output directory in
 * CDK_OUTDIR), with bundling and CloudFormation's own template validation skipped: the settings
 * reach the stack and cdk-nag runs.
 */
describe("cdk.json: the CDK CLI contacts nothing of its own accord", () => {
  const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")) as {
    notices?: unknown;
  };

  it("turns the CLI's telemetry off (read from the context) and its notices (a setting)", () => {
    expect(cdkJsonContext()["cli-telemetry"]).toBe(false);
    expect(cdkJson.notices).toBe(false);
  });
});

describe("the CDK app (bin/agentbus.ts)", () => {
  const outdir = mkdtempSync(join(tmpdir(), "agentbus-app-"));
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  const runApp = (context: Record<string, unknown>) => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CDK_CONTEXT_JSON: JSON.stringify({
        ...cdkJsonContext(),
        "aws:cdk:bundling-stacks": [],
        ...context,
      }),
      CDK_OUTDIR: outdir,
      // CloudFormation's built-in template validation (10 s here) is covered by stack.test.ts.
      CDK_VALIDATION: "false",
    };
    delete env.CDK_DEFAULT_REGION;
    delete env.CDK_DEFAULT_ACCOUNT;
    return spawnSync(join(REPO_ROOT, "node_modules", ".bin", "tsx"), ["bin/agentbus.ts"], {
      cwd: REPO_ROOT,
      env,
      encoding: "utf8",
      timeout: SLOW_STEP_TIMEOUT_MS,
    });
  };

  it(
    "synthesizes AgentBus-<stage> for the region and account of the context, cdk-nag clean",
    () => {
      const result = runApp({ stage: "qa", region: "eu-west-1", account: "123456789012" });
      expect(result.status, result.stderr).toBe(0);
      const manifest = JSON.parse(readFileSync(join(outdir, "manifest.json"), "utf8")) as {
        artifacts: Record<string, { type: string; environment?: string }>;
      };
      expect(manifest.artifacts["AgentBus-qa"]?.environment).toBe("aws://123456789012/eu-west-1");
      const template = JSON.parse(
        readFileSync(join(outdir, "AgentBus-qa.template.json"), "utf8"),
      ) as { Resources: Record<string, { Type: string; Metadata?: Record<string, unknown> }> };
      // cdk-nag ran: the acknowledgements are in the template as its audit trail.
      const functions = Object.values(template.Resources).filter(
        (r) => r.Type === "AWS::Lambda::Function",
      );
      expect(functions.length).toBeGreaterThan(0);
      for (const fn of functions) {
        const rules = (fn.Metadata?.cdk_nag as { rules_to_suppress?: { id: string }[] })
          ?.rules_to_suppress;
        expect(rules?.map((r) => r.id)).toContain("AwsSolutions-L1");
      }
      expect(result.stderr).not.toMatch(/AwsSolutions-/);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "fails on a bad stage, naming it",
    () => {
      const result = runApp({ stage: "Prod_EU" });
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain('context "stage" "Prod_EU" must be kebab-case');
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
