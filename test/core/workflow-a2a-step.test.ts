import { ulid } from "ulid";
import { afterEach, describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { TransientError } from "../../functions/core/errors";
import { defineStepModule } from "../../functions/core/role-module";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { stepRolesOf } from "../../functions/core/steps";
import { a2aStep } from "../../functions/integrations/a2a/index";
import { SdkA2aAgent } from "../../functions/integrations/a2a/sdk-agent";
import type { A2aStepDeclaration, A2aStepHandler } from "../../functions/integrations/a2a/step";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { NodeBlocked } from "../../schemas/events/agent-run";
import type { StepCompleted, StepFailed } from "../../schemas/events/step";
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

/** How the billing step is declared: its role waits for the agent's task, or not. */
interface BillingOptions {
  readonly duplicate?: boolean;
  readonly waits?: boolean;
  readonly declaration?: Partial<A2aStepDeclaration>;
  /** Wraps the step's handler (a crash after it returns, say). */
  readonly around?: (step: A2aStepHandler) => A2aStepHandler;
}

async function billingBus(options: BillingOptions = {}) {
  agent = await startTestA2aAgent();
  const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
  const { waits = false, declaration = {}, around = (step) => step } = options;
  const module = defineStepModule({
    group: "billing",
    entry: "test/core/workflow-a2a-step.test.ts",
    steps: {
      input: z.looseObject({ "topic-selection": z.looseObject({ topic: z.string() }) }),
      output: z.object({ text: z.string(), data: z.optional(z.unknown()) }),
      leaseSeconds: 60,
      waits,
      run: () =>
        around(a2aStep(port, new InMemorySideEffects(), { agent: "billing", ...declaration })),
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
  const bus = new Bus({ orchestrator, modules: [module], duplicate: options.duplicate ?? false });
  return { bus, server: agent };
}

describe("another system's A2A agent as a workflow node", () => {
  it("gets the node's input as a message once, even redelivered, and completes with its answer", async () => {
    const { bus, server } = await billingBus({ duplicate: true });
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

/**
 * The billing node's task still working when the call ends: the node is BLOCKED until its next
 * poll, the lease sweeper's `node.confirm.expired` hands the poll to the role, which reads the
 * task (`tasks/get`) and never sends the message again.
 */
describe("an A2A workflow node whose remote task is still working", () => {
  /** Drain; while the node is BLOCKED, go to its poll's time and sweep; returns the polls made. */
  async function runWithPolls(bus: Bus, runId: string, most = 10): Promise<number> {
    await bus.drain();
    for (let polls = 0; polls < most; polls++) {
      const blocked = bus.state(runId).leases?.billing?.blocked;
      if (bus.state(runId).run.status !== "RUNNING" || !blocked || blocked.outcome) return polls;
      bus.clock.advance(Date.parse(blocked.confirm_by) + 1000 - bus.clock.now().getTime());
      expect(bus.sweep().map((e) => e.event_type)).toContain("node.confirm.expired");
      await bus.drain();
    }
    throw new Error(`the node still waits after ${most} polls`);
  }

  /** A task that works for 2 polls (the call's stream ends before it does). */
  const slow = { timeoutMs: 2_000 };

  it("waits BLOCKED, polls the task until it completes, and completes with its artifacts: one message", async () => {
    const { bus, server } = await billingBus({ waits: true, declaration: slow });
    server.workPolls = 2;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    const polls = await runWithPolls(bus, runId);
    expect(bus.deadLettered).toEqual([]);
    expect(polls).toBe(3);
    const blocks = bus.emitted("node.blocked").map((e) => e.payload as NodeBlocked);
    expect(blocks).toHaveLength(3);
    expect(blocks[0]).toMatchObject({ agent: "billing", node_id: "billing" });
    expect(blocks[0]?.question).toMatch(/task .* is working/);
    // The polls are spaced as the tool's: at least 5 s apart.
    const times = blocks.map((b) => Date.parse(b.confirm_by));
    expect(Math.min(...times.slice(1).map((t, i) => t - (times[i] as number)))).toBeGreaterThan(
      5000,
    );
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    const completed = bus.emitted("step.completed")[0]?.payload as StepCompleted;
    expect(completed.output).toEqual({ text: "opened INV-1", data: { invoice: "INV-1" } });
    expect(server.received).toHaveLength(1);
    expect(server.invoices).toHaveLength(1);
    expect(server.reads.get).toBe(3);
  });

  it("after a crash once the message was sent, the redelivery polls the task: one message", async () => {
    let crashed = false;
    const { bus, server } = await billingBus({
      waits: true,
      declaration: slow,
      around: (step) => async (input, context) => {
        const done = step(input, context);
        if (crashed) return done;
        crashed = true;
        await done.catch(() => undefined);
        throw new TransientError("test.crash", "the worker died before its commit");
      },
    });
    server.workPolls = 2;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await runWithPolls(bus, runId);
    expect(crashed).toBe(true);
    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(server.received).toHaveLength(1);
    expect(server.invoices).toHaveLength(1);
  });

  it("fails the node with the agent's words when the task it waits for fails", async () => {
    const { bus, server } = await billingBus({
      waits: true,
      declaration: slow,
      around: (step) => (input, context) => step({ ...input, message: "refuse" }, context),
    });
    server.workPolls = 1;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await runWithPolls(bus, runId);
    const failed = bus.emitted("step.failed")[0]?.payload as StepFailed;
    expect(failed.error).toMatchObject({ code: "a2a.task_failed", errorClass: "permanent" });
    expect(failed.error.message).toContain("invoice refused");
    expect(bus.state(runId).run.nodes.billing?.state).toBe("FAILED");
    expect(server.received).toHaveLength(1);
  });

  it("gives the node's outcome as unknown when the task works past the step's limit", async () => {
    const { bus, server } = await billingBus({
      waits: true,
      declaration: { ...slow, taskLimitSeconds: 20 },
    });
    server.workPolls = 100;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await runWithPolls(bus, runId);
    const failed = bus.emitted("step.failed")[0]?.payload as StepFailed;
    expect(failed.error).toMatchObject({
      code: "a2a.outcome_unknown",
      errorClass: "unknown_outcome",
    });
    expect(failed.error.message).toMatch(/still working 20 s after it was started/);
    expect(server.received).toHaveLength(1);
  });

  it("a person's refusal of the wait fails the node, and sends nothing again", async () => {
    const { bus, server } = await billingBus({ waits: true, declaration: slow });
    server.workPolls = 100;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await bus.drain();
    expect(bus.state(runId).leases?.billing?.blocked?.question).toMatch(/is working/);
    bus.send(
      bus.command("workflow.confirm.requested", runId, {
        node_id: "billing",
        answer: "refused",
        requested_by: "ops@example.com",
      }),
    );
    await bus.drain();
    const failed = bus.emitted("step.failed")[0]?.payload as StepFailed;
    expect(failed.error).toMatchObject({ code: "step.wait_refused", errorClass: "business" });
    expect(failed.error.message).toContain("ops@example.com");
    expect(bus.state(runId).run.nodes.billing?.state).toBe("FAILED");
    expect(server.received).toHaveLength(1);
  });

  it("in a role that does not wait, a task still working stays unknown as before", async () => {
    const { bus, server } = await billingBus({ declaration: { ...slow, maxUnknownAttempts: 2 } });
    server.workPolls = 100;
    const runId = `run_${ulid()}`;
    bus.start(runId, "billed-news");
    await bus.drain();
    expect(bus.emitted("node.blocked")).toEqual([]);
    const failed = bus.emitted("step.failed")[0]?.payload as StepFailed;
    expect(failed.error.code).toBe("a2a.outcome_unknown");
    expect(server.received).toHaveLength(1);
  });
});
