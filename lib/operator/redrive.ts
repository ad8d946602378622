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

export interface RedriveReport {
  readonly group: string;
  readonly from: string;
  readonly to: string;
  readonly moved: readonly RedriveItem[];
  /** Dead letters left where they are (not asked for, or their send failed). */
  readonly left: number;
  readonly failed: readonly { readonly messageId: string; readonly error: string }[];
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
 * Puts a group's dead letters back on the queue they came from, in order per order key: each is
 * sent (FIFO: its own message group, and a deduplication id made from the dead letter's message
 * id, so a message the queue saw less than five minutes ago is not swallowed, while a redrive
 * repeated after a lost delete is) and only then deleted from the dead-letter queue. A send that
 * fails leaves the message, and every later one of its order key, in the dead-letter queue. The
 * consumers' inbox and version gate make a message consumed twice harmless. Only what was in the
 * dead-letter queue when the redrive began is moved (a message that fails again at once stays).
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
  const failed: { messageId: string; error: string }[] = [];
  const kept: Message[] = [];
  // What reaches the dead-letter queue once the redrive has begun is left for the next one: a
  // message moved back that fails again at once must not go round in this call.
  const startedAt = Date.now();
  // Rounds: a FIFO queue hands out a message group's next messages once the earlier ones are gone.
  while (moved.length + kept.length < MAX_REDRIVE) {
    const held = await receiveHeld(stack.sqs, source, HOLD_SECONDS, MAX_REDRIVE);
    if (held.length === 0) break;
    const chosen = held.filter(
      (m) => sentAt(m) <= startedAt && (!wanted || wanted.has(eventIdOf(m) ?? "")),
    );
    kept.push(...held.filter((m) => !chosen.includes(m)));
    if (options.dryRun) {
      kept.push(...chosen);
      moved.push(...chosen);
      continue;
    }
    const result = await moveInOrder(stack.sqs, source, target, chosen);
    moved.push(...result.moved);
    failed.push(...result.failed);
    kept.push(...result.stuck);
  }
  await release(stack.sqs, source, kept);
  return {
    ...base,
    moved: inOrder(moved).map(itemOf),
    left: options.dryRun ? kept.length - moved.length : kept.length,
    failed,
  };
}

async function moveInOrder(sqs: SQSClient, source: string, target: string, messages: Message[]) {
  const moved: Message[] = [];
  const failed: { messageId: string; error: string }[] = [];
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
      failed.push({ messageId: m.MessageId ?? "", error: (error as Error).message });
      stuck.push(m);
      blocked.add(key);
      continue;
    }
    await sqs.send(new DeleteMessageCommand({ QueueUrl: source, ReceiptHandle: m.ReceiptHandle }));
    moved.push(m);
  }
  return { moved, failed, stuck };
}

/** When the message reached the dead-letter queue (ms since the epoch; 0 when not known). */
const sentAt = (m: Message): number => Number(m.Attributes?.SentTimestamp ?? 0);

/** Per order key in stream version order (then in the order they reached the dead-letter queue). */
function inOrder(messages: readonly Message[]): Message[] {
  return [...messages].sort((a, b) => {
    const ka = orderKeyOf(a) ?? "";
    const kb = orderKeyOf(b) ?? "";
    if (ka !== kb) return ka < kb ? -1 : 1;
    const va = versionOf(a);
    const vb = versionOf(b);
    if (va !== undefined && vb !== undefined && va !== vb) return va - vb;
    return sentAt(a) - sentAt(b);
  });
}

function eventIdOf(m: Message): string | undefined {
  const id = envelopeOf(m)?.event_id;
  return typeof id === "string" ? id : undefined;
}

function orderKeyOf(m: Message): string | undefined {
  const key = m.Attributes?.MessageGroupId ?? envelopeOf(m)?.order_key;
  return typeof key === "string" ? key : undefined;
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
