import { describe, expect, it } from "vitest";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { DynamoOrders } from "../../functions/roles/customer-support/integrations/orders/dynamodb";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import {
  BAD_TOOL_INPUT_MARKER,
  RAMBLE_AFTER_REFUND_MARKER,
} from "../../functions/roles/refund-review/local-script";
import { sideEffectOf, streamOf, waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { askForRefund, refundableOrder, runReaches } from "../../lib/dev/local/scenario/refund";
import { fromSdk } from "../../lib/operator/from-sdk";
import type { Envelope } from "../../schemas";
import { localCli } from "../support/cli";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * The refund agent on the local stack (seed 000 §10): a customer's refund question goes from the
 * conversation through the router to the agent, whose run goes step by step through the deployed
 * queues, its refunds through a payment stand-in the test controls (faults), its decisions from
 * the operator CLI run as a child process, and its outcome back to the customer through reply
 * generation and the sender. Refunds above 100.00 wait for approval.
 */
describe("the refund agent on the local stack", () => {
  const payments = new LocalPayments();
  const local = localSupportStack("rr", {
    payments,
    envOverrides: { REFUND_APPROVAL_ABOVE_CENTS: "10000", MAX_UNKNOWN_ATTEMPTS: "5" },
  });
  const cli = localCli(() => local.env, local.stage, { AGENTBUS_OPERATOR: "ops_anna" });

  const newOrder = (totalCents: number) => refundableOrder(local.env, totalCents);

  const orders = () =>
    new DynamoOrders(fromSdk(local.env.clients.dynamodb), local.env.names.tables.orders ?? "", {
      consistentRead: true,
    });

  const askFor = (orderId: string, question?: string) => askForRefund(local.env, orderId, question);
  // Half the test's time, so a run that stops short fails with the status it stopped in.
  const reaches = (runId: string, status: string) =>
    runReaches(local.env, runId, status, TIMEOUT / 2);
  const factsOf = async (runId: string, type: string): Promise<Envelope[]> =>
    (await streamOf(local.env, { type: AGENT_RUN_AGGREGATE, id: runId })).filter(
      (e) => e.event_type === type,
    );
  const refundsOf = (orderId: string) => payments.refundsByOrder().get(orderId) ?? 0;

  it(
    "answers a refund question: the order is cancelled, then refunded once",
    async () => {
      const orderId = await newOrder(3450);
      const runId = await askFor(orderId);
      const done = await reaches(runId, "COMPLETED");
      expect(done.totals).toMatchObject({ model_turns: 3, tool_calls: 3 });
      const [approved] = await factsOf(runId, "refund.approved");
      expect(approved?.payload).toMatchObject({ order_id: orderId, amount_cents: 3450 });
      expect(refundsOf(orderId)).toBe(1);
      expect((await orders().get(orderId))?.status).toBe("cancelled");
      // The customer is told, through reply generation and the sender.
      const conversationId = done.subject.conversation_id ?? "";
      const delivered = await waitUntil(
        "the reply to the refund question",
        () => local.deliveriesTo(conversationId)[0],
        TIMEOUT,
      );
      expect(delivered.text).toContain("Your refund has been issued.");
      // The trace shows each model turn and tool call under the task.
      const trace = await cli("trace", done.task_id);
      expect(trace.code, trace.stderr).toBe(0);
      expect(trace.stdout).toContain(
        `after model turn ${runId}:turn:1 asked get_order, get_refund_status`,
      );
      expect(trace.stdout).toContain(
        `after tool call call_2_1 issue_refund: succeeded (run) (key ${done.task_id}:${runId}:2:call_2_1)`,
      );
      const steps = await factsOf(runId, "refund_review.step.requested");
      expect(steps.map((e) => (e.payload as { done: { kind: string } }).done.kind)).toEqual([
        "start",
        "model",
        "tool",
        "tool",
        "model",
        "tool",
      ]);
    },
    TIMEOUT,
  );

  it(
    "a crash after the refund applied and before the commit gives exactly one refund",
    async () => {
      const orderId = await newOrder(2999);
      const refund = payments.refund.bind(payments);
      let crashed = 0;
      payments.refund = async (request) => {
        const receipt = await refund(request);
        if (request.order_id === orderId && crashed++ === 0) throw new Error("the worker died");
        return receipt;
      };
      try {
        const runId = await askFor(orderId);
        const done = await reaches(runId, "COMPLETED");
        expect(crashed).toBe(1);
        expect(refundsOf(orderId)).toBe(1);
        expect(await factsOf(runId, "refund.approved")).toHaveLength(1);
        const key = done.window.find((s) => s.tool === "issue_refund")?.key ?? "";
        expect(key).toBe(`${done.task_id}:${runId}:2:call_2_1`);
        // The second delivery found the record pending from the first and asked by the key.
        expect(await sideEffectOf(local.env, key)).toMatchObject({
          state: "succeeded",
          attempts: 2,
        });
      } finally {
        payments.refund = refund;
      }
    },
    TIMEOUT,
  );

  it(
    "a timeout after the refund applied is resolved by a query",
    async () => {
      const orderId = await newOrder(2599);
      payments.failNext("timeout_after");
      const runId = await askFor(orderId);
      const done = await reaches(runId, "COMPLETED");
      expect(done.window.some((s) => s.outcome === "succeeded (query after timeout)")).toBe(true);
      expect(refundsOf(orderId)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    "an outcome that cannot be learnt is escalated, listed by status, and resolved from the CLI",
    async () => {
      const orderId = await newOrder(4999);
      payments.failNext("timeout_after", ...Array<"query_unknown">(5).fill("query_unknown"));
      const runId = await askFor(orderId);
      const waiting = await reaches(runId, "NEEDS_HUMAN");
      expect(waiting.waiting).toMatchObject({ kind: "outcome", tool: "issue_refund" });
      expect(refundsOf(orderId)).toBe(1);
      const status = await cli("status");
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toContain(`${runId} waits for outcome of issue_refund call_2_1`);
      expect(status.stdout).toContain(`${waiting.task_id}:${runId}:2:call_2_1`);

      const [receipt] = [...payments.refunds.values()].filter((r) => r.order_id === orderId);
      const resolved = await cli(
        "resolve",
        runId,
        "--step",
        "call_2_1",
        "--as",
        "applied",
        "--output",
        JSON.stringify(receipt),
        "--reason",
        "seen at the provider",
      );
      expect(resolved.code, resolved.stderr).toBe(0);
      await reaches(runId, "COMPLETED");
      expect(await factsOf(runId, "refund.approved")).toHaveLength(1);
      expect(refundsOf(orderId)).toBe(1);
      const again = await cli("resolve", runId, "--step", "call_2_1", "--as", "applied");
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("already decided");
    },
    TIMEOUT,
  );

  it(
    "a refund made before the run is handed over is announced; the person's answer from the CLI tells the customer",
    async () => {
      const orderId = await newOrder(4200);
      const runId = await askFor(
        orderId,
        `Please refund order ${orderId} ${RAMBLE_AFTER_REFUND_MARKER}`,
      );
      const waiting = await reaches(runId, "NEEDS_HUMAN");
      expect(waiting.waiting?.kind).toBe("answer");
      const [receipt] = [...payments.refunds.values()].filter((r) => r.order_id === orderId);
      const [approved] = await factsOf(runId, "refund.approved");
      expect(approved?.payload).toMatchObject({ order_id: orderId, refund_id: receipt?.refund_id });
      const answer = {
        decision: "approved",
        reason: "Your refund has been issued.",
        amount_cents: 4200,
        refund_id: receipt?.refund_id,
      };
      const resolved = await cli(
        "resolve",
        runId,
        "--as",
        "answer",
        "--output",
        JSON.stringify(answer),
      );
      expect(resolved.code, resolved.stderr).toBe(0);
      const done = await reaches(runId, "COMPLETED");
      expect(await factsOf(runId, "refund.approved")).toHaveLength(1);
      expect((await factsOf(runId, "refund.review.completed"))[0]?.payload).toMatchObject(answer);
      const delivered = await waitUntil(
        "the reply once a person answered",
        () => local.deliveriesTo(done.subject.conversation_id ?? "")[0],
        TIMEOUT,
      );
      expect(delivered.text).toContain("Your refund has been issued.");
      expect(refundsOf(orderId)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    "a refund over the threshold waits, is approved from the CLI, and is made once",
    async () => {
      const orderId = await newOrder(20_000);
      const runId = await askFor(orderId);
      const blocked = await reaches(runId, "BLOCKED");
      expect(blocked.waiting).toMatchObject({
        kind: "approval",
        tool: "issue_refund",
        input: { order_id: orderId, amount_cents: 20_000 },
      });
      expect(refundsOf(orderId)).toBe(0);
      const status = await cli("status");
      expect(status.stdout).toContain(`${runId} waits for approval of issue_refund call_2_1`);
      const listed = await cli("approvals", "--json");
      expect(JSON.parse(listed.stdout)).toContainEqual(
        expect.objectContaining({
          kind: "tool_call",
          id: runId,
          step: "call_2_1",
          action: "issue_refund",
          input: { order_id: orderId, amount_cents: 20_000, reason: expect.any(String) },
        }),
      );
      const wrong = await cli("approve", runId, "--step", "call_9_9");
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toContain("waits for a decision on call_2_1, not call_9_9");
      const approved = await cli("approve", runId, "--step", "call_2_1", "--reason", "checked");
      expect(approved.code, approved.stderr).toBe(0);
      const done = await reaches(runId, "COMPLETED");
      expect(done.window.some((s) => s.outcome === "approve by ops_anna")).toBe(true);
      expect(refundsOf(orderId)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    "rejected from the CLI, the refund is never made and the customer gets the rejection",
    async () => {
      const orderId = await newOrder(20_000);
      const runId = await askFor(orderId);
      await reaches(runId, "BLOCKED");
      const rejected = await cli(
        "reject",
        runId,
        "--step",
        "call_2_1",
        "--reason",
        "outside policy",
      );
      expect(rejected.code, rejected.stderr).toBe(0);
      await reaches(runId, "COMPLETED");
      const [fact] = await factsOf(runId, "refund.rejected");
      expect(fact?.payload).toMatchObject({
        order_id: orderId,
        reason: expect.stringContaining("outside policy"),
      });
      expect(refundsOf(orderId)).toBe(0);
      expect((await orders().get(orderId))?.status).toBe("delivered");
      const conversationId = String(
        fact?.payload && (fact.payload as { conversation_id: string }).conversation_id,
      );
      const delivered = await waitUntil(
        "the rejection sent to the customer",
        () => local.deliveriesTo(conversationId)[0],
        TIMEOUT,
      );
      expect(delivered.text).toContain("outside policy");
    },
    TIMEOUT,
  );

  it(
    "a tool call with bad input gets an error turn and nothing runs",
    async () => {
      const orderId = await newOrder(1500);
      const runId = await askFor(
        orderId,
        `Refund order ${orderId} please ${BAD_TOOL_INPUT_MARKER}`,
      );
      const done = await reaches(runId, "COMPLETED");
      expect(done.totals.refused_calls).toBe(1);
      expect(refundsOf(orderId)).toBe(1);
    },
    TIMEOUT,
  );
});
