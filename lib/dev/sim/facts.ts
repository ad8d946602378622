import type { AgentJournal } from "../../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../../functions/core/agent/agent-role";
import { SAMPLE_ORDERS } from "../../../functions/roles/customer-support/integrations/orders/sample-orders";
import { parseRunState } from "../../../functions/roles/orchestrator/state";
import { refundOnRecord } from "../../../functions/roles/refund-review/tools";
import { MAX_STREAM_VERSION, registry } from "../../../schemas";
import type { StepCompleted, StepFailed } from "../../../schemas/events/step";
import {
  acceptedMessages,
  awaitingPerson,
  type RunFacts,
  runOfRefundKey,
  skippedSequences,
} from "../faults/invariants";
import type { StepAnswer, WorkflowRunFacts } from "../faults/workflow-invariants";
import { SIMULATED_WORKFLOWS } from "./headline-scoring";
import { type SentSignal, signalsOf, waitEndsOf } from "./run-history";
import type { World } from "./world";

const END_TYPES = new Set([
  "workflow.completed",
  "workflow.partial",
  "workflow.failed",
  "workflow.cancelled",
]);

/**
 * What a simulated world saw, for the invariants (lib/dev/faults/invariants.ts): its store's
 * commits, streams and views, its queues' dead letters, and what its reply channel delivered.
 */
export async function simulatedFacts(world: World): Promise<RunFacts> {
  // In memory the commits themselves are seen: each one that applied recorded its group's outcome.
  const recorded = world.store.applied.map((c) => ({ group: c.group, eventId: c.eventId }));
  return {
    store: world.memory,
    groups: world.roles.map((role) => ({
      name: role.group,
      subscriptions: role.subscriptions,
      unsequencedOnly: role.keepsMessages === true,
    })),
    events: [...world.memory.log, ...world.external]
      .filter((event) => registry.parse(event).ok)
      .map((event) => ({
        eventId: event.event_id,
        eventType: event.event_type,
        sequenced: event.aggregate.version > 0,
      })),
    applied: recorded,
    settled: recorded,
    deadLetters: [...world.queues.values()].flatMap((queue) =>
      queue.deadLetters.map((m) => ({
        group: queue.group,
        what: m.body.slice(0, 120),
        poison: m.messageGroup === "poison",
      })),
    ),
    runs: runsOf(world),
    replies: world.replies.deliveries(),
    conversations: await conversationsOf(world),
    tasks: [...world.memory.streams.keys()]
      .filter((key) => key.startsWith("task#"))
      .map((key) => key.slice("task#".length))
      .map((id) => ({
        id,
        feedback: world.external.filter(
          (e) => e.event_type === "task.feedback.received" && e.aggregate.id === id,
        ),
      })),
    // Not the conversation views: a view lists its turns in the order their first facts reach it,
    // so where a second message is routed before the first is accepted (a few schedules in ten
    // thousand) it stores an order its fold does not make. The stack's runs check them.
    conversationStreams: [],
    refunds: await refundsOf(world),
    refundsMade: await refundsMadeIn(world),
    awaitingPerson: await awaitingPerson(world.memory, world.memory.log),
    workflowRuns: await workflowRunsOf(world),
  };
}

/**
 * The runs of the simulated workflows (./headline-scoring.ts), those asked for and the child runs
 * the orchestrator started, each as it stands at the end, with where in the log it ended and its
 * cancel as a child was sent, every answer a step role committed for one of its nodes, and what
 * its states show of its waits and the signals sent to it (./run-history.ts).
 */
async function workflowRunsOf(world: World): Promise<WorkflowRunFacts[]> {
  const { log } = world.memory;
  const answers = new Map<string, StepAnswer[]>();
  const endedAt = new Map<string, number>();
  const cancelSentAt = new Map<string, number>();
  log.forEach((e, at) => {
    if (END_TYPES.has(e.event_type) && !endedAt.has(e.aggregate.id))
      endedAt.set(e.aggregate.id, at);
    if (e.event_type === "workflow.child.cancel.requested") {
      const child = (e.payload as { child_run_id: string }).child_run_id;
      if (!cancelSentAt.has(child)) cancelSentAt.set(child, at);
    }
    if (e.event_type !== "step.completed" && e.event_type !== "step.failed") return;
    const answer = e.payload as StepCompleted | StepFailed;
    const outcome = "output" in answer ? { output: answer.output } : { error: answer.error };
    const { node_id: node, generation, item } = answer;
    answers.set(answer.run_id, [
      ...(answers.get(answer.run_id) ?? []),
      { node, generation, ...(item === undefined ? {} : { item }), outcome },
    ]);
  });
  const asked = world.external
    .filter((e) => e.event_type === "workflow.start.requested")
    .map((e) => (e.payload as { run_id: string }).run_id);
  const started = [...world.memory.states.keys()]
    .filter((key) => key.startsWith("dag_run#"))
    .map((key) => key.slice("dag_run#".length));
  const eventTypes = new Map(
    [...log, ...world.external].map((e) => [e.event_id, e.event_type] as const),
  );
  const signals = signalsSent(world);
  const writes = world.store.runStates;
  const runs: WorkflowRunFacts[] = [];
  for (const id of new Set([...asked, ...started])) {
    const { state } = await world.memory.load({ state: { type: "dag_run", id } });
    const stored = parseRunState(state?.data);
    const name =
      stored?.run.workflow.name ??
      (world.external.find((e) => e.aggregate.id === id)?.payload as { workflow_name?: string })
        ?.workflow_name;
    const definition = SIMULATED_WORKFLOWS.find((w) => w.name === name);
    if (!definition) continue;
    runs.push({
      definition,
      id,
      run: stored?.run,
      ...(stored?.parent ? { parent: stored.parent } : {}),
      endedAt: endedAt.get(id),
      cancelSentAt: cancelSentAt.get(id),
      answers: answers.get(id) ?? [],
      waitEnds: waitEndsOf(definition, id, writes, eventTypes),
      signals: signalsOf(definition, id, writes, signals.get(id) ?? []),
    });
  }
  return runs;
}

/** The signals sent from outside (`workflow.signal.requested`), by the run they were sent to. */
function signalsSent(world: World): Map<string, SentSignal[]> {
  const signals = new Map<string, SentSignal[]>();
  for (const e of world.external) {
    if (e.event_type !== "workflow.signal.requested") continue;
    const { run_id, signal } = e.payload as { run_id: string; signal: string };
    signals.set(run_id, [...(signals.get(run_id) ?? []), { eventId: e.event_id, key: signal }]);
  }
  return signals;
}

/**
 * Each order of the world's: the payment stand-in's refunds of it, whether its record (as the
 * shop keeps it, not as a role may have read it) shows a refund, and its status now.
 */
async function refundsOf(world: World): Promise<RunFacts["refunds"]> {
  const counts = world.payments.refundsByOrder();
  const ids = new Set([...SAMPLE_ORDERS.map((o) => o.order_id), ...counts.keys()]);
  return Promise.all(
    [...ids].map(async (orderId) => {
      const order = await world.orders.get(orderId);
      return {
        orderId,
        count: counts.get(orderId) ?? 0,
        onRecord: order !== undefined && refundOnRecord(order),
        orderStatus: order?.status ?? "missing",
      };
    }),
  );
}

/** Each refund the payment stand-in made, and the order of the review whose key it was made under. */
async function refundsMadeIn(world: World): Promise<RunFacts["refundsMade"]> {
  return Promise.all(
    [...world.payments.refunds].map(async ([key, receipt]) => {
      const { state } = await world.memory.load({
        state: { type: AGENT_RUN_AGGREGATE, id: runOfRefundKey(key) },
      });
      const journal = state?.data as AgentJournal | undefined;
      return { key, orderId: receipt.order_id, reviewOf: journal?.subject.order_id };
    }),
  );
}

/** The runs asked for, and the event that ended each. */
function runsOf(world: World): RunFacts["runs"] {
  const ends = new Map(
    world.memory.log
      .filter((e) => END_TYPES.has(e.event_type))
      .map((e) => [e.aggregate.id, e.event_type]),
  );
  return world.external
    .filter((e) => e.event_type === "workflow.start.requested")
    .map((e) => (e.payload as { run_id: string }).run_id)
    .map((id) => ({ id, ended: ends.has(id), status: ends.get(id) ?? "not ended" }));
}

/** The conversations the customers wrote to, with their messages and those accepted. */
async function conversationsOf(world: World): Promise<RunFacts["conversations"]> {
  const sent = new Map<string, number>();
  const clientSeqs: Record<string, number> = {};
  for (const e of world.external)
    if (e.event_type === "conversation.message.received") {
      sent.set(e.aggregate.id, (sent.get(e.aggregate.id) ?? 0) + 1);
      const seq = (e.payload as { client_seq?: number }).client_seq;
      if (seq !== undefined) clientSeqs[e.task_id] = seq;
    }
  const conversations: RunFacts["conversations"][number][] = [];
  for (const [id, messages] of sent) {
    const stream = await world.memory.readStream(
      { type: "conversation", id },
      1,
      MAX_STREAM_VERSION,
    );
    conversations.push({
      id,
      sent: messages,
      accepted: acceptedMessages(stream),
      clientSeqs,
      skipped: skippedSequences(stream),
    });
  }
  return conversations;
}
