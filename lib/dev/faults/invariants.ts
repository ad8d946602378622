import type { EventStore } from "../../../functions/core/ports";
import {
  DELIVERY_AGGREGATE,
  SEND_REQUESTED,
} from "../../../functions/roles/customer-support/sender/sender";
import type { DeliveryState } from "../../../functions/roles/customer-support/sender/state";
import type { AggregateRef, Envelope } from "../../../schemas";
import { canonical } from "../../operator/rebuild";
import { conversationDrift, taskViewDrift, type ViewDrift } from "./fold";
import type { Violation } from "./violation";
import { checkWorkflowRuns, type WorkflowRunFacts } from "./workflow-invariants";

export type { Violation } from "./violation";

/**
 * What "correct" means after a chaos schedule, whatever its faults, for the simulation and the
 * full-stack runs alike: each run gathers what it saw into RunFacts (the simulation from its
 * in-memory store and queues, the stack from its traces, tables, dead-letter queues and runtime
 * reports), and these checks read only those facts, never how the code works.
 */

/** One consumer group and one event. */
export interface GroupEvent {
  readonly group: string;
  readonly eventId: string;
  readonly eventType?: string;
}

/** What a run saw, in the one shape the invariants read. */
export interface RunFacts {
  /** The store the views and streams are read from. */
  readonly store: EventStore;
  /**
   * The consumer groups that ran, with the event types each subscribes to, and whether it receives
   * only unsequenced messages (the audit group: ConsumerGroupProps.unsequencedOnly).
   */
  readonly groups: readonly {
    readonly name: string;
    readonly subscriptions: readonly string[];
    readonly unsequencedOnly?: boolean;
  }[];
  /**
   * Every event of the schedule, stored or put on the bus, that its subscribers must settle;
   * `sequenced` when it is stored on a stream.
   */
  readonly events: readonly {
    readonly eventId: string;
    readonly eventType: string;
    readonly sequenced?: boolean;
  }[];
  /** One entry each time a group's commit recorded an outcome for an event (applied it). */
  readonly applied: readonly GroupEvent[];
  /** The events each group settled: applied, discarded, rejected, or found a duplicate of. */
  readonly settled: readonly GroupEvent[];
  /** What the dead-letter queues held at the end; `poison` marks the planted poison message. */
  readonly deadLetters: readonly {
    readonly group: string;
    readonly what: string;
    readonly poison: boolean;
  }[];
  /** The workflow runs asked for: whether each ended, and how it stands. */
  readonly runs: readonly {
    readonly id: string;
    readonly ended: boolean;
    readonly status: string;
  }[];
  /** Every reply the channel delivered; a key starts with the task id of the message it answers. */
  readonly replies: readonly { readonly key: string }[];
  /**
   * Each conversation: how many customer messages were sent to it, and the task ids of those it
   * accepted in the order it accepted them (acceptedMessages).
   */
  readonly conversations: readonly {
    readonly id: string;
    readonly sent: number;
    readonly accepted: readonly string[];
    /**
     * The client sequence of each message sent with one, by task id (absent where the run does
     * not know them); with `skipped`, the client sequences the conversation stopped waiting for
     * (skippedSequences).
     */
    readonly clientSeqs?: Readonly<Record<string, number>>;
    readonly skipped?: readonly number[];
  }[];
  /** The tasks whose view must fold from their stream and their client feedback. */
  readonly tasks: readonly { readonly id: string; readonly feedback: readonly Envelope[] }[];
  /** The streams the conversation views fold from. */
  readonly conversationStreams: readonly AggregateRef[];
  /**
   * The tasks whose turn waits for a person (a refund review BLOCKED on an approval, or handed
   * over with a refund whose outcome could not be learnt; a reply whose send stayed unknown,
   * escalated: see escalatedSends): no one acts in a chaos run, so their reply comes only once a
   * person has decided.
   */
  readonly awaitingPerson: readonly string[];
  /**
   * Each order a schedule may have refunded: how many refunds the payment stand-in made of it,
   * whether its record shows a refund made by anyone else (the shop: `submitted` or `refunded`),
   * and its status now.
   */
  readonly refunds: readonly {
    readonly orderId: string;
    readonly count: number;
    readonly onRecord: boolean;
    readonly orderStatus: string;
  }[];
  /**
   * Each refund the payment stand-in made under a refund review's key: the order refunded and
   * the order the review that made it is about (its run's subject; undefined when none is found).
   */
  readonly refundsMade: readonly {
    readonly key: string;
    readonly orderId: string;
    readonly reviewOf: string | undefined;
  }[];
  /** The workflow runs whose nodes are checked beyond their end (./workflow-invariants.ts). */
  readonly workflowRuns: readonly WorkflowRunFacts[];
}

export async function checkInvariants(facts: RunFacts): Promise<Violation[]> {
  return [
    ...appliedOnce(facts),
    ...nothingLost(facts),
    ...onlyPoisonDeadLettered(facts),
    ...runsEnded(facts),
    ...(await viewsFold(facts)),
    ...repliedTwice(facts.replies),
    ...conversationsAnswered(facts),
    ...appliedInClientOrder(facts),
    ...refundedOnceAndCancelled(facts.refunds),
    ...refundsOfTheReviewedOrder(facts.refundsMade),
    ...checkWorkflowRuns(facts.workflowRuns),
  ];
}

/**
 * The tasks of `events` that wait for a person: those whose agent run is BLOCKED or NEEDS_HUMAN
 * (the runs their `<agent>.step.requested` commands name, read from the store), and those whose
 * `notification.send.requested` the sender escalated (escalatedSends).
 */
export async function awaitingPerson(
  store: EventStore,
  events: readonly Envelope[],
): Promise<string[]> {
  const runs = new Map<string, string>();
  for (const e of events)
    if (e.event_type.endsWith(".step.requested") && e.aggregate.type === "agent_run")
      runs.set(e.aggregate.id, e.task_id);
  const waiting: string[] = [];
  for (const [runId, taskId] of runs) {
    const { state } = await store.load({ state: { type: "agent_run", id: runId } });
    const status = (state?.data as { status?: string } | undefined)?.status;
    if (status === "BLOCKED" || status === "NEEDS_HUMAN") waiting.push(taskId);
  }
  const sends = events.filter((e) => e.event_type === SEND_REQUESTED).map((e) => e.task_id);
  return [...waiting, ...(await escalatedSends(store, sends))];
}

/**
 * The tasks of `taskIds` whose reply the sender handed to a person: a send whose outcome it could
 * not learn in its attempts, recorded `escalated` on `delivery/<task_id>` (with
 * `notification.failed` outcome "unknown", the side-effect record left `unknown`) for a person to
 * check and resolve (`notification.resolve.requested`). Whether it reached the customer is not
 * known, and sending it again under a new key could answer twice, so that hand-off is the turn's
 * answer until a person decides.
 */
export async function escalatedSends(
  store: EventStore,
  taskIds: Iterable<string>,
): Promise<string[]> {
  const escalated: string[] = [];
  for (const taskId of new Set(taskIds)) {
    const { state } = await store.load({ state: { type: DELIVERY_AGGREGATE, id: taskId } });
    const keys = Object.values((state?.data as DeliveryState | undefined)?.keys ?? {});
    if (keys.some((fact) => fact.outcome === "escalated")) escalated.push(taskId);
  }
  return escalated;
}

/** The task ids of a conversation stream's accepted messages, in the order it accepted them. */
export function acceptedMessages(stream: readonly Envelope[]): string[] {
  return stream
    .filter((e) => e.event_type === "conversation.message.accepted")
    .sort((a, b) => a.aggregate.version - b.aggregate.version)
    .map((e) => e.task_id);
}

/** The client sequences a conversation stream recorded as skipped (conversation.sequence.skipped). */
export function skippedSequences(stream: readonly Envelope[]): number[] {
  return stream
    .filter((e) => e.event_type === "conversation.sequence.skipped")
    .flatMap((e) => {
      const { from, to } = e.payload as { from: number; to: number };
      return Array.from({ length: to - from + 1 }, (_, i) => from + i);
    });
}

/**
 * Client messages applied in sequence order (seed 000 §5.2): the messages a conversation accepted
 * that carry a client sequence were accepted in increasing sequence, none accepted that it
 * recorded as skipped.
 */
function appliedInClientOrder(facts: RunFacts): Violation[] {
  const violations: Violation[] = [];
  for (const { id, accepted, clientSeqs, skipped = [] } of facts.conversations) {
    if (!clientSeqs) continue;
    const seqs = accepted.flatMap((task) =>
      clientSeqs[task] === undefined ? [] : [clientSeqs[task]],
    );
    const outOfOrder = seqs.some((seq, i) => i > 0 && seq <= (seqs[i - 1] ?? 0));
    const both = seqs.filter((seq) => skipped.includes(seq));
    const detail = outOfOrder
      ? `${id}: accepted in the order ${seqs.join(", ")}`
      : both.length > 0
        ? `${id}: ${both.join(", ")} both skipped and accepted`
        : undefined;
    if (detail) violations.push({ invariant: "client messages applied in sequence order", detail });
  }
  return violations;
}

const keyOf = (e: GroupEvent) => `${e.group} ${e.eventId}`;
const short = (value: unknown) => canonical(value).slice(0, 300);

/** Each event changes each group's state at most once. */
function appliedOnce(facts: RunFacts): Violation[] {
  const seen = new Map<string, { entry: GroupEvent; times: number }>();
  for (const entry of facts.applied) {
    const key = keyOf(entry);
    seen.set(key, { entry, times: (seen.get(key)?.times ?? 0) + 1 });
  }
  return [...seen.values()]
    .filter(({ times }) => times > 1)
    .map(({ entry, times }) => ({
      invariant: "applied once",
      detail: `${entry.group} applied ${entry.eventType ? `${entry.eventType} ` : ""}${entry.eventId} ${times} times`,
    }));
}

/**
 * Every event reached every group subscribed to its type, which settled it (a stored one: every
 * such group that receives more than unsequenced messages).
 */
function nothingLost(facts: RunFacts): Violation[] {
  const settled = new Set(facts.settled.map(keyOf));
  const violations: Violation[] = [];
  for (const event of facts.events)
    for (const group of facts.groups) {
      if (!group.subscriptions.includes(event.eventType)) continue;
      if (group.unsequencedOnly && event.sequenced) continue;
      if (!settled.has(keyOf({ group: group.name, eventId: event.eventId })))
        violations.push({
          invariant: "nothing lost",
          detail: `${group.name} never settled ${event.eventType} ${event.eventId}`,
        });
    }
  return violations;
}

/** The dead-letter queues hold the planted poison message and nothing else. */
function onlyPoisonDeadLettered(facts: RunFacts): Violation[] {
  const others = facts.deadLetters
    .filter((letter) => !letter.poison)
    .map((letter) => ({
      invariant: "only poison dead-lettered",
      detail: `${letter.group}: ${letter.what}`,
    }));
  if (facts.deadLetters.some((letter) => letter.poison)) return others;
  const missing = {
    invariant: "poison dead-lettered",
    detail: "the poison is in no dead-letter queue",
  };
  return [...others, missing];
}

/** Every workflow run that was asked for has ended (completed, partial or failed). */
function runsEnded(facts: RunFacts): Violation[] {
  return facts.runs
    .filter((run) => !run.ended)
    .map((run) => ({ invariant: "runs end", detail: `run ${run.id} is ${run.status}` }));
}

/** Every task view and conversation view equals the fold of its events (./fold). */
async function viewsFold(facts: RunFacts): Promise<Violation[]> {
  const drift: ViewDrift[] = [];
  for (const task of facts.tasks)
    drift.push(...(await taskViewDrift(facts.store, task.id, task.feedback)));
  drift.push(...(await conversationDrift(facts.store, facts.conversationStreams)));
  return drift.map(({ view, stored, folded }) => ({
    invariant: "projection = fold",
    detail: `${view}: stored ${short(stored)} vs folded ${short(folded)}`,
  }));
}

/** No customer message gets two replies: at most one delivery per task, whatever its key. */
function repliedTwice(replies: RunFacts["replies"]): Violation[] {
  const byTask = new Map<string, string[]>();
  for (const { key } of replies) {
    const task = taskOf(key);
    byTask.set(task, [...(byTask.get(task) ?? []), key]);
  }
  return [...byTask]
    .filter(([, keys]) => keys.length > 1)
    .map(([task, keys]) => ({
      invariant: "sent once",
      detail: `${task} got ${keys.length} replies (${keys.join(", ")})`,
    }));
}

const taskOf = (key: string) => key.split(":")[0] ?? key;

/**
 * No order is refunded twice, whoever refunded it (a refund on its record counts with the payment
 * stand-in's), and an order refunded through AgentBus is cancelled (seed 000 §6.2).
 */
function refundedOnceAndCancelled(refunds: RunFacts["refunds"]): Violation[] {
  return refunds.flatMap(({ orderId, count, onRecord, orderStatus }) => [
    ...(count + (onRecord ? 1 : 0) > 1
      ? [
          {
            invariant: "refunded once",
            detail: `order ${orderId} was refunded ${count} times${onRecord ? " after the refund on its record" : ""}`,
          },
        ]
      : []),
    ...(count > 0 && orderStatus !== "cancelled"
      ? [
          {
            invariant: "refunded ⇒ cancelled",
            detail: `order ${orderId} was refunded and is ${orderStatus}`,
          },
        ]
      : []),
  ]);
}

/** A refund review refunds only the order it is about, whatever its model asked. */
function refundsOfTheReviewedOrder(made: RunFacts["refundsMade"]): Violation[] {
  return made
    .filter(({ orderId, reviewOf }) => orderId !== reviewOf)
    .map(({ key, orderId, reviewOf }) => ({
      invariant: "refunds only the reviewed order",
      detail: `refund ${key} is of order ${orderId}, in a review of ${reviewOf ?? "no order"}`,
    }));
}

/** The run of a refund review's key `<task_id>:<run_id>:<turn>:<tool call id>`. */
export function runOfRefundKey(key: string): string {
  return key.split(":")[1] ?? "";
}

/**
 * Every message reached its conversation (accepted, or skipped after its successors waited their
 * bound: appliedInClientOrder), and the newest it accepted has its reply delivered, or
 * waits for a person's decision (awaitingPerson: a refund review's, or a send escalated with its
 * outcome unknown).
 */
function conversationsAnswered(facts: RunFacts): Violation[] {
  const answered = new Set([
    ...facts.replies.map(({ key }) => taskOf(key)),
    ...facts.awaitingPerson,
  ]);
  const violations: Violation[] = [];
  for (const { id, sent, accepted, skipped = [] } of facts.conversations) {
    const newest = accepted.at(-1);
    const detail =
      accepted.length + skipped.length < sent
        ? `${id}: ${accepted.length} of its ${sent} messages accepted, ${skipped.length} skipped`
        : newest && !answered.has(newest)
          ? `${id}: no reply to its newest message (${newest})`
          : undefined;
    if (detail) violations.push({ invariant: "conversations answered", detail });
  }
  return violations;
}
