import { tmpdir } from "node:os";
import { join } from "node:path";
import { Template } from "aws-cdk-lib/assertions";
import { build, type Metafile } from "esbuild";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentBus } from "../../lib/infra/agentbus";
import { esbuildOptions } from "../../lib/infra/constructs/bundling";
import { METADATA, REPO_ROOT } from "../../lib/infra/constructs/function";
import { BOOKKEEPING_WITH_CLERK } from "../fixtures/bookkeeping/clerk/stack";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";
import { nagFindings, printed } from "./nag";
import { allowedOn, ofGroup, refersTo, single, statementsOf, testApp } from "./synth";

/**
 * An application's agent on the stack: the bookkeeping application with its ledger clerk
 * (test/fixtures/bookkeeping/clerk), an agent written outside the hub, deployed beside the
 * bookkeeper by `new AgentBus`, checked by cdk-nag, its function bundled from the entry its module
 * derives.
 */
describe("an application's agent on the stack", () => {
  const stack = new AgentBus(testApp(), "Bookkeeping", BOOKKEEPING_WITH_CLERK);
  const template = Template.fromStack(stack);
  const consumerOf = (group: string) =>
    single(
      template,
      "AWS::Lambda::Function",
      (fn) => fn.Metadata[METADATA.group] === group && fn.Metadata[METADATA.kind] === "consumer",
    );
  const clerk = consumerOf("ledger-clerk");

  it("deploys the clerk beside the bookkeeper, both granted the ledger, the clerk the model", () => {
    expect(stack.groups.map((g) => g.groupName)).toEqual(["bookkeeper", "ledger-clerk"]);
    const ledger = single(template, "AWS::DynamoDB::Table", (t) => t.id.startsWith("Ledger"));
    for (const group of ["bookkeeper", "ledger-clerk"]) {
      const statements = statementsOf(template, consumerOf(group));
      expect(allowedOn(statements, { "Fn::GetAtt": [ledger.id, "Arn"] }), group).toContain(
        "dynamodb:PutItem",
      );
    }
    const env = (clerk.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(refersTo(env.LEDGER_TABLE)).toBe(ledger.id);
    expect(env).toMatchObject({ MODEL_PROVIDER: "bedrock" });
    const actions = statementsOf(template, clerk).flatMap((s) => s.Action);
    expect(actions).toContain("bedrock:InvokeModel");
    // The run's waits for a person are alarms of its group.
    expect(ofGroup(template, "AWS::CloudWatch::Alarm", "ledger-clerk").length).toBeGreaterThan(0);
  });

  it("records the clerk's derived entry: the handler.ts beside its module", () => {
    expect(clerk.Metadata[METADATA.entry]).toBe("test/fixtures/bookkeeping/clerk/handler.ts");
  });

  it("has no cdk-nag error and no warning left", () => {
    const { findings } = nagFindings((app) => {
      new AgentBus(app, "Bookkeeping", BOOKKEEPING_WITH_CLERK);
    });
    expect(printed(findings)).toEqual([]);
  });

  describe("the clerk's function, bundled from that entry", () => {
    let metafile: Metafile;
    /** Every source file that put code into the bundle. */
    const bundled = () =>
      Object.values(metafile.outputs).flatMap((output) =>
        Object.entries(output.inputs)
          .filter(([, input]) => input.bytesInOutput > 0)
          .map(([path]) => path),
      );

    beforeAll(async () => {
      const entry = join(REPO_ROOT, String(clerk.Metadata[METADATA.entry]));
      const { entryPoints: _, outfile: __, ...options } = esbuildOptions("", "");
      const result = await build({
        ...options,
        entryPoints: [entry],
        outdir: join(tmpdir(), "agentbus-clerk-bundle"),
        write: false,
        metafile: true,
        logLevel: "error",
      });
      metafile = result.metafile;
    }, SLOW_STEP_TIMEOUT_MS);

    it("holds the clerk, its tools, the ledger's adapter and the model's client", () => {
      const files = bundled();
      for (const file of ["clerk/index.ts", "clerk/tools.ts", "integrations/ledger/aws.ts"])
        expect(
          files.some((path) => path.endsWith(`bookkeeping/${file}`)),
          file,
        ).toBe(true);
      expect(files.some((path) => path.includes("@aws-sdk/client-bedrock-runtime/"))).toBe(true);
    });

    it("reads its model schemas from the committed model-schemas.json", () => {
      expect(bundled().filter((path) => path.endsWith("/model-schemas.json"))).toEqual([
        expect.stringMatching(/bookkeeping\/clerk\/model-schemas\.json$/),
      ]);
    });

    it("imports nothing but Node's own modules", () => {
      const imports = Object.values(metafile.outputs).flatMap((output) => output.imports);
      expect(imports.filter((i) => !i.path.startsWith("node:")).map((i) => i.path)).toEqual([]);
    });
  });
});
