import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { a2aAdapter } from "../../functions/integrations/a2a/aws";
import type { A2aAgentPort, A2aOutgoing, A2aTaskView } from "../../functions/integrations/a2a/port";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { crash, currentInvocation } from "../../lib/dev/local/runtime/faults";
import { sideEffectOf } from "../../lib/dev/local/scenario/customer-support";
import { runReaches } from "../../lib/dev/local/scenario/refund";
import { runCommand, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { A2A_CLERK_GROUP, BILLING_TOKEN_PARAMETER, clerkRunId } from "../fixtures/a2a-clerk";
import { CLERK_INVOICE_REQUESTED } from "../fixtures/a2a-clerk/events";
import { A2A_CLERK_STACK } from "../fixtures/a2a-clerk/stack";
import { A2A_TOKEN, startTestA2aAgent, type TestA2aAgent } from "../support/a2a-agent";
import {
  askAgent,
  type OutsideAgentStack,
  startOutsideAgentStack,
} from "../support/outside-agent-stack";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * An agent whose tool is another system's A2A agent, on the local stack: the A2A clerk of
 * test/fixtures/a2a-clerk, its steps through the deployed queues, against an A2A agent from the
 * official SDK's server on 127.0.0.1 (test/support/a2a-agent.ts), which counts the messages it
 * receives. The clerk's `a2a` port is the one its adapter builds (the official SDK's client), its
 * token read from the emulator's Parameter Store, for the agent the test runs. A crash of the
 * invocation after the agent applied the message and before the step committed (the runtime's
 * fault hook, `crash`), and a timeout after the agent applied it, each leave exactly one message
 * at the agent: the redelivered step learns the task by `tasks/get`, and sends nothing again.
 * The same agent is a workflow node too (test/fixtures/a2a-clerk/billing-step): a task still
 * working when its call ends keeps the node BLOCKED until the lease sweeper's poll.
 */

const TIMEOUT = 120_000;

/** The adapter's port, whose next message may crash its invocation once the agent answered it. */
class CrashingA2aAgent implements A2aAgentPort {
  crashAfterSend = false;
  crashes = 0;
  constructor(private readonly inner: A2aAgentPort) {}
  card() {
    return this.inner.card();
  }
  async send(message: A2aOutgoing): Promise<A2aTaskView> {
    const view = await this.inner.send(message);
    const invocation = currentInvocation();
    if (this.crashAfterSend && invocation) {
      this.crashAfterSend = false;
      this.crashes += 1;
      throw crash(invocation, "open_invoice");
    }
    return view;
  }
  getTask(taskId: string, timeoutMs: number) {
    return this.inner.getTask(taskId, timeoutMs);
  }
  findTask(contextId: string, timeoutMs: number) {
    return this.inner.findTask(contextId, timeoutMs);
  }
}

describe("an agent using another system's A2A agent as a tool on the local stack", () => {
  let stack: OutsideAgentStack;
  let env: LocalEnvironment;
  let agent: TestA2aAgent;
  let port: CrashingA2aAgent;

  beforeAll(async () => {
    agent = await startTestA2aAgent();
    stack = await startOutsideAgentStack({
      stack: A2A_CLERK_STACK,
      stagePrefix: "a2a",
      token: { parameter: BILLING_TOKEN_PARAMETER, value: A2A_TOKEN },
      standIns: (ssm) => {
        port = new CrashingA2aAgent(
          a2aAdapter.build(
            { group: A2A_CLERK_GROUP, env: {}, client: ssm, warn: () => {} },
            { url: agent.cardUrl, credentials: { parameter: BILLING_TOKEN_PARAMETER } },
          ),
        );
        return { a2a: port };
      },
    });
    env = stack.env;
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await stack?.stop();
    await agent?.close();
  });

  /** Asks the clerk for an invoice, as a client would; the run's id. */
  async function askForInvoice(customerId: string): Promise<string> {
    const request = await askAgent(env, {
      type: CLERK_INVOICE_REQUESTED,
      orderKey: customerId,
      aggregateType: "invoice_request",
      producer: "billing-client",
      payload: { customer_id: customerId, amount: 12 },
    });
    return clerkRunId(request.task_id);
  }

  const messagesOf = (customerId: string) =>
    agent.received.filter((m) => m.text === `Open an invoice for ${customerId}`);

  it(
    "completes with the remote agent's answer: one message, under its call's key",
    async () => {
      const runId = await askForInvoice("c-1");
      const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
      const key = `${done.task_id}:${runId}:1:call_1`;
      const [message] = messagesOf("c-1");
      expect(messagesOf("c-1")).toHaveLength(1);
      expect(message).toMatchObject({
        messageId: key,
        data: { customer_id: "c-1", amount: 12 },
        metadata: { "io.agentbus/idempotency-key": key, "io.agentbus/skill": "open_invoice" },
      });
      const invoice = agent.invoices.find((i) => i.messageId === key);
      expect(done.output).toEqual({ invoice: invoice?.id });
      expect(done.window.find((s) => s.tool === "open_invoice")?.outcome).toBe("succeeded (run)");
      expect(await sideEffectOf(env, key)).toMatchObject({ state: "succeeded" });
    },
    TIMEOUT,
  );

  it(
    "a crash after the agent applied the message and before the commit gives exactly one message there",
    async () => {
      const reads = agent.reads.get + agent.reads.list;
      port.crashAfterSend = true;
      const runId = await askForInvoice("c-2");
      const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
      expect(port.crashes).toBe(1);
      // One message at the agent: the redelivered step asked for the task the stream named.
      expect(messagesOf("c-2")).toHaveLength(1);
      expect(agent.reads.get + agent.reads.list - reads).toBeGreaterThanOrEqual(1);
      const key = `${done.task_id}:${runId}:1:call_1`;
      expect(done.output).toEqual({
        invoice: agent.invoices.find((i) => i.messageId === key)?.id,
      });
      expect(done.window.find((s) => s.tool === "open_invoice")?.outcome).toBe("succeeded (query)");
      expect(await sideEffectOf(env, key)).toMatchObject({ state: "succeeded", attempts: 2 });
    },
    TIMEOUT,
  );

  it(
    "a timeout after the agent applied the message is learnt by tasks/get, not sent again",
    async () => {
      const gets = agent.reads.get;
      // The clerk waits 2 s for the task's end; the agent opens the invoice, then ends it after 4 s.
      agent.answerDelayMs = 4_000;
      try {
        const runId = await askForInvoice("c-3");
        const done = await runReaches(env, runId, "COMPLETED", TIMEOUT);
        expect(messagesOf("c-3")).toHaveLength(1);
        expect(agent.reads.get - gets).toBeGreaterThanOrEqual(1);
        const key = `${done.task_id}:${runId}:1:call_1`;
        expect(done.output).toEqual({
          invoice: agent.invoices.find((i) => i.messageId === key)?.id,
        });
        expect(done.window.find((s) => s.tool === "open_invoice")?.outcome).toMatch(
          /^succeeded \(query/,
        );
      } finally {
        agent.answerDelayMs = 0;
      }
    },
    TIMEOUT,
  );

  it(
    "a workflow node whose remote task is still working waits BLOCKED and completes once it ends: one message",
    async () => {
      // The agent's task outlives the node's call (2 s) and works through the first poll.
      agent.workPolls = agent.reads.get + 1;
      try {
        const runId = `run_${ulid()}`;
        await putOnBus(env, "commands", [
          runCommand("workflow.start.requested", runId, `corr_${ulid()}`, {
            workflow_name: "billed",
            request: { message: "Open an invoice for c-4", customer_id: "c-4" },
          }),
        ]);
        const ended = await waitForRunEnd(env, runId, TIMEOUT);
        expect(ended.run.status).toBe("COMPLETED");
        const steps = ended.timeline.filter((t) => t.node_id === "invoice").map((t) => t.event);
        expect(steps.filter((e) => e === "node.blocked").length).toBeGreaterThanOrEqual(2);
        expect(steps).toContain("node.unblocked");
        const [message] = messagesOf("c-4");
        expect(messagesOf("c-4")).toHaveLength(1);
        expect(message?.messageId).toContain(`:${runId}:invoice:`);
        const invoice = agent.invoices.find((i) => i.messageId === message?.messageId);
        expect(ended.run.nodes.invoice?.output).toEqual({
          text: `opened ${invoice?.id}`,
          data: { invoice: invoice?.id },
        });
        expect(await sideEffectOf(env, message?.messageId ?? "")).toMatchObject({
          state: "succeeded",
        });
      } finally {
        agent.workPolls = 0;
      }
    },
    TIMEOUT,
  );
});
