import { topology } from "../../infra/topology";
import { traceOf } from "../../operator/source";
import type { TraceNode } from "../../operator/views";
import type { LocalEnvironment } from "../local/environment";
import { loadConversation } from "../local/scenario/customer-support";
import { loadRun } from "../local/scenario/workflow";
import { repliedTwice, type Violation } from "../sim/invariants";
import type { DrainedLetter } from "./dead-letters";
import { conversationFolds, taskViewFolds } from "./fold";
import { newestMessage } from "./newest";
import type { Workload } from "./workload";

/**
 * What must hold after a full-stack schedule, whatever its faults, read from the outside: the
 * stack's traces (lib/operator), its stored state, the dead-letter queues, what the local channel
 * delivered and what the runtime saw each group report. The same invariants as the simulation's
 * (lib/dev/sim/invariants.ts), on the real handlers, tables and queues.
 */
export async function checkSchedule(
  env: LocalEnvironment,
  workload: Workload,
  deadLetters: readonly DrainedLetter[],
): Promise<Violation[]> {
  const nodes = await tracedNodes(env, workload);
  return [
    ...appliedOnce(env, nodes),
    ...nothingLost(env, nodes),
    ...onlyPoisonDeadLettered(deadLetters, workload.poisonId),
    ...relayKeptEverything(env),
    ...sentOnce(env, workload),
    ...(await ended(env, workload)),
    ...(await taskViewFolds(env.store, workload.task.id, workload.feedback)),
    ...(await conversationFolds(env.store, streamsOf(nodes))),
  ];
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

/** No group applied one event twice (what the runtime saw each group report). */
function appliedOnce(env: LocalEnvironment, nodes: readonly TraceNode[]): Violation[] {
  const violations: Violation[] = [];
  for (const node of nodes) {
    const applied = new Map<string, number>();
    for (const d of env.observations.deliveries.get(node.event.eventId) ?? [])
      if (d.status === "applied") applied.set(d.group, (applied.get(d.group) ?? 0) + 1);
    for (const [group, n] of applied)
      if (n > 1)
        violations.push({
          invariant: "applied once",
          detail: `${group} applied ${node.event.eventType} ${node.event.eventId} ${n} times`,
        });
  }
  return violations;
}

const SETTLED = new Set(["applied", "discarded", "rejected"]);
const SEEN_SETTLED = new Set(["applied", "duplicate", "discarded", "rejected"]);

/**
 * Every event reached every group subscribed to its type, which settled it (applied, discarded
 * or rejected it, or found it a duplicate of what it had applied), as the runtime saw the group
 * report or the group's records show; and the operator's trace shows that outcome.
 */
function nothingLost(env: LocalEnvironment, nodes: readonly TraceNode[]): Violation[] {
  const violations: Violation[] = [];
  for (const node of nodes) {
    const { eventType, eventId } = node.event;
    const seen = env.observations.deliveries.get(eventId) ?? [];
    for (const group of topology.groups) {
      if (!env.groups.includes(group.name) || !group.role.subscriptions.includes(eventType))
        continue;
      const traced = node.outcomes.some((o) => o.group === group.name && SETTLED.has(o.outcome));
      const settled = seen.some((d) => d.group === group.name && SEEN_SETTLED.has(d.status));
      if (traced) continue;
      violations.push({
        invariant: settled ? TRACE_SHOWS_OUTCOME : "nothing lost",
        detail: `${group.name}, ${eventType} ${eventId}: ${outcomesOf(env, node, group.name)}`,
      });
    }
  }
  return violations;
}

/** The invariant an operator's trace breaks when it misses an outcome the group did record. */
export const TRACE_SHOWS_OUTCOME = "trace shows the outcome";

function outcomesOf(env: LocalEnvironment, node: TraceNode, group: string): string {
  const recorded = node.outcomes.filter((o) => o.group === group).map((o) => o.outcome);
  const seen = (env.observations.deliveries.get(node.event.eventId) ?? [])
    .filter((d) => d.group === group)
    .map((d) => d.status);
  return `trace ${recorded.join("/") || "none"}, runtime saw ${seen.join("/") || "nothing"}`;
}

/** The dead-letter queues held the planted poison and nothing else. */
function onlyPoisonDeadLettered(letters: readonly DrainedLetter[], poisonId: string): Violation[] {
  const others = letters
    .filter((l) => l.eventId !== poisonId)
    .map((l) => ({
      invariant: "only poison dead-lettered",
      detail: `${l.group} ${l.queue}: ${l.eventType ?? "?"} ${l.eventId ?? "?"} (${l.code ?? "moved by SQS"})`,
    }));
  const poisoned = letters.some((l) => l.eventId === poisonId);
  return poisoned
    ? others
    : [
        ...others,
        { invariant: "poison dead-lettered", detail: `${poisonId} is in no dead-letter queue` },
      ];
}

/** The relay gave up on no stream batch (what it gives up on never reaches a bus). */
function relayKeptEverything(env: LocalEnvironment): Violation[] {
  return env.observations.failures
    .filter((f) => f.includes("gave up on a stream batch"))
    .map((detail) => ({ invariant: "nothing lost", detail }));
}

/** No customer message got two replies: at most one delivery per task, whatever its key. */
function sentOnce(env: LocalEnvironment, workload: Workload): Violation[] {
  const ours = env.channel
    .deliveries()
    .filter((d) => d.conversationId === workload.conversation.id);
  return repliedTwice(ours);
}

/**
 * The run ended, and the newest message of the conversation (the one it accepted last) has its
 * reply delivered.
 */
async function ended(env: LocalEnvironment, workload: Workload): Promise<Violation[]> {
  const violations: Violation[] = [];
  const run = await loadRun(env, workload.run.runId);
  if (!run || run.run.status === "RUNNING")
    violations.push({
      invariant: "runs end",
      detail: `run ${workload.run.runId} is ${run?.run.status ?? "not started"}`,
    });
  const newest = await newestMessage(env, workload);
  const view = await loadConversation(env, workload.conversation.id);
  const status = newest ? view?.turns[newest]?.status : undefined;
  if (status !== "delivered")
    violations.push({
      invariant: "conversations answered",
      detail: newest
        ? `${workload.conversation.id}: newest message ${newest} is ${status ?? "not in the view"}`
        : `${workload.conversation.id}: not every message was accepted`,
    });
  return violations;
}

/** The streams the conversation's view folds from: every support stream the traces wrote to. */
function streamsOf(nodes: readonly TraceNode[]) {
  const streams = new Map<string, { type: string; id: string }>();
  for (const { event } of nodes)
    if (event.version > 0 && event.aggregate.type !== "task" && event.aggregate.type !== "dag_run")
      streams.set(`${event.aggregate.type}#${event.aggregate.id}`, event.aggregate);
  return [...streams.values()];
}
