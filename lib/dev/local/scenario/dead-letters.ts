import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { DEAD_LETTER_ATTRIBUTES } from "../../../../functions/adapters/sqs/dead-letter-sink";
import type { LocalEnvironment } from "../environment";
import type { DeadLetter } from "../trace";

/** Peek at every dead-letter queue of the stack (messages stay where they are). */
export async function readDeadLetters(env: LocalEnvironment): Promise<DeadLetter[]> {
  const out: DeadLetter[] = [];
  for (const url of new Set(env.names.deadLetterQueues)) {
    const response = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        MessageAttributeNames: ["All"],
      }),
    );
    for (const m of response.Messages ?? []) {
      let eventId: string | undefined;
      try {
        const body = JSON.parse(m.Body ?? "") as {
          event_id?: string;
          detail?: { event_id?: string };
        };
        eventId = body.event_id ?? body.detail?.event_id;
      } catch {
        eventId = undefined;
      }
      out.push({
        queue: url.split("/").at(-1) ?? url,
        code: m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue ?? "unknown",
        reason: m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.reason]?.StringValue ?? "",
        eventId,
      });
    }
  }
  return out;
}
