import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import { defineModule, handlerBeside } from "../../functions/core/role-module";
import { AgentBus, topologyOf } from "../../lib/infra/agentbus";
import { AgentBusStack } from "../../lib/infra/agentbus-stack";
import { handlerEntryProblem, METADATA } from "../../lib/infra/constructs/function";
import { PROJECT_INTEGRATIONS, PROJECT_STACK } from "../../lib/infra/project";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";
import { testApp } from "./synth";

/** The `agentbus:entry` of the consumer of a group. */
function consumerEntry(template: Template, group: string): unknown {
  const consumers = Object.values(
    template.findResources("AWS::Lambda::Function", { Metadata: { [METADATA.group]: group } }),
  ).filter((f) => f.Metadata?.[METADATA.kind] === "consumer");
  expect(consumers).toHaveLength(1);
  return consumers[0]?.Metadata?.[METADATA.entry];
}

describe("AgentBus: the stack built from role modules", () => {
  it("builds the reference stack as the stack built from its topology did: same template, same logical IDs", () => {
    const app = testApp();
    const built = new AgentBus(app, "AgentBus-dev", PROJECT_STACK);
    const before = testApp();
    const written = new AgentBusStack(before, "AgentBus-dev", {
      topology: defineTopology({
        topics: ["commands", "events", "audit"],
        groups: PROJECT_STACK.roles.map(groupOf),
      }),
      integrations: PROJECT_INTEGRATIONS,
    });
    expect(Template.fromStack(built).toJSON()).toEqual(Template.fromStack(written).toJSON());
  });

  it("deploys an application's roles with its integrations, and none of the reference applications'", () => {
    const stack = new AgentBus(testApp(), "Bookkeeping", BOOKKEEPING);
    const template = Template.fromStack(stack);
    expect(stack.groups.map((g) => g.groupName)).toEqual(["bookkeeper"]);
    expect(Object.keys(template.findOutputs("*"))).toEqual(
      expect.arrayContaining(["LedgerTableName", "BookkeeperQueueUrl", "StateTableName"]),
    );
    for (const output of ["OrdersTableName", "PaymentsTableName", "RepliesTopicArn"])
      expect(template.findOutputs(output)).toEqual({});
    // Inside the package's folder, the entry is recorded relative to it, as the reference roles'.
    expect(consumerEntry(template, "bookkeeper")).toBe("test/fixtures/bookkeeping/handler.ts");
  });

  it("takes the topics it is given", () => {
    const stack = new AgentBus(testApp(), "Events-only", { ...BOOKKEEPING, topics: ["events"] });
    expect([...stack.topics.keys()]).toEqual(["events"]);
    expect(() => topologyOf(BOOKKEEPING.roles, ["commands"])).toThrow(
      /"payment.refunded" is published on topic "events", which is not declared/,
    );
  });
});

describe("a role module's entry outside the package", () => {
  // An application's folder outside the checkout, with its lock file and its handler.
  const outside = mkdtempSync(join(tmpdir(), "agentbus-app-"));
  afterAll(() => rmSync(outside, { recursive: true, force: true }));
  const moduleIn = (folder: string) => {
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "handler.ts"), "export const handler = () => {};\n");
    return defineModule({
      descriptor: { group: "bookkeeper", subscriptions: ["refund.approved"] },
      entry: handlerBeside(pathToFileURL(join(folder, "module.ts")).href),
      deployment: {},
      build: () => {
        throw new Error("not run at synth");
      },
    });
  };

  it("is recorded by its absolute path, which the local runtime imports as it is", () => {
    writeFileSync(join(outside, "package-lock.json"), "{}");
    const roles = [moduleIn(join(outside, "src", "bookkeeper"))];
    const template = Template.fromStack(new AgentBus(testApp(), "Outside", { roles }));
    expect(consumerEntry(template, "bookkeeper")).toBe(
      join(outside, "src", "bookkeeper", "handler.ts"),
    );
  });

  it("needs a lock file above it, the application's root, and says so", () => {
    const bare = mkdtempSync(join(tmpdir(), "agentbus-bare-"));
    try {
      const roles = [moduleIn(join(bare, "src"))];
      // The temporary folder's parents may hold no lock file; if one does, this case cannot fail.
      expect(() => new AgentBus(testApp(), "Bare", { roles })).toThrow(
        /no lock file \(package-lock\.json, pnpm-lock\.yaml, yarn\.lock\) in a folder above the handler/,
      );
    } finally {
      rmSync(bare, { recursive: true, force: true });
    }
  });
});

describe("handlerBeside and the entries a module may name", () => {
  it("names the handler beside the calling module, with its extension", () => {
    expect(handlerBeside("file:///app/src/roles/bookkeeper/module.ts")).toBe(
      "file:///app/src/roles/bookkeeper/handler.ts",
    );
    expect(handlerBeside("file:///app/build/roles/bookkeeper/module.js?v=1")).toBe(
      "file:///app/build/roles/bookkeeper/handler.js",
    );
  });

  it("accepts a package-relative path, an absolute path and a file URL of a file that exists", () => {
    const exists = () => true;
    expect(handlerEntryProblem("functions/roles/audit/handler.ts", exists)).toBeUndefined();
    expect(handlerEntryProblem("/app/src/handler.ts", exists)).toBeUndefined();
    expect(handlerEntryProblem("file:///app/src/handler.js", exists)).toBeUndefined();
    expect(handlerEntryProblem("file:///app/src/handler.js", () => false)).toMatch(
      /"file:\/\/\/app\/src\/handler\.js" does not exist \(looked at \/app\/src\/handler\.js\)/,
    );
    expect(handlerEntryProblem("/app/src/handler.py", exists)).toMatch(/must be a \.ts\/\.js file/);
    expect(handlerEntryProblem("functions/roles/audit/handler.ts")).toBeUndefined();
  });
});
