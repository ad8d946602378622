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
 * The reference flows the cost section plays on the local stack: each starts as a client starts
 * it (a PutEvents on the stack's bus, counted under the `client` meter scope, as the flow's first
 * billed call) and ends when its outcome is stored and the runtime is idle. Played alone (one at
 * a time) and loaded (many started at once, then the runtime left to settle), which is why a
 * start and its end are apart. The end answers the flow's shape as the peers would run what it
 * did (a content run's claims, review rounds and child runs are known once it ended).
 */
export interface PlayedFlow {
  readonly flow: string;
  readonly start: (env: LocalEnvironment) => Promise<StartedFlow>;
}

/** A flow a client started: waits until its outcome is stored and answers its shape. */
export interface StartedFlow {
  readonly ended: (timeoutMs: number) => Promise<FlowShape>;
}

/** One flow alone, from an idle stack to an idle stack. */
export async function playAlone(env: LocalEnvironment, flow: PlayedFlow): Promise<FlowShape> {
  const started = await flow.start(env);
  const shape = await started.ended(ALONE_TIMEOUT_MS);
  await env.runtime.idle();
  return shape;
}

/** How long one flow played alone may take to reach its outcome. */
const ALONE_TIMEOUT_MS = 180_000;

/** The meter scope of what a client calls to start a flow. */
export const CLIENT_SCOPE = "client";

const shape = (flow: string): FlowShape => {
  const found = FLOW_SHAPES.find((s) => s.flow === flow);
  if (!found) throw new Error(`FLOW_SHAPES has no flow "${flow}"`);
  return found;
};

/** A customer's message, through to its reply's delivery. */
async function supportTurn(
  env: LocalEnvironment,
  text: string,
  flow: "support turn" | "refund review",
): Promise<StartedFlow> {
  const conversationId = `conv_${ulid()}`;
  const message = customerMessage(conversationId, "cust_alice", text);
  await inMeterScope(CLIENT_SCOPE, () => putOnBus(env, "events", [message]));
  return {
    ended: async (timeoutMs) => {
      await waitUntil(
        `the reply to ${message.event_id}`,
        async () => {
          const view = await loadConversation(env, conversationId);
          return view?.turns[message.task_id]?.status === "delivered";
        },
        timeoutMs,
      );
      return shape(flow);
    },
  };
}

/** A content run to its end; its shape counts the claims it checked and the review rounds. */
async function contentRun(
  env: LocalEnvironment,
  workflow: "quick-news" | "long-form",
  topic: string,
): Promise<StartedFlow> {
  const run = await inMeterScope(CLIENT_SCOPE, () => startWorkflow(env, workflow, workflow, topic));
  return {
    ended: async (timeoutMs) => {
      const state = await waitForRunEnd(env, run.runId, timeoutMs);
      if (state.run.status !== "COMPLETED")
        throw new Error(
          `the ${workflow} run ${run.runId} ended ${state.run.status}, not COMPLETED`,
        );
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
    },
  };
}

export const PLAYED_FLOWS: readonly PlayedFlow[] = [
  {
    flow: "support turn",
    start: (env) =>
      supportTurn(env, "Sorry, I meant order A-1001: where is it now?", "support turn"),
  },
  {
    flow: "content run, quick news",
    start: (env) => contentRun(env, "quick-news", "battery recycling in small towns"),
  },
  {
    flow: "content run, long form",
    start: (env) => contentRun(env, "long-form", "how cities measure heat islands"),
  },
  {
    flow: "refund review",
    start: async (env) => {
      const orderId = await refundableOrder(env, 3450);
      return supportTurn(
        env,
        `Please refund order ${orderId}, the parcel came damaged.`,
        "refund review",
      );
    },
  },
];
