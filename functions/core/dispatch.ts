import type { EventRegistry } from "../../schemas";
import { chunk } from "./batching";
import type { DeadLetterSink, FifoMessage, FifoSender } from "./ports";
import { type ReplayMark, replayDeduplicationId, replayedBody } from "./replay";

export const SEND_BATCH_MAX_ENTRIES = 10;
export const SEND_BATCH_MAX_BYTES = 256 * 1024;

export interface DispatchItem {
  /** The buffer-queue record this came from (reported back on failure). */
  readonly recordId: string;
  /** The envelope candidate (the EventBridge event's `detail`). */
  readonly envelope: unknown;
  /** The original message body, kept for the dead-letter queue. */
  readonly rawBody: string;
  /** Set when the EventBridge event came from an archive replay (it carried `replay-name`). */
  readonly replay?: ReplayMark;
  /** The EventBridge event's `source`. */
  readonly source?: string;
}

export interface DispatchReport {
  readonly sent: number;
  readonly deadLettered: number;
  readonly calls: number;
  /** Buffer records to hand back to the queue (their send failed transiently). */
  readonly failedRecordIds: string[];
}

/**
 * Move envelopes from a consumer group's buffer queue into its FIFO queue, keyed for order:
 * MessageGroupId = the envelope's order key, MessageDeduplicationId = its event id (so a second
 * dispatch of the same event within five minutes is dropped by SQS itself). An invalid envelope is
 * dead-lettered at once with its reason: retrying it could never succeed. A replayed event keeps
 * its mark (./replay.ts): it is sent inside an EventBridge event that names the replay, under a
 * deduplication id of the replay's own, so the consumer can tell it from a live delivery.
 */
export async function dispatch(
  items: readonly DispatchItem[],
  registry: EventRegistry,
  sender: FifoSender,
  deadLetters: DeadLetterSink,
): Promise<DispatchReport> {
  const messages: (FifoMessage & { recordId: string })[] = [];
  let deadLettered = 0;
  // An invalid envelope whose dead-letter send failed goes back to the buffer with its backoff.
  const notDeadLettered: string[] = [];
  for (const [index, item] of items.entries()) {
    const parsed = registry.parse(item.envelope);
    if (!parsed.ok) {
      try {
        await deadLetters.send({ body: item.rawBody, code: parsed.code, reason: parsed.message });
        deadLettered++;
      } catch {
        notDeadLettered.push(item.recordId);
      }
      continue;
    }
    const { envelope } = parsed;
    messages.push({
      id: String(index),
      recordId: item.recordId,
      groupId: envelope.order_key,
      ...(item.replay
        ? {
            deduplicationId: replayDeduplicationId(envelope.event_id, item.replay.name),
            body: replayedBody(envelope, item.replay, item.source),
          }
        : { deduplicationId: envelope.event_id, body: JSON.stringify(envelope) }),
    });
  }
  const failedRecordIds: string[] = [];
  let calls = 0;
  for (const batch of chunk(
    messages,
    (m) => Buffer.byteLength(m.body) + 200,
    SEND_BATCH_MAX_ENTRIES,
    SEND_BATCH_MAX_BYTES,
  )) {
    calls++;
    let failed: Set<string>;
    try {
      failed = new Set(
        (await sender.send(batch.map(({ recordId: _, ...m }) => m))).map((f) => f.id),
      );
    } catch {
      failed = new Set(batch.map((m) => m.id));
    }
    for (const m of batch) if (failed.has(m.id)) failedRecordIds.push(m.recordId);
  }
  return {
    sent: messages.length - failedRecordIds.length,
    deadLettered,
    calls,
    failedRecordIds: [...failedRecordIds, ...notDeadLettered],
  };
}
