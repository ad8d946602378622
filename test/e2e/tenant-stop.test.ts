import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import { refundRunId } from "../../functions/roles/refund-review/refund-agent";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { refundableOrder, runReaches } from "../../lib/dev/local/scenario/refund";
import { loadRun, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { auditRecord } from "../support/audit";
import { localCli } from "../support/cli";
import { undocumented } from "../support/openapi";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * The kill switch on the local stack: `agentbus stop --tenant T`, run as a child process, ends
 * T's runs in flight CANCELLED with the operator's reason (a workflow run at once, an agent run
 * at its next step), starts no model or tool call for T from then on (the local model counts its
 * calls, the payment stand-in its refunds), is an event on the audit topic, and makes the front
 * door refuse T's new work (403 tenant_stopped) while another tenant's goes on; `agentbus resume
 * --tenant T` lifts it, and T's new work runs to its end.
 */
describe("a tenant stopped and resumed on the local stack", () => {
  const payments = new LocalPayments();
  const local = localSupportStack("ks", {
    payments,
    envOverrides: { REFUND_APPROVAL_ABOVE_CENTS: "10000", AGENT_CONFIRM_SECONDS: "900" },
  });
  const cli = localCli(() => local.env, local.stage, { AGENTBUS_OPERATOR: "ops_anna" });
  const door = () => {
    const frontDoor = local.env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    return frontDoor;
  };
  /** A POST to the door (`path` under `/v1`) as the tenant's user alice (customer cust_alice). */
  const post = async (tenant: string, path: string, body: unknown) => {
    const token = await door().issuer.token({ tenant_id: tenant, sub: "alice" });
    const response = await fetch(`${door().url}${path}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "idempotency-key": ulid(),
      },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status >= 400)
      expect(
        undocumented({
          method: "POST",
          path: new URL(`${door().url}${path}`).pathname,
          status: response.status,
          headers: response.headers,
          text,
        }),
        text,
      ).toEqual([]);
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  /** The tenant's customer asks for a refund of the order over HTTP; the answer. */
  const askForRefund = (tenant: string, orderId: string) =>
    post(tenant, `/conversations/conv_${ulid()}/messages`, {
      text: `Please refund order ${orderId}`,
    });
  const refundsOf = (orderId: string) => payments.refundsByOrder().get(orderId) ?? 0;
  const modelCallsOf = (taskIds: readonly string[]) =>
    local.env.model.calls().filter((c) => c.taskId !== undefined && taskIds.includes(c.taskId))
      .length;
  /** The operator's record as the audit group keeps it: the whole message, in its inbox row. */
  const audited = async (eventId: string) => {
    await waitUntil(
      `the audit record of ${eventId}`,
      () => auditRecord(local.env.store, eventId),
      TIMEOUT,
    );
    return (await local.inboxRow("audit", eventId))?.envelope;
  };

  it(
    "stop ends the tenant's runs CANCELLED with the reason, starts no model or tool call for it, and the door refuses it; resume lets new work run to its end",
    async () => {
      const tenant = `acme-${ulid().slice(-6).toLowerCase()}`;
      // T's work in flight: a refund that waits for approval, and a workflow run whose review
      // waits for a confirmation.
      const orderId = await refundableOrder(local.env, 20_000);
      const asked = await askForRefund(tenant, orderId);
      expect(asked.status, JSON.stringify(asked.body)).toBe(202);
      const agentRunId = refundRunId(asked.body.task_id);
      const blocked = await runReaches(local.env, agentRunId, "BLOCKED", TIMEOUT);
      expect(blocked.tenant_id).toBe(tenant);
      const started = await post(tenant, "/workflows/long-form/runs", {
        topic_hint: `${NEEDS_CONFIRMATION_MARKER} a quote on grid fees`,
      });
      expect(started.status, JSON.stringify(started.body)).toBe(202);
      const workflowRunId: string = started.body.run_id;
      await waitForRunEnd(
        local.env,
        workflowRunId,
        TIMEOUT,
        (s) => s.leases?.review?.blocked !== undefined,
      );
      const tasks = [blocked.task_id, started.body.task_id];
      const callsBefore = modelCallsOf(tasks);
      expect(callsBefore).toBeGreaterThan(0);

      const stop = await cli("stop", "--tenant", tenant, "--reason", "runaway spend", "--json");
      expect(stop.code, stop.stderr).toBe(0);
      const stopReport = JSON.parse(stop.stdout);
      expect(stopReport).toMatchObject({ recorded: true, runsCancelled: [workflowRunId] });

      // The workflow run ends CANCELLED with the stop's reason.
      const cancelled = await waitForRunEnd(local.env, workflowRunId, TIMEOUT);
      expect(cancelled.run.status).toBe("CANCELLED");
      const workflowEvents = await local.env.store.readStream(
        { type: "dag_run", id: workflowRunId },
        1,
        1000,
      );
      expect(
        workflowEvents.find((e) => e.event_type === "workflow.cancelled")?.payload,
      ).toMatchObject({
        requested_by: "ops_anna",
        reason: expect.stringContaining("runaway spend"),
      });
      // The agent run, approved after the stop, ends CANCELLED at that step: the refund is not made.
      const approved = await cli("approve", agentRunId, "--step", "call_2_1");
      expect(approved.code, approved.stderr).toBe(0);
      const ended = await runReaches(local.env, agentRunId, "CANCELLED", TIMEOUT);
      expect(ended.failure).toMatchObject({
        code: "operator.stopped",
        message: expect.stringContaining("runaway spend"),
      });
      expect(refundsOf(orderId)).toBe(0);

      // The front door refuses T's new work while the stop stands; another tenant's goes on.
      const refused = await askForRefund(tenant, await refundableOrder(local.env, 1500));
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: "tenant_stopped" });
      expect(JSON.stringify(refused.body)).toContain("runaway spend");
      const otherOrder = await refundableOrder(local.env, 1600);
      const other = await askForRefund("globex", otherOrder);
      expect(other.status, JSON.stringify(other.body)).toBe(202);
      await runReaches(local.env, refundRunId(other.body.task_id), "COMPLETED", TIMEOUT);
      expect(refundsOf(otherOrder)).toBe(1);
      // No model call started for T's work after the stop.
      expect(modelCallsOf(tasks)).toBe(callsBefore);

      expect(await audited(stopReport.auditId)).toMatchObject({
        event_type: "operator.stopped",
        tenant_id: tenant,
        payload: {
          scope: "tenant",
          target: tenant,
          reason: "runaway spend",
          runs_cancelled: [workflowRunId],
          requested_by: "ops_anna",
          // The AWS principal the CLI acted as: STS's answer for its credentials (moto's here).
          principal: expect.stringMatching(/^arn:aws:(sts|iam)::\d{12}:/),
          via: "cli",
        },
      });

      const resume = await cli("resume", "--tenant", tenant, "--json");
      expect(resume.code, resume.stderr).toBe(0);
      const resumeReport = JSON.parse(resume.stdout);
      expect(resumeReport.lifted).toMatchObject({ scope: "tenant", id: tenant, by: "ops_anna" });
      expect(await audited(resumeReport.auditId)).toMatchObject({
        event_type: "operator.resumed",
        tenant_id: tenant,
        payload: {
          scope: "tenant",
          target: tenant,
          stopped_by: "ops_anna",
          requested_by: "ops_anna",
          principal: expect.stringMatching(/^arn:aws:(sts|iam)::\d{12}:/),
        },
      });

      // T's new work runs to its end.
      const newOrder = await refundableOrder(local.env, 1700);
      const again = await askForRefund(tenant, newOrder);
      expect(again.status, JSON.stringify(again.body)).toBe(202);
      const done = await runReaches(
        local.env,
        refundRunId(again.body.task_id),
        "COMPLETED",
        TIMEOUT,
      );
      expect(done.tenant_id).toBe(tenant);
      expect(refundsOf(newOrder)).toBe(1);
      // The runs cancelled stay cancelled.
      expect((await loadRun(local.env, workflowRunId))?.run.status).toBe("CANCELLED");
    },
    TIMEOUT * 8,
  );
});
