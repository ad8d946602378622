import { ulid } from "ulid";
import type { AgentJournal } from "../../../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../../../functions/core/agent/agent-role";
import type { OrderRecord } from "../../../../functions/roles/customer-support/events/conversation";
import { putOrders } from "../../../../functions/roles/customer-support/integrations/orders/dynamodb";
import { findOrderId } from "../../../../functions/roles/customer-support/router/router";
import { refundRunId } from "../../../../functions/roles/refund-review/refund-agent";
import { fromSdk } from "../../../operator/from-sdk";
import type { LocalEnvironment } from "../environment";
import { putOnBus } from "../put-on-bus";
import { customerMessage, waitUntil } from "./customer-support";

/**
 * Refund questions on the local stack: an order of its own to refund, a customer's question
 * about it, and the refund agent's run (`agent_run/rrun_<task token>`) read back.
 */

/**
 * A new order number that the router reads as one (findOrderId: it takes a token with a digit
 * in it), so a refund question about it always reaches the refund agent. A ULID's random tail
 * has no digit about once in ninety: such an order was routed as a general question.
 */
export function newOrderNumber(): string {
  for (;;) {
    const orderId = `R-${ulid().slice(-12)}`;
    if (findOrderId(`order ${orderId}`) === orderId) return orderId;
  }
}

/** An order of Alice's with no refund, under a fresh id, in the stack's orders table. */
export async function refundableOrder(
  env: LocalEnvironment,
  totalCents: number,
  fields: Partial<Pick<OrderRecord, "status" | "item">> = {},
): Promise<string> {
  const orderId = newOrderNumber();
  await putOrders(fromSdk(env.clients.dynamodb), env.names.tables.orders ?? "", [
    {
      order_id: orderId,
      customer_id: "cust_alice",
      status: fields.status ?? "delivered",
      item: fields.item ?? "Desk lamp",
      total_cents: totalCents,
      currency: "USD",
      refund: { status: "none" },
    },
  ]);
  return orderId;
}

/** Alice asks for a refund of the order, as a client would; the run of its review. */
export async function askForRefund(
  env: LocalEnvironment,
  orderId: string,
  question = `Please refund order ${orderId}`,
): Promise<string> {
  const message = customerMessage(`conv_${ulid()}`, "cust_alice", question);
  await putOnBus(env, "events", [message]);
  return refundRunId(message.task_id);
}

/** The journal of an agent run, if it has one. */
export async function agentRunOf(
  env: LocalEnvironment,
  runId: string,
): Promise<AgentJournal | undefined> {
  const { state } = await env.store.load({ state: { type: AGENT_RUN_AGGREGATE, id: runId } });
  return state?.data as AgentJournal | undefined;
}

/**
 * Waits until the run's status is `status`; its journal then. A wait that times out names the
 * status the run was last seen in, so a run stuck elsewhere says where, and for a run never
 * started how far its task got.
 */
export async function runReaches(
  env: LocalEnvironment,
  runId: string,
  status: string,
  timeoutMs: number,
): Promise<AgentJournal> {
  let last = "no journal";
  try {
    return await waitUntil(
      `run ${runId} ${status}`,
      async () => {
        const journal = await agentRunOf(env, runId);
        if (journal)
          last = `${journal.status}${journal.waiting ? ` waiting for ${journal.waiting.kind}` : ""}`;
        return journal?.status === status ? journal : undefined;
      },
      timeoutMs,
    );
  } catch (error) {
    const where = last === "no journal" ? `; ${await taskSoFar(env, runId)}` : "";
    throw new Error(`${(error as Error).message} (last seen: ${last}${where})`);
  }
}

/**
 * How far the task of a run that never started got: its stored events and the outcomes groups
 * recorded for it (discards, failures), by type and group; and the last failures the runtime saw
 * anywhere (a failed invocation leaves its batch invisible for its queue's visibility timeout).
 */
async function taskSoFar(env: LocalEnvironment, runId: string): Promise<string> {
  const taskId = `task_${runId.slice(runId.indexOf("_") + 1)}`;
  const [events, outcomes] = await Promise.all([
    env.store.eventsByTask(taskId),
    env.store.outcomesByTask(taskId),
  ]);
  const stored = events.map((e) => e.event_type).join(", ") || "none";
  const recorded =
    outcomes
      .map(
        (o) =>
          `${o.group} ${o.eventType} ${o.outcome}${"reason" in o && o.reason ? ` (${o.reason})` : ""}`,
      )
      .join(", ") || "none";
  const { failures, errors } = env.observations;
  const seen = [
    ...failures.slice(-5),
    ...errors.slice(-5).map((e) => `${e.group} ${e.code}: ${e.message}`),
  ];
  return `${taskId}: events stored ${stored}; outcomes recorded ${recorded}; runtime failures ${seen.join(" | ") || "none"}`;
}
