import { createHash } from "node:crypto";
import {
  DeleteMessageCommand,
  type Message,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { OperatorAction } from "../../schemas/events/operator";
import { envelopeOf, receiveHeld, release } from "./queue-peek";
import type { OpsStack } from "./stack";

/** How long messages being redriven stay hidden in the dead-letter queue (seconds). */
const HOLD_SECONDS = 120;
/** Most messages one redrive moves. */
export const MAX_REDRIVE = 1000;

export interface RedriveOptions {
  /** Only these event ids (all when empty). */
  readonly eventIds?: readonly string[];
  /** Report what would move, change nothing. */
  readonly dryRun?: boolean;
  /** `queue`: the consumer's dead letters back to its queue; `buffer`: the dispatcher's. */
  readonly from?: "queue" | "buffer";
}

export interface RedriveItem {
  readonly messageId: string;
  readonly eventId?: string;
  readonly orderKey?: string;
  readonly sentAt?: string;
}

export interface RedriveFailure {
  readonly messageId: string;
  readonly eventId?: string;
  readonly error: string;
}

export interface RedriveReport {
  readonly group: string;
  readonly from: string;
  readonly to: string;
  readonly moved: readonly RedriveItem[];
  /** Dead letters left where they are (not asked for, or their send failed). */
  readonly left: number;
  /** Dead letters whose send failed (left in the dead-letter queue, in `left`). */
  readonly failed: readonly RedriveFailure[];
  /**
   * Dead letters re-queued (so in `moved`) whose delete from the dead-letter queue failed (a
   * receipt handle whose hold had ended, a throttle): the copy left there comes back when its hold
   * ends, and redriving it again is harmless (within five minutes the queue drops it by its
   * deduplication id, after that the consumers' inbox skips it).
   */
  readonly notDeleted: readonly RedriveFailure[];
  readonly dryRun: boolean;
}

/** Why `group` has no dead letters to redrive from `from` (undefined: it has the queues). */
export function redriveTargetProblem(
  stack: OpsStack,
  group: string,
  from: "queue" | "buffer" = "queue",
): string | undefined {
  const groups = stack.names.groups;
  if (!(group in groups))
    return `no consumer group ${group} (groups: ${Object.keys(groups).join(", ")})`;
  if (from === "buffer" && !groups[group]?.buffer)
    return `consumer group ${group} has no buffer queue (it is unordered)`;
  return undefined;
}

/**
 * The audit record of a redrive that moved something (`operator.action.recorded`, put with
 * `recordAction`): the group, why, and the events moved (ids only, at most 100).
 */
export function redriveAuditAction(
  report: RedriveReport,
  reason: string | undefined,
): Omit<OperatorAction, "requested_by"> {
  return {
    action: "dlq.redrive",
    target: report.group,
    ...(reason ? { reason } : {}),
    outcome: {
      count: report.moved.length,
      event_ids: report.moved.flatMap((m) => (m.eventId ? [m.eventId] : [])).slice(0, 100),
      failed: report.failed.length,
    },
  };
}

/**
 * Puts a group's dead letters back on the queue they came from, in order per order key (`inOrder`):
 * each is sent (FIFO: its own message group, and a deduplication id made from the dead letter's
 * message id, so a message the queue saw less than five minutes ago is not swallowed, while a
 * redrive repeated after a lost delete is) and only then deleted from the dead-letter queue. A send
 * that fails leaves the message, and every later one of its order key, in the dead-letter queue. A
 * delete that fails is reported in `notDeleted` and the redrive goes on: the message is re-queued.
 * The consumers' inbox and version gate make a message consumed twice harmless. Only what was in
 * the dead-letter queue when the redrive began is moved (a message that fails again at once stays).
 */
export async function redrive(
  stack: OpsStack,
  group: string,
  options: RedriveOptions = {},
): Promise<RedriveReport> {
  const urls = stack.names.groups[group];
  if (!urls) throw new Error(`no consumer group ${group}`);
  const fromBuffer = options.from === "buffer";
  const source = fromBuffer ? urls.bufferDeadLetterQueue : urls.deadLetterQueue;
  const target = fromBuffer ? urls.buffer : urls.queue;
  if (!source || !target) throw new Error(`consumer group ${group} has no buffer queue`);
  const wanted = options.eventIds?.length ? new Set(options.eventIds) : undefined;
  const base = { group, from: source, to: target, dryRun: Boolean(options.dryRun) };
  const moved: Message[] = [];
  const failed: RedriveFailure[] = [];
  const notDeleted = new Map<string, RedriveFailure>();
  const kept: Message[] = [];
  // What reaches the dead-letter queue once the redrive has begun is left for the next one: a
  // message moved back that fails again at once must not go round in this call.
  const startedAt = Date.now();
  // Rounds: a FIFO queue hands out a message group's next messages once the earlier ones are gone.
  while (moved.length + kept.length < MAX_REDRIVE) {
    const held = await receiveHeld(stack.sqs, source, HOLD_SECONDS, MAX_REDRIVE);
    if (held.length === 0) break;
    const again = held.filter((m) => notDeleted.has(m.MessageId ?? ""));
    const fresh = held.filter((m) => !again.includes(m));
    const deletedAgain = await deleteAgain(stack.sqs, source, again, notDeleted);
    // When no delete succeeds and nothing new came, the redrive is done.
    if (fresh.length === 0 && !deletedAgain) break;
    const chosen = fresh.filter(
      (m) => sentAt(m) <= startedAt && (!wanted || wanted.has(eventIdOf(m) ?? "")),
    );
    kept.push(...fresh.filter((m) => !chosen.includes(m)));
    if (options.dryRun) {
      kept.push(...chosen);
      moved.push(...inOrder(chosen));
      continue;
    }
    const result = await moveInOrder(stack.sqs, source, target, chosen);
    moved.push(...result.moved);
    failed.push(...result.failed);
    for (const f of result.notDeleted) notDeleted.set(f.messageId, f);
    kept.push(...result.stuck);
  }
  await release(stack.sqs, source, kept);
  return {
    ...base,
    moved: byOrderKey(moved).map(itemOf),
    left: options.dryRun ? kept.length - moved.length : kept.length,
    failed,
    notDeleted: [...notDeleted.values()],
  };
}

/**
 * Deletes the messages re-queued in an earlier round whose delete failed because their hold had
 * ended, now handed out again: they are on the queue already, so they are only deleted, with their
 * new receipt handles, and `notDeleted` updated. Whether any delete succeeded: each holds back the
 * rest of its FIFO message group, so another round may then bring more.
 */
async function deleteAgain(
  sqs: SQSClient,
  source: string,
  again: readonly Message[],
  notDeleted: Map<string, RedriveFailure>,
): Promise<boolean> {
  let deleted = false;
  for (const m of again) {
    const error = await deleteFailure(sqs, source, m);
    if (error) notDeleted.set(m.MessageId ?? "", { ...failureOf(m), error });
    else {
      notDeleted.delete(m.MessageId ?? "");
      deleted = true;
    }
  }
  return deleted;
}

async function moveInOrder(sqs: SQSClient, source: string, target: string, messages: Message[]) {
  const moved: Message[] = [];
  const failed: RedriveFailure[] = [];
  const notDeleted: RedriveFailure[] = [];
  const stuck: Message[] = [];
  const blocked = new Set<string>();
  const fifo = target.endsWith(".fifo");
  for (const m of inOrder(messages)) {
    const key = orderKeyOf(m) ?? "";
    if (blocked.has(key)) {
      stuck.push(m);
      continue;
    }
    try {
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: target,
          MessageBody: m.Body ?? "",
          ...(fifo
            ? {
                MessageGroupId: orderKeyOf(m) ?? "redriven",
                MessageDeduplicationId: `redrive-${createHash("sha256")
                  .update(m.MessageId ?? "")
                  .digest("hex")
                  .slice(0, 64)}`,
              }
            : {}),
        }),
      );
    } catch (error) {
      failed.push({ ...failureOf(m), error: (error as Error).message });
      stuck.push(m);
      blocked.add(key);
      continue;
    }
    // Re-queued: the message has moved whether or not its delete succeeds, and the later ones of
    // its order key may follow it.
    moved.push(m);
    const error = await deleteFailure(sqs, source, m);
    if (error) notDeleted.push({ ...failureOf(m), error });
  }
  return { moved, failed, notDeleted, stuck };
}

/** Deletes a message from the dead-letter queue; what went wrong, if the delete failed. */
async function deleteFailure(
  sqs: SQSClient,
  source: string,
  m: Message,
): Promise<string | undefined> {
  try {
    await sqs.send(new DeleteMessageCommand({ QueueUrl: source, ReceiptHandle: m.ReceiptHandle }));
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

function failureOf(m: Message): Omit<RedriveFailure, "error"> {
  const eventId = eventIdOf(m);
  return { messageId: m.MessageId ?? "", ...(eventId ? { eventId } : {}) };
}

/** When the message reached the dead-letter queue (ms since the epoch; 0 when not known). */
const sentAt = (m: Message): number => Number(m.Attributes?.SentTimestamp ?? 0);

/**
 * The order to re-queue messages in, given in the order the dead-letter queue handed them out:
 * order key by order key, each in that receive order, except that one aggregate stream's messages
 * fill the places they were received in by version.
 *
 * One order key (a FIFO message group) holds several streams (a conversation's, its replies', its
 * deliveries'; a run's and its agent runs'; with tenant lanes, many aggregates), and versions of
 * different streams say nothing about which came first. A FIFO dead-letter queue hands a group's
 * messages out in the order they were dead-lettered, the order the group had: that order is kept.
 * One stream's messages may still come out of version order: from a standard dead-letter queue
 * (the buffer's, `--buffer`) in any order, and from a FIFO one when the bus and the buffer queue,
 * which keep no order, put them in the group out of order (v8 before v7: v8's gap repair fails on
 * the bug in v7, then v7 fails too). The version gate would cope (v8 first reads v7 from the event
 * store and applies it, and v7 then comes as a duplicate), but only while the store holds every
 * version of the gap, and a redrive that puts each stream in version order applies N, N+1, ... as
 * delivered. Filling a stream's places by version keeps both: where each stream already is in
 * version order (the usual case) nothing moves, and the streams stay interleaved as they were
 * received. Messages of no stream (unsequenced) keep their places. Only what one receive hands out
 * is ordered: a FIFO queue hands out a group's later messages only once the earlier ones are gone.
 */
function inOrder(received: readonly Message[]): Message[] {
  const byKey = new Map<string, Message[]>();
  for (const m of received) {
    const key = orderKeyOf(m) ?? "";
    const sameKey = byKey.get(key);
    if (sameKey) sameKey.push(m);
    else byKey.set(key, [m]);
  }
  return [...byKey.keys()]
    .sort(compareKeys)
    .flatMap((key) => streamsInVersionOrder(byKey.get(key) ?? []));
}

/** One order key's messages, as received, with each stream's messages in its places by version. */
function streamsInVersionOrder(group: readonly Message[]): Message[] {
  const versions = group.map(versionOf);
  const places = new Map<string, number[]>();
  group.forEach((m, at) => {
    const stream = streamOf(m);
    if (stream === undefined || versions[at] === undefined) return;
    const sameStream = places.get(stream);
    if (sameStream) sameStream.push(at);
    else places.set(stream, [at]);
  });
  const ordered = [...group];
  for (const at of places.values()) {
    // By version, and a version dead-lettered twice (a delivery repeated upstream) as received.
    const byVersion = [...at].sort((a, b) => (versions[a] ?? 0) - (versions[b] ?? 0) || a - b);
    at.forEach((place, i) => {
      ordered[place] = group[byVersion[i] ?? place] as Message;
    });
  }
  return ordered;
}

/** Grouped by order key (as `inOrder` goes), each key's messages in the order they came. */
function byOrderKey(messages: readonly Message[]): Message[] {
  return [...messages].sort((a, b) => compareKeys(orderKeyOf(a) ?? "", orderKeyOf(b) ?? ""));
}

const compareKeys = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function eventIdOf(m: Message): string | undefined {
  const id = envelopeOf(m)?.event_id;
  return typeof id === "string" ? id : undefined;
}

function orderKeyOf(m: Message): string | undefined {
  const key = m.Attributes?.MessageGroupId ?? envelopeOf(m)?.order_key;
  return typeof key === "string" ? key : undefined;
}

/** The aggregate stream a message belongs to: its aggregate's type and id. */
function streamOf(m: Message): string | undefined {
  const aggregate = envelopeOf(m)?.aggregate as { type?: unknown; id?: unknown } | undefined;
  return typeof aggregate?.type === "string" && typeof aggregate.id === "string"
    ? `${aggregate.type}/${aggregate.id}`
    : undefined;
}

function versionOf(m: Message): number | undefined {
  const version = (envelopeOf(m)?.aggregate as { version?: unknown } | undefined)?.version;
  return typeof version === "number" && version > 0 ? version : undefined;
}

function itemOf(m: Message): RedriveItem {
  const sent = Number(m.Attributes?.SentTimestamp);
  const eventId = eventIdOf(m);
  const orderKey = orderKeyOf(m);
  return {
    messageId: m.MessageId ?? "",
    ...(eventId ? { eventId } : {}),
    ...(orderKey ? { orderKey } : {}),
    ...(Number.isFinite(sent) ? { sentAt: new Date(sent).toISOString() } : {}),
  };
}
