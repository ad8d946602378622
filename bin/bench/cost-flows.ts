import { ulid } from "ulid";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  loadConversation,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { refundableOrder } from "../../lib/dev/local/scenario/refund";
import { loadChildRuns, startWorkflow, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { contentRunShape, FLOW_SHAPES, type FlowShape } from "../../lib/dev/metering/flow-cost";
import { inMeterScope } from "../../lib/dev/metering/metering";

/**
 * The reference flows the cost section plays on the local stack, one at a time: each starts as a
 * client starts it (a PutEvents on the stack's bus, counted under the `client` meter scope, as
 * the flow's first billed call) and ends when its outcome is stored and the runtime is idle. A
 * play answers the flow's shape as the peers would run what it did (a content run's claims,
 * review rounds and child runs are known once it ended).
 */
export interface PlayedFlow {
  readonly flow: string;
  readonly play: (env: LocalEnvironment) => Promise<FlowShape>;
}

/** The meter scope of what a client calls to start a flow. */
export const CLIENT_SCOPE = "client";

const shape = (flow: string): FlowShape => {
  const found = FLOW_SHAPES.find((s) => s.flow === flow);
  if (!found) throw new Error(`FLOW_SHAPES has no flow "${flow}"`);
  return found;
};

/** A customer's message, through to its reply's delivery. */
async function supportTurn(env: LocalEnvironment, text: string): Promise<void> {
  const conversationId = `conv_${ulid()}`;
  const message = customerMessage(conversationId, "cust_alice", text);
  await inMeterScope(CLIENT_SCOPE, () => putOnBus(env, "events", [message]));
  await waitUntil(`the reply to ${message.event_id}`, async () => {
    const view = await loadConversation(env, conversationId);
    return view?.turns[message.task_id]?.status === "delivered";
  });
  await env.runtime.idle();
}

/** A content run to its end; its shape counts the claims it checked and the review rounds. */
async function contentRun(
  env: LocalEnvironment,
  workflow: "quick-news" | "long-form",
  topic: string,
): Promise<FlowShape> {
  const run = await inMeterScope(CLIENT_SCOPE, () => startWorkflow(env, workflow, workflow, topic));
  const state = await waitForRunEnd(env, run.runId, 180_000);
  if (state.run.status !== "COMPLETED")
    throw new Error(`the ${workflow} run ${run.runId} ended ${state.run.status}, not COMPLETED`);
  await env.runtime.idle();
  // The fact check's items: the run's own map, or its child run's (long form).
  const children = await loadChildRuns(env, state);
  const checking = children.find((c) => c.nodeId === "fact-check")?.state ?? state;
  const checked = checking.run.nodes["fact-check"]?.output as { items?: unknown[] } | undefined;
  const claims = checked?.items?.length ?? 1;
  const rounds = state.run.loops?.review?.round ?? 1;
  return contentRunShape(workflow === "quick-news" ? "quick news" : "long form", {
    claims,
    rounds,
    childRuns: children.length,
  });
}

export const PLAYED_FLOWS: readonly PlayedFlow[] = [
  {
    flow: "support turn",
    play: async (env) => {
      await supportTurn(env, "Sorry, I meant order A-1001: where is it now?");
      return shape("support turn");
    },
  },
  {
    flow: "content run, quick news",
    play: (env) => contentRun(env, "quick-news", "battery recycling in small towns"),
  },
  {
    flow: "content run, long form",
    play: (env) => contentRun(env, "long-form", "how cities measure heat islands"),
  },
  {
    flow: "refund review",
    play: async (env) => {
      const orderId = await refundableOrder(env, 3450);
      await supportTurn(env, `Please refund order ${orderId}, the parcel came damaged.`);
      return shape("refund review");
    },
  },
];
