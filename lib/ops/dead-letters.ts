import {
  ChangeMessageVisibilityBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import type { OpsStack } from "./stack";
import type { DeadLetterView } from "./views";

/** How long a peeked message stays hidden before it is made visible again (seconds). */
const PEEK_VISIBILITY_SECONDS = 30;

/**
 * The messages of the groups' dead-letter queues, read without removing them: received with a
 * short visibility timeout, then made visible again at once. Receiving counts as a receive (SQS
 * raises ApproximateReceiveCount; dead-letter queues have no redrive policy, so nothing moves).
 * A FIFO queue hands out the messages of a message group only once the earlier ones are back: a
 * group with more dead letters than one receive returns shows its first ones.
 */
export async function listDeadLetters(
  stack: OpsStack,
  options: { readonly group?: string; readonly limit?: number } = {},
): Promise<DeadLetterView[]> {
  const limit = options.limit ?? 100;
  const found: DeadLetterView[] = [];
  for (const [group, urls] of Object.entries(stack.names.groups)) {
    if (options.group !== undefined && group !== options.group) continue;
    const queues: [DeadLetterView["queue"], string | undefined][] = [
      ["queue", urls.deadLetterQueue],
      ["buffer", urls.bufferDeadLetterQueue],
    ];
    for (const [queue, url] of queues) {
      if (!url || found.length >= limit) continue;
      const messages = await peek(stack.sqs, url, limit - found.length);
      found.push(...messages.map((m) => deadLetterOf(group, queue, m)));
    }
  }
  return found.sort((a, b) => (a.sentAt ?? "").localeCompare(b.sentAt ?? ""));
}

async function peek(sqs: SQSClient, url: string, limit: number): Promise<Message[]> {
  const seen = new Map<string, Message>();
  try {
    while (seen.size < limit) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: Math.min(10, limit - seen.size),
          VisibilityTimeout: PEEK_VISIBILITY_SECONDS,
          WaitTimeSeconds: 0,
          MessageSystemAttributeNames: ["All"],
          MessageAttributeNames: ["All"],
        }),
      );
      const fresh = Messages.filter((m) => m.MessageId && !seen.has(m.MessageId));
      if (fresh.length === 0) break;
      for (const m of fresh) seen.set(m.MessageId as string, m);
    }
  } finally {
    await release(sqs, url, [...seen.values()]);
  }
  return [...seen.values()];
}

/** Make peeked messages visible again (in batches of 10). */
async function release(sqs: SQSClient, url: string, messages: readonly Message[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 10) {
    await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: messages.slice(i, i + 10).map((m, j) => ({
          Id: String(j),
          ReceiptHandle: m.ReceiptHandle,
          VisibilityTimeout: 0,
        })),
      }),
    );
  }
}

function deadLetterOf(group: string, queue: DeadLetterView["queue"], m: Message): DeadLetterView {
  const attribute = (name: string) => m.MessageAttributes?.[name]?.StringValue;
  const envelope = envelopeFields(m.Body ?? "");
  const received = attribute(DEAD_LETTER_ATTRIBUTES.receiveCount);
  const sent = Number(m.Attributes?.SentTimestamp);
  return {
    group,
    queue,
    messageId: m.MessageId ?? "",
    ...envelope,
    orderKey: m.Attributes?.MessageGroupId ?? envelope.orderKey,
    code: attribute(DEAD_LETTER_ATTRIBUTES.code) ?? "sqs.max_receive_count",
    reason:
      attribute(DEAD_LETTER_ATTRIBUTES.reason) ??
      "moved by SQS after the queue's maxReceiveCount receives (no error recorded)",
    ...(received !== undefined ? { receiveCount: Number(received) } : {}),
    ...(Number.isFinite(sent) ? { sentAt: new Date(sent).toISOString() } : {}),
  };
}

/** The ids a dead letter's body carries (the envelope, or the EventBridge event around it). */
function envelopeFields(body: string): Partial<DeadLetterView> {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return {};
  }
  if (raw && typeof raw === "object" && "detail" in raw && "detail-type" in raw)
    raw = (raw as { detail: unknown }).detail;
  if (!raw || typeof raw !== "object") return {};
  const e = raw as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === "string" ? value.slice(0, 256) : undefined);
  const fields = {
    eventId: text(e.event_id),
    eventType: text(e.event_type),
    orderKey: text(e.order_key),
    correlationId: text(e.correlation_id),
    taskId: text(e.task_id),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}
