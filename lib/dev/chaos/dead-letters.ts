import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
} from "@aws-sdk/client-sqs";
import { DEAD_LETTER_ATTRIBUTES } from "../../../functions/adapters/sqs/dead-letter-sink";
import { envelopeOf } from "../../operator/queue-peek";
import type { LocalEnvironment } from "../local/environment";

/** A message taken out of a dead-letter queue. */
export interface DrainedLetter {
  readonly group: string;
  readonly queue: "queue" | "buffer";
  readonly eventId?: string;
  readonly eventType?: string;
  /** The consumer's recorded reason code, when it dead-lettered the message itself. */
  readonly code?: string;
}

/**
 * Empties every dead-letter queue of the stack and says what was in it, so each schedule on one
 * deployment sees only its own dead letters. Reads with ReceiveMessage/DeleteMessageBatch (the
 * operator's `dead-letters` only peeks).
 */
export async function drainDeadLetters(env: LocalEnvironment): Promise<DrainedLetter[]> {
  const drained: DrainedLetter[] = [];
  for (const [group, urls] of Object.entries(env.names.groups)) {
    const queues: [DrainedLetter["queue"], string | undefined][] = [
      ["queue", urls.deadLetterQueue],
      ["buffer", urls.bufferDeadLetterQueue],
    ];
    for (const [queue, url] of queues)
      if (url) drained.push(...(await drain(env, url, group, queue)));
  }
  return drained;
}

async function drain(
  env: LocalEnvironment,
  url: string,
  group: string,
  queue: DrainedLetter["queue"],
): Promise<DrainedLetter[]> {
  const out: DrainedLetter[] = [];
  for (;;) {
    const { Messages = [] } = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ["All"],
      }),
    );
    if (Messages.length === 0) return out;
    for (const m of Messages) {
      const envelope = envelopeOf(m);
      out.push({
        group,
        queue,
        ...(typeof envelope?.event_id === "string" ? { eventId: envelope.event_id } : {}),
        ...(typeof envelope?.event_type === "string" ? { eventType: envelope.event_type } : {}),
        ...codeOf(m),
      });
    }
    await env.clients.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? "" })),
      }),
    );
  }
}

function codeOf(m: Message): { code?: string } {
  const code = m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue;
  return code ? { code } : {};
}
