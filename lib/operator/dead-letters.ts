import type { Message, SQSClient } from "@aws-sdk/client-sqs";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import { DEFAULT_TENANT } from "../../schemas/ids";
import { envelopeOf, receiveHeld, release } from "./queue-peek";
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
  options: { readonly group?: string; readonly limit?: number; readonly tenant?: string } = {},
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
      const letters = messages.map((m) => deadLetterOf(group, queue, m));
      found.push(...letters.filter((l) => inTenant(l, options.tenant)));
    }
  }
  return found.sort((a, b) => (a.sentAt ?? "").localeCompare(b.sentAt ?? ""));
}

/**
 * Whether a dead letter is of `tenant` (every one without): the tenant its envelope names, the
 * default tenant when it names none. A body that is no envelope tells no tenant: it is listed for
 * none but without a tenant.
 */
function inTenant(letter: DeadLetterView, tenant: string | undefined): boolean {
  if (tenant === undefined) return true;
  if (letter.eventId === undefined) return false;
  return (letter.tenantId ?? DEFAULT_TENANT) === tenant;
}

async function peek(sqs: SQSClient, url: string, limit: number): Promise<Message[]> {
  const held = await receiveHeld(sqs, url, PEEK_VISIBILITY_SECONDS, limit);
  await release(sqs, url, held);
  return held;
}

function deadLetterOf(group: string, queue: DeadLetterView["queue"], m: Message): DeadLetterView {
  const attribute = (name: string) => m.MessageAttributes?.[name]?.StringValue;
  const envelope = envelopeFields(m);
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
function envelopeFields(m: Message): Partial<DeadLetterView> {
  const e = envelopeOf(m);
  if (!e) return {};
  const text = (value: unknown) => (typeof value === "string" ? value.slice(0, 256) : undefined);
  const fields = {
    eventId: text(e.event_id),
    eventType: text(e.event_type),
    orderKey: text(e.order_key),
    correlationId: text(e.correlation_id),
    taskId: text(e.task_id),
    tenantId: text(e.tenant_id),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}
