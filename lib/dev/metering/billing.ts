/**
 * What one SDK call is billed as, beyond DynamoDB's capacity units (./metering.ts):
 * - SQS: every request of the data plane (SendMessage, SendMessageBatch, ReceiveMessage,
 *   DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility, ChangeMessageVisibilityBatch) is
 *   billed per 64 KB chunk of its payload (a batch's payloads summed), at least one; an empty
 *   receive is a billed request too. Other SQS calls (GetQueueAttributes, ...) count one each.
 * - EventBridge PutEvents: one event per 64 KB chunk of each entry (its Detail, DetailType,
 *   Source, Resources and 14 bytes of Time, as EventBridge sizes an entry); other calls one each.
 * - anything else (DynamoDB, KMS): one per call.
 * For SQS the queue is named, with the messages a send put on it and the messages a receive got
 * for the first time (ApproximateReceiveCount 1): what reached a queue without being sent
 * through a metered client (an EventBridge rule's target) shows as first receives beyond sends.
 */
export interface BilledCall {
  /** Billed requests (or events, for PutEvents). */
  readonly requests: number;
  readonly queueUrl?: string;
  readonly sent: number;
  readonly firstReceived: number;
  readonly emptyReceive: boolean;
}

/** 64 KB: the chunk SQS and EventBridge bill as one request or event. */
export const BILLING_CHUNK_BYTES = 64 * 1024;

export const chunksOf = (bytes: number) => Math.max(1, Math.ceil(bytes / BILLING_CHUNK_BYTES));

const utf8 = (text: unknown) => (typeof text === "string" ? Buffer.byteLength(text, "utf8") : 0);

type Input = Record<string, unknown>;
type SqsMessage = { Body?: unknown; MessageAttributes?: unknown; Attributes?: unknown };

/** The bytes of an SQS message: its body and its message attributes (names, types, values). */
function messageBytes(message: SqsMessage): number {
  let bytes = utf8(message.Body) + utf8((message as Input).MessageBody);
  const attributes = (message.MessageAttributes ?? {}) as Record<string, Input>;
  for (const [name, value] of Object.entries(attributes))
    bytes += utf8(name) + utf8(value.DataType) + utf8(value.StringValue);
  return bytes;
}

const SQS_SENDS = new Set(["SendMessage", "SendMessageBatch"]);

export function billedCall(operation: string, input: unknown, output: unknown): BilledCall {
  const request = (input ?? {}) as Input;
  const response = (output ?? {}) as Input;
  const base = { sent: 0, firstReceived: 0, emptyReceive: false };
  if (operation === "PutEvents") {
    const entries = (request.Entries ?? []) as Input[];
    return { ...base, requests: entries.reduce((n, e) => n + chunksOf(entryBytes(e)), 0) };
  }
  const queueUrl = typeof request.QueueUrl === "string" ? request.QueueUrl : undefined;
  if (!queueUrl) return { ...base, requests: 1 };
  if (SQS_SENDS.has(operation)) {
    const messages = operation === "SendMessage" ? [request] : ((request.Entries ?? []) as Input[]);
    const failed = ((response.Failed ?? []) as unknown[]).length;
    const bytes = messages.reduce((n, m) => n + messageBytes(m), 0);
    return { ...base, queueUrl, requests: chunksOf(bytes), sent: messages.length - failed };
  }
  if (operation === "ReceiveMessage") {
    const messages = (response.Messages ?? []) as SqsMessage[];
    const bytes = messages.reduce((n, m) => n + messageBytes(m), 0);
    const first = messages.filter(
      (m) => Number((m.Attributes as Input | undefined)?.ApproximateReceiveCount ?? 1) === 1,
    ).length;
    return {
      ...base,
      queueUrl,
      requests: chunksOf(bytes),
      firstReceived: first,
      emptyReceive: messages.length === 0,
    };
  }
  return { ...base, queueUrl, requests: 1 };
}

/** An EventBridge entry's size as EventBridge bills it (Time counts 14 bytes). */
function entryBytes(entry: Input): number {
  const resources = (entry.Resources ?? []) as unknown[];
  return (
    14 +
    utf8(entry.Source) +
    utf8(entry.DetailType) +
    utf8(entry.Detail) +
    resources.reduce<number>((n, r) => n + utf8(r), 0)
  );
}
