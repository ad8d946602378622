import type { AgentJournal } from "../../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../../functions/core/agent/agent-role";
import { DynamoOrders } from "../../../functions/roles/customer-support/integrations/orders/dynamodb";
import { DynamoPaymentsStandIn } from "../../../functions/roles/customer-support/integrations/payments/dynamodb-stand-in";
import { refundRunId } from "../../../functions/roles/refund-review/refund-agent";
import { ISSUE_REFUND, refundOnRecord } from "../../../functions/roles/refund-review/tools";
import { topology } from "../../infra/project";
import { fromSdk } from "../../operator/from-sdk";
import { traceOf } from "../../operator/source";
import type { TraceNode } from "../../operator/views";
import {
  acceptedMessages,
  checkInvariants,
  escalatedSends,
  type RunFacts,
  type Violation,
} from "../faults/invariants";
import type { LocalEnvironment } from "../local/environment";
import { streamOf } from "../local/scenario/customer-support";
import { loadRun } from "../local/scenario/workflow";
import type { DrainedLetter } from "./dead-letters";
import type { Workload } from "./workload";

/**
 * What must hold after a full-stack schedule, whatever its faults: the invariants the simulation
 * is held to (lib/dev/faults/invariants.ts) on the schedule's facts, and what only the stack can
 * break: the operator's trace showing every outcome, and the relay giving up on no stream batch.
 */
export async function checkSchedule(
  env: LocalEnvironment,
  workload: Workload,
  deadLetters: readonly DrainedLetter[],
): Promise<Violation[]> {
  const nodes = await tracedNodes(env, workload);
  return [
    ...(await checkInvariants(await stackFacts(env, workload, deadLetters, nodes))),
    ...traceShowsOutcomes(env, nodes),
    ...relayKeptEverything(env),
  ];
}

/**
 * What a schedule did, read from the outside: the stack's traces as lib/operator reads them, its
 * stored state, the dead-letter queues, what the local channel delivered and what the runtime
 * saw each group report. Its applied-once facts are the runtime's `applied` reports (each a commit
 * that changed the group's state); a group settled an event if its trace or its reports say so.
 */
async function stackFacts(
  env: LocalEnvironment,
  workload: Workload,
  deadLetters: readonly DrainedLetter[],
  nodes: readonly TraceNode[],
): Promise<RunFacts> {
  const run = await loadRun(env, workload.run.runId);
  const status = run?.run.status ?? "not started";
  const conversation = { type: "conversation", id: workload.conversation.id };
  return {
    store: env.store,
    groups: topology.groups
      .filter((group) => env.groups.includes(group.name))
      .map((group) => ({
        name: group.name,
        subscriptions: group.role.subscriptions,
        unsequencedOnly: group.role.keepsMessages === true,
      })),
    events: nodes.map(({ event }) => ({
      eventId: event.eventId,
      eventType: event.eventType,
      sequenced: event.version > 0,
    })),
    applied: reported(env, nodes, APPLIED),
    settled: [...traced(nodes), ...reported(env, nodes, SEEN_SETTLED)],
    deadLetters: deadLetters.map((letter) => ({
      group: letter.group,
      what: `${letter.eventType ?? "?"} ${letter.eventId ?? "?"} in its ${letter.queue} dead-letter queue (${letter.code ?? "moved by SQS"})`,
      poison: letter.eventId === workload.poisonId,
    })),
    runs: [{ id: workload.run.runId, ended: run !== undefined && status !== "RUNNING", status }],
    replies: env.channel.deliveries().filter((d) => d.conversationId === conversation.id),
    conversations: [
      {
        id: conversation.id,
        sent: workload.conversation.messages.length,
        accepted: acceptedMessages(await streamOf(env, conversation)),
      },
    ],
    tasks: [{ id: workload.task.id, feedback: workload.feedback }],
    conversationStreams: streamsOf(nodes),
    refunds: await refundsOf(env, workload.refundOrder),
    refundsMade: await refundsMadeIn(env, workload),
    awaitingPerson: await waitingTurns(env, workload),
    // A schedule's content run has no map node: nothing to check beyond its end.
    workflowRuns: [],
  };
}

/**
 * The conversation's turns that wait for a person: their refund review, or their reply's send
 * escalated with its outcome unknown (escalatedSends).
 */
async function waitingTurns(env: LocalEnvironment, workload: Workload): Promise<string[]> {
  const { messages } = workload.conversation;
  const waiting = await escalatedSends(
    env.store,
    messages.map((m) => m.task_id),
  );
  for (const message of messages) {
    const { state } = await env.store.load({
      state: { type: AGENT_RUN_AGGREGATE, id: refundRunId(message.task_id) },
    });
    const status = (state?.data as { status?: string } | undefined)?.status;
    if (status === "BLOCKED" || status === "NEEDS_HUMAN") waiting.push(message.task_id);
  }
  return waiting;
}

/** The schedule's refundable order: its refunds at the payment stand-in, and its status now. */
async function refundsOf(env: LocalEnvironment, orderId: string): Promise<RunFacts["refunds"]> {
  const client = fromSdk(env.clients.dynamodb);
  const { orders, payments } = env.names.tables;
  if (!orders || !payments) return [];
  const count = await new DynamoPaymentsStandIn({ client, tableName: payments }).refundCount(
    orderId,
  );
  const order = await new DynamoOrders(client, orders, { consistentRead: true }).get(orderId);
  const onRecord = order !== undefined && refundOnRecord(order);
  return [{ orderId, count, onRecord, orderStatus: order?.status ?? "missing" }];
}

/**
 * The refunds the conversation's reviews made, each with the order its review is about: every
 * `issue_refund` key of each run's journal, asked of the payment stand-in.
 */
async function refundsMadeIn(
  env: LocalEnvironment,
  workload: Workload,
): Promise<RunFacts["refundsMade"]> {
  const client = fromSdk(env.clients.dynamodb);
  const { payments } = env.names.tables;
  if (!payments) return [];
  const standIn = new DynamoPaymentsStandIn({ client, tableName: payments });
  const made: RunFacts["refundsMade"][number][] = [];
  for (const message of workload.conversation.messages) {
    const { state } = await env.store.load({
      state: { type: AGENT_RUN_AGGREGATE, id: refundRunId(message.task_id) },
    });
    const journal = state?.data as AgentJournal | undefined;
    const keys = new Set(
      (journal?.window ?? []).filter((s) => s.tool === ISSUE_REFUND && s.key).map((s) => s.key),
    );
    for (const key of keys) {
      const answer = await standIn.query(key ?? "");
      if (answer.status === "applied")
        made.push({
          key: key ?? "",
          orderId: answer.receipt.order_id,
          reviewOf: journal?.subject.order_id,
        });
    }
  }
  return made;
}

/** Every event of the schedule's traces (the task's, the run's and each message's correlation). */
async function tracedNodes(env: LocalEnvironment, workload: Workload): Promise<TraceNode[]> {
  const correlations = [
    workload.task.correlationId,
    workload.run.correlationId,
    ...workload.conversation.messages.map((m) => m.correlation_id),
  ];
  const nodes = new Map<string, TraceNode>();
  const visit = (node: TraceNode) => {
    nodes.set(node.event.eventId, node);
    node.children.forEach(visit);
  };
  for (const id of correlations) (await traceOf(env.ops, id))?.roots.forEach(visit);
  return [...nodes.values()];
}

const APPLIED = new Set(["applied"]);
/** What settles an event, as the group's records (the trace) show it. */
const SETTLED = new Set(["applied", "discarded", "rejected"]);
/** What settles an event, as the runtime saw the group report it. */
const SEEN_SETTLED = new Set(["applied", "duplicate", "discarded", "rejected"]);

/** Each report of these statuses the runtime saw a group make for a traced event. */
function reported(env: LocalEnvironment, nodes: readonly TraceNode[], statuses: Set<string>) {
  return nodes.flatMap(({ event }) =>
    (env.observations.deliveries.get(event.eventId) ?? [])
      .filter((d) => statuses.has(d.status))
      .map((d) => ({ group: d.group, eventId: event.eventId, eventType: event.eventType })),
  );
}

/** Each settled outcome the operator's trace shows. */
function traced(nodes: readonly TraceNode[]) {
  return nodes.flatMap(({ event, outcomes }) =>
    outcomes
      .filter((o) => SETTLED.has(o.outcome))
      .map((o) => ({ group: o.group, eventId: event.eventId })),
  );
}

/** The invariant an operator's trace breaks when it misses an outcome the group did record. */
export const TRACE_SHOWS_OUTCOME = "trace shows the outcome";

/**
 * Every subscribed group the runtime saw settle a traced event has that outcome in the operator's
 * trace (were it in neither, the shared check reports the event lost).
 */
function traceShowsOutcomes(env: LocalEnvironment, nodes: readonly TraceNode[]): Violation[] {
  const violations: Violation[] = [];
  for (const node of nodes) {
    const { eventType, eventId } = node.event;
    const shown = new Set(traced([node]).map((t) => t.group));
    const seen = new Set(reported(env, [node], SEEN_SETTLED).map((r) => r.group));
    for (const group of topology.groups) {
      if (!env.groups.includes(group.name) || !group.role.subscriptions.includes(eventType))
        continue;
      if (shown.has(group.name) || !seen.has(group.name)) continue;
      violations.push({
        invariant: TRACE_SHOWS_OUTCOME,
        detail: `${group.name}, ${eventType} ${eventId}: ${outcomesOf(env, node, group.name)}`,
      });
    }
  }
  return violations;
}

function outcomesOf(env: LocalEnvironment, node: TraceNode, group: string): string {
  const recorded = node.outcomes.filter((o) => o.group === group).map((o) => o.outcome);
  const seen = (env.observations.deliveries.get(node.event.eventId) ?? [])
    .filter((d) => d.group === group)
    .map((d) => d.status);
  return `trace ${recorded.join("/") || "none"}, runtime saw ${seen.join("/") || "nothing"}`;
}

/** The relay gave up on no stream batch (what it gives up on never reaches a bus). */
function relayKeptEverything(env: LocalEnvironment): Violation[] {
  return env.observations.failures
    .filter((f) => f.includes("gave up on a stream batch"))
    .map((detail) => ({ invariant: "nothing lost", detail }));
}

/** The streams the conversation's view folds from: every support stream the traces wrote to. */
function streamsOf(nodes: readonly TraceNode[]) {
  const streams = new Map<string, { type: string; id: string }>();
  for (const { event } of nodes)
    if (event.version > 0 && event.aggregate.type !== "task" && event.aggregate.type !== "dag_run")
      streams.set(`${event.aggregate.type}#${event.aggregate.id}`, event.aggregate);
  return [...streams.values()];
}
