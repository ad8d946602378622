import {
  ChangeMessageVisibilityBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { decodeRecord } from "../../functions/handlers/consumer-record";

/**
 * Every message a queue hands out now (at most `limit`), hidden for `visibilitySeconds` while the
 * caller looks at them, with their system and message attributes. A FIFO queue hands out a
 * message group's next messages only once the earlier ones are back or gone.
 */
export async function receiveHeld(
  sqs: SQSClient,
  url: string,
  visibilitySeconds: number,
  limit: number,
): Promise<Message[]> {
  const seen = new Map<string, Message>();
  while (seen.size < limit) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: Math.min(10, limit - seen.size),
        VisibilityTimeout: visibilitySeconds,
        WaitTimeSeconds: 0,
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
      }),
    );
    const fresh = Messages.filter((m) => m.MessageId && !seen.has(m.MessageId));
    if (fresh.length === 0) break;
    for (const m of fresh) seen.set(m.MessageId as string, m);
  }
  return [...seen.values()];
}

/** Make held messages visible again at once (in batches of 10). */
export async function release(
  sqs: SQSClient,
  url: string,
  messages: readonly Message[],
): Promise<void> {
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

/** The envelope a message body carries (bare, or the EventBridge event around it), if any. */
export function envelopeOf(m: Message): Record<string, unknown> | undefined {
  try {
    const raw = decodeRecord({ body: m.Body ?? "" });
    return raw && typeof raw === "object" ? (raw as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
