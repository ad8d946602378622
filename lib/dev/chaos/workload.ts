import { ulid } from "ulid";
import { appendToStream } from "../../../functions/core/producer";
import type { Decision } from "../../../functions/core/role";
import { systemClock, ulidSource } from "../../../functions/core/runtime";
import { FAIL_FACT_CHECK_MARKER } from "../../../functions/roles/content-agents/local-scripts";
import { type Envelope, registry } from "../../../schemas";
import type { Random } from "../faults/random";
import type { LocalEnvironment } from "../local/environment";
import { putOnBus } from "../local/put-on-bus";
import { clientFeedback, LIFECYCLE } from "../local/scenario";
import { customerMessage } from "../local/scenario/customer-support";
import { refundableOrder } from "../local/scenario/refund";
import { startWorkflow } from "../local/scenario/workflow";

/**
 * What one full-stack schedule plays, drawn from its seed, under fresh ids (so schedules on one
 * deployment never touch each other's streams): a reference task (some of its lifecycle committed
 * by the task API, client feedback put on the bus), a content-production run, a support
 * conversation of one or two messages, and a poison message.
 */
export interface Workload {
  readonly task: { readonly id: string; readonly correlationId: string; readonly steps: number };
  readonly feedback: readonly Envelope[];
  readonly run: {
    readonly runId: string;
    readonly correlationId: string;
    readonly workflow: string;
    readonly failing: boolean;
  };
  readonly conversation: { readonly id: string; readonly messages: readonly Envelope[] };
  /** An order of the schedule's own that a message may ask to refund (at most once). */
  readonly refundOrder: string;
  /** The planted poison message's event id: the only thing a dead-letter queue may hold. */
  readonly poisonId: string;
}

/** What the simulated customers ask (orders of the local sample, and a question with no order). */
const CUSTOMER_TEXTS = [
  "Has the refund for order 123 gone through?",
  "Was order 456 delivered?",
  "Where is my order A-1001?",
  "Is the shop open today?",
];

/** Plays the workload onto the stack (the producers' and clients' calls meet no faults). */
export async function playWorkload(env: LocalEnvironment, random: Random): Promise<Workload> {
  const task = await commitTask(env, 1 + random.below(LIFECYCLE.length));
  const feedback = [clientFeedback(task, 1 + random.below(5))];
  const poison = clientFeedback(task, 3, { correlation_id: "user_138_phone_13800138000" });
  await putOnBus(env, "events", [...feedback, poison as unknown as Envelope]);
  const failing = random.chance(0.3);
  const workflow = random.pick(["quick-news", "long-form"]);
  const hint = `${failing ? `${FAIL_FACT_CHECK_MARKER} ` : ""}energy storage`;
  const run = await startWorkflow(env, "chaos", workflow, hint);
  const conversationId = `conv_${ulid()}`;
  const refundOrder = await refundableOrder(env, 7900, { status: "returned", item: "Trail shoes" });
  const texts = [...CUSTOMER_TEXTS, `Please refund order ${refundOrder}, I sent it back.`];
  // Back to back, each with its client sequence: the conversation applies them in that order.
  const messages = Array.from({ length: 1 + random.below(2) }, (_, i) =>
    customerMessage(conversationId, "cust_alice", random.pick(texts), {}, i + 1),
  );
  await putOnBus(env, "events", messages);
  return {
    task,
    feedback,
    run: { runId: run.runId, correlationId: run.correlationId, workflow, failing },
    conversation: { id: conversationId, messages },
    refundOrder,
    poisonId: poison.event_id,
  };
}

/** The task API commits the task's first `steps` lifecycle events, each caused by the previous. */
async function commitTask(env: LocalEnvironment, steps: number) {
  const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
  const task = { id: `task_${ulid()}`, correlationId: `corr_${ulid()}`, steps };
  let cause: Envelope | undefined;
  for (const step of LIFECYCLE.slice(0, steps)) {
    const emitted = await appendToStream(deps, {
      aggregate: { type: "task", id: task.id },
      producer: "task-api",
      correlationId: task.correlationId,
      taskId: task.id,
      cause,
      decide: (state): Decision<{ status: string }> => ({
        state: { status: step.type, ...(state?.data as object | undefined) },
        emit: [step],
      }),
    });
    cause = emitted.at(-1);
  }
  return task;
}
