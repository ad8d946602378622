import { ulid } from "ulid";
import { afterEach, describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { defineStepModule } from "../../functions/core/role-module";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { stepRolesOf } from "../../functions/core/steps";
import { a2aStep } from "../../functions/integrations/a2a/index";
import { SdkA2aAgent } from "../../functions/integrations/a2a/sdk-agent";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { StepCompleted } from "../../schemas/events/step";
import * as z from "../../schemas/zod";
import { A2A_TOKEN, startTestA2aAgent, type TestA2aAgent } from "../support/a2a-agent";
import { Bus } from "./workflow-bus";

/**
 * Another system's A2A agent as a node of a workflow: a step role whose handler is `a2aStep`,
 * after topic selection (a content agent), run by the orchestrator on the in-memory bus, against
 * an A2A agent from the official SDK's server on 127.0.0.1 that counts the messages it receives.
 */

let agent: TestA2aAgent | undefined;
afterEach(async () => {
  await agent?.close();
  agent = undefined;
});

async function billingBus(duplicate: boolean) {
  agent = await startTestA2aAgent();
  const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
  const module = defineStepModule({
    group: "billing",
    entry: "test/core/workflow-a2a-step.test.ts",
    steps: {
      input: z.looseObject({ "topic-selection": z.looseObject({ topic: z.string() }) }),
      output: z.object({ text: z.string(), data: z.optional(z.unknown()) }),
      leaseSeconds: 60,
      run: () => a2aStep(port, new InMemorySideEffects(), { agent: "billing" }),
    },
  });
  const workflow = defineWorkflow({
    name: "billed-news",
    version: 1,
    nodes: [
      { id: "topic-selection", role: "topic-selection" },
      { id: "billing", role: "billing" },
    ],
    edges: [{ from: "topic-selection", to: "billing" }],
  });
  const stepRoles = stepRolesOf([...contentAgentModules, module]);
  const orchestrator = orchestratorRole({ stepRoles, workflows: [workflow] });
  return { bus: new Bus({ orchestrator, modules: [module], duplicate }), server: agent };
}

describe("another system's A2A agent as a workflow node", () => {
  it("gets the node's input as a message once, even redelivered, and completes with its answer", async () => {
    const { bus, server } = await billingBus(true);
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    const completed = bus.emitted("step.completed")[0]?.payload as StepCompleted;
    expect(completed.output).toEqual({ text: "opened INV-1", data: { invoice: "INV-1" } });
    expect(server.received).toHaveLength(1);
    expect(server.received[0]?.data).toMatchObject({
      "topic-selection": { topic: expect.any(String) },
    });
    expect(server.invoices).toHaveLength(1);
  });
});
