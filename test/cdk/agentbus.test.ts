import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { CfnElement } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { EVENT_TOPICS_ENV } from "../../functions/core/relay";
import { defineModule, handlerBeside } from "../../functions/core/role-module";
import {
  MAX_WORKFLOWS_ENV_BYTES,
  STACK_WORKFLOWS_OUTPUT,
  WORKFLOWS_ENV,
  WorkflowsJson,
  workflowsOf,
} from "../../functions/core/stack-workflows";
import { orchestratingDescriptor, stepRolesOf } from "../../functions/core/steps";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";
import { AgentBus, topologyOf } from "../../lib/infra/agentbus";
import { AgentBusStack } from "../../lib/infra/agentbus-stack";
import { MAX_EVENT_TOPICS_BYTES } from "../../lib/infra/application-types";
import {
  handlerEntryProblem,
  MAX_ENVIRONMENT_BYTES,
  METADATA,
} from "../../lib/infra/constructs/function";
import { PROJECT_INTEGRATIONS, PROJECT_STACK } from "../../lib/infra/project";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import { DEFINITIONS } from "../../schemas";
import * as z from "../../schemas/zod";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";
import { tallyModule, topicTally } from "../fixtures/steps/index";
import { STEPS_APP } from "../fixtures/steps/stack";
import { FRONT_DOOR_CONTEXT, functionsOfKind, testApp } from "./synth";

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
    // The orchestrator's group also takes the answers of the step roles that spell their own.
    const table = stepRolesOf(PROJECT_STACK.roles);
    const written = new AgentBusStack(before, "AgentBus-dev", {
      topology: defineTopology({
        topics: ["commands", "events", "audit"],
        groups: PROJECT_STACK.roles.map((module) => {
          const group = groupOf(module);
          return module.deployment.needs?.orchestrates
            ? { ...group, role: orchestratingDescriptor(group.role, table) }
            : group;
        }),
      }),
      integrations: PROJECT_INTEGRATIONS,
      workflows: PROJECT_STACK.workflows,
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

  it("gives the relay the topics of its application's event types, and none of the hub's", () => {
    const relayEnvironment = (stack: AgentBus) =>
      Template.fromStack(stack).toJSON().Resources[
        stack.getLogicalId(stack.relay.function.node.defaultChild as CfnElement)
      ].Properties.Environment.Variables;
    const bookkeeping = relayEnvironment(new AgentBus(testApp(), "Books", BOOKKEEPING));
    expect(JSON.parse(bookkeeping[EVENT_TOPICS_ENV])).toEqual({ events: ["payment.refunded"] });
    const reference = JSON.parse(
      relayEnvironment(new AgentBus(testApp(), "Reference", PROJECT_STACK))[EVENT_TOPICS_ENV],
    ) as Record<string, string[]>;
    expect(reference.events).toContain("conversation.message.accepted");
    expect(reference.commands).toContain("refund.review.requested");
    const types = Object.values(reference).flat();
    expect(types.filter((t) => DEFINITIONS.some((d) => d.type === t))).toEqual([]);
    expect(Buffer.byteLength(JSON.stringify(reference))).toBeLessThan(MAX_EVENT_TOPICS_BYTES);
  });

  it("takes the topics it is given", () => {
    const stack = new AgentBus(testApp(), "Events-only", { ...BOOKKEEPING, topics: ["events"] });
    expect([...stack.topics.keys()]).toEqual(["events"]);
    expect(() => topologyOf(BOOKKEEPING.roles, ["commands"])).toThrow(
      /"payment.refunded" is published on topic "events", which is not declared/,
    );
  });
});

describe("AgentBus given workflows", () => {
  /** The environment of the orchestrator's consumer. */
  const orchestratorEnvironment = (template: Template): Record<string, unknown> => {
    const consumers = Object.values(
      template.findResources("AWS::Lambda::Function", {
        Metadata: { [METADATA.group]: "orchestrator", [METADATA.kind]: "consumer" },
      }),
    );
    expect(consumers).toHaveLength(1);
    return consumers[0]?.Properties?.Environment?.Variables ?? {};
  };

  it("runs them on the hub's orchestrator, which it adds, and gives them to it as they were defined", () => {
    const stack = new AgentBus(testApp(), "Steps", STEPS_APP);
    expect(stack.groups.map((g) => g.groupName).sort()).toEqual([
      "orchestrator",
      "tally",
      "topic-selection",
    ]);
    const template = Template.fromStack(stack);
    expect(consumerEntry(template, "orchestrator")).toBe("functions/roles/orchestrator/handler.ts");
    const given = z.parse(WorkflowsJson, orchestratorEnvironment(template)[WORKFLOWS_ENV]);
    // What the orchestrator reads back is the definition the application wrote.
    expect(workflowsOf(given)).toEqual([topicTally]);
  });

  /** The environment of the front door's function. */
  const frontDoorEnvironment = (template: Template): object => {
    const [frontDoor] = functionsOfKind(template, "front-door");
    if (!frontDoor) throw new Error("no front-door function");
    return (frontDoor.Properties.Environment as { Variables: object }).Variables;
  };

  it("gives the front door and the operator tools the same value: WORKFLOWS and the output StackWorkflows", () => {
    const stack = new AgentBus(testApp({ context: FRONT_DOOR_CONTEXT }), "Steps", STEPS_APP);
    const template = Template.fromStack(stack);
    const orchestrator = orchestratorEnvironment(template);
    const doorEnvironment = frontDoorEnvironment(template);
    expect(doorEnvironment).toHaveProperty(WORKFLOWS_ENV, orchestrator[WORKFLOWS_ENV]);
    expect(template.findOutputs(STACK_WORKFLOWS_OUTPUT)).toEqual({
      [STACK_WORKFLOWS_OUTPUT]: expect.objectContaining({ Value: orchestrator[WORKFLOWS_ENV] }),
    });
    // A table's or a bus's name counted as 80 bytes.
    const bytes = (variables: object) =>
      Object.entries(variables).reduce(
        (sum, [k, v]) => sum + k.length + (typeof v === "string" ? Buffer.byteLength(v) : 80),
        0,
      );
    // Both fit Lambda's 4 KB with room (a synth over it fails: test/cdk/function-environment.test.ts).
    expect(bytes(doorEnvironment)).toBeLessThan(MAX_ENVIRONMENT_BYTES / 2 + 512);
    expect(bytes(orchestrator)).toBeLessThan(MAX_ENVIRONMENT_BYTES / 2 + 512);
    const without = Template.fromStack(
      new AgentBus(testApp({ context: FRONT_DOOR_CONTEXT }), "None", { roles: [tallyModule] }),
    );
    expect(without.findOutputs(STACK_WORKFLOWS_OUTPUT)).toEqual({});
    expect(frontDoorEnvironment(without)).not.toHaveProperty(WORKFLOWS_ENV);
  });

  it("keeps an orchestrator the roles have, and gives nothing to a stack without workflows", () => {
    const stack = new AgentBus(testApp(), "Mine", {
      ...STEPS_APP,
      roles: [...STEPS_APP.roles, orchestratorModule],
    });
    expect(stack.groups.filter((g) => g.groupName === "orchestrator")).toHaveLength(1);
    const without = new AgentBus(testApp(), "None", { roles: [orchestratorModule, tallyModule] });
    expect(orchestratorEnvironment(Template.fromStack(without))).not.toHaveProperty(WORKFLOWS_ENV);
  });

  it("fails the synth naming every problem: roles that are not step roles, names, two versions alike", () => {
    const unknownRole = defineWorkflow({
      name: "ledger-close",
      version: 1,
      nodes: [
        { id: "close", role: "closer" },
        { id: "tally", role: "tally" },
      ],
      edges: [{ from: "close", to: "tally" }],
    });
    const aliasTaken = defineWorkflow({ ...topicTally, name: "app.tally", alias: "topic-tally" });
    const otherV1 = defineWorkflow({
      ...topicTally,
      nodes: [{ id: "tally", role: "tally" }],
      edges: [],
    });
    const synth = () =>
      new AgentBus(testApp(), "Bad", {
        roles: [tallyModule],
        workflows: [topicTally, unknownRole, aliasTaken, otherV1],
      });
    expect(synth).toThrow(
      /node close names role closer, which is not one of the known roles \(tally\)/,
    );
    expect(synth).toThrow(/workflow app.tally v1: alias topic-tally is the name of a workflow/);
    expect(synth).toThrow(/workflow topic-tally v1 is given twice, as two definitions/);
    // topic-selection is not a step role of this stack either.
    expect(synth).toThrow(/workflow topic-tally: node topic-selection names role topic-selection/);
  });

  it("refuses more workflows than the orchestrator's environment holds compressed, pointing to the registry", () => {
    // Names that do not repeat each other (hashes), which compression cannot shorten much.
    const hash = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 40);
    const many = Array.from({ length: 100 }, (_, i) =>
      defineWorkflow({ ...topicTally, name: `t-${hash(`name ${i}`)}` }),
    );
    expect(JSON.stringify(many).length).toBeGreaterThan(MAX_WORKFLOWS_ENV_BYTES);
    expect(() => new AgentBus(testApp(), "Many", { ...STEPS_APP, workflows: many })).toThrow(
      /bytes \(\d+ of JSON, compressed\), and the orchestrator's environment holds 2048 of them .*agentbus workflow put/,
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
