import { describe, expect, it } from "vitest";
import { HEARTBEAT_TARGETS_ENV } from "../../functions/core/heartbeat-routes";
import { packedJsonText } from "../../functions/core/packed-json";
import { audit } from "../../functions/roles/audit/audit";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import * as z from "../../schemas/zod";
import { getAtt, ofGroup, type Resource, resources, statementsOf, synthesizeStack } from "./synth";

/**
 * The bus path of heartbeats stays for a group fed by the bus: when a dispatch-function group
 * takes a heartbeat type, the beating consumers publish on the events bus too (EVENTS_BUS_NAME,
 * events:PutEvents on that bus only), beside their direct sends.
 */
const writing = contentAgentModules.find((m) => m.descriptor.group === "writing");
if (!writing) throw new Error("no writing agent module");
const { template } = synthesizeStack({
  topology: defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      groupOf(orchestratorModule),
      groupOf(writing),
      {
        name: "lease-watch",
        role: { group: "lease-watch", subscriptions: ["node.heartbeat"] },
        handler: "functions/roles/task-projection/handler.ts",
      },
      {
        name: "beat-log",
        role: { group: "beat-log", subscriptions: ["node.started"], unordered: true },
        handler: "functions/roles/task-projection/handler.ts",
        ordering: "none",
      },
      { name: "audit", role: audit, handler: "functions/roles/audit/handler.ts", ordering: "none" },
    ],
  }),
  workflows: [],
});

const consumerOf = (group: string) =>
  ofGroup(template, "AWS::Lambda::Function", group).find(
    (f) => f.Metadata["agentbus:kind"] === "consumer",
  ) as Resource;
const env = (fn: Resource) =>
  (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;

describe("heartbeats when a group fed by the bus takes one", () => {
  it("go on the events bus as well as straight to the orchestrator's and an unordered group's queues, never the audit group's", () => {
    const fn = consumerOf("writing");
    const variables = env(fn);
    const events = resources(template, "AWS::Events::EventBus").find((b) =>
      String(b.Properties.Name).endsWith("-events"),
    ) as Resource;
    expect(variables.EVENTS_BUS_NAME).toEqual(getAtt(events.id, "Name"));
    const putEvents = statementsOf(template, fn).filter((s) =>
      s.Action.includes("events:PutEvents"),
    );
    expect(putEvents.flatMap((s) => s.Resource)).toEqual([getAtt(events.id, "Arn")]);
    const targets = packedJsonText(
      z.array(z.looseObject({ group: z.string() })),
      HEARTBEAT_TARGETS_ENV,
    ).parse(variables[HEARTBEAT_TARGETS_ENV]);
    // The lease watcher is fed by its dispatch function: the bus brings it its heartbeats. The
    // audit group takes none: the run a heartbeat reports on keeps it.
    expect(targets.map((t) => t.group).sort()).toEqual(["beat-log", "orchestrator"]);
  });
});
