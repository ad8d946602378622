import { createHash } from "node:crypto";
import { type Envelope, EnvelopeBase, type EventRegistry } from "../../schemas";
import { tenantOf } from "../../schemas/ids";
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
 * The FIFO message group an envelope travels in. Without `tenantConcurrency`, its order key: one
 * group per conversation, task or run. With it, one of the tenant's `tenantConcurrency` lanes,
 * `tenant/<tenant>/<lane>`, the lane a hash of the order key: an order key always falls in the
 * same lane, so its events stay in order and one at a time, and since SQS hands out none of a
 * group's messages while some are in flight, the tenant's events hold at most that many of the
 * group's consumer invocations at once, whatever its backlog.
 */
export function messageGroupOf(
  envelope: Pick<Envelope, "order_key" | "tenant_id">,
  tenantConcurrency?: number,
): string {
  if (tenantConcurrency === undefined) return envelope.order_key;
  const lane =
    createHash("sha256").update(envelope.order_key).digest().readUInt32BE(0) % tenantConcurrency;
  return `tenant/${tenantOf(envelope)}/${lane}`;
}

/**
 * A live envelope as a group's FIFO queue receives it, from the dispatch function or straight from
 * the relay (./direct-delivery.ts): in its message group (`messageGroupOf`), de-duplicated by its
 * event id, the envelope itself as the body.
 */
export function fifoMessageOf(
  envelope: Envelope,
  tenantConcurrency?: number,
): Pick<FifoMessage, "groupId" | "deduplicationId" | "body"> {
  return {
    groupId: messageGroupOf(envelope, tenantConcurrency),
    deduplicationId: envelope.event_id,
    body: JSON.stringify(envelope),
  };
}

/**
 * Move envelopes from a consumer group's buffer queue into its FIFO queue, keyed for order:
 * MessageGroupId = `messageGroupOf` the envelope, MessageDeduplicationId = its event id (so a second
 * dispatch of the same event within five minutes is dropped by SQS itself). An invalid envelope is
 * dead-lettered at once with its reason: retrying it could never succeed. An envelope of a type
 * the registry does not know (an application's, defined in its own modules) is checked for the
 * envelope's own shape only (`carried`): the consumer, which knows the type, validates its
 * payload. A replayed event keeps
 * its mark (./replay.ts): it is sent inside an EventBridge event that names the replay, under a
 * deduplication id of the replay's own, so the consumer can tell it from a live delivery.
 */
export async function dispatch(
  items: readonly DispatchItem[],
  registry: EventRegistry,
  sender: FifoSender,
  deadLetters: DeadLetterSink,
  tenantConcurrency?: number,
): Promise<DispatchReport> {
  const messages: (FifoMessage & { recordId: string })[] = [];
  let deadLettered = 0;
  // An invalid envelope whose dead-letter send failed goes back to the buffer with its backoff.
  const notDeadLettered: string[] = [];
  for (const [index, item] of items.entries()) {
    const parsed = carried(item.envelope, registry);
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
      ...(item.replay
        ? {
            groupId: messageGroupOf(envelope, tenantConcurrency),
            deduplicationId: replayDeduplicationId(envelope.event_id, item.replay.name),
            body: replayedBody(envelope, item.replay, item.source),
          }
        : fifoMessageOf(envelope, tenantConcurrency)),
    });
  }
  const { failedRecordIds, calls } = await sendInBatches(messages, sender);
  return {
    sent: messages.length - failedRecordIds.length,
    deadLettered,
    calls,
    failedRecordIds: [...failedRecordIds, ...notDeadLettered],
  };
}

/**
 * The envelope to dispatch, validated by `registry`; one of a type the registry does not know,
 * by the envelope's own schema (ids, aggregate, order key, size), its payload unchecked. The
 * dispatch only keys a message for order, which needs no more than that.
 */
function carried(
  raw: unknown,
  registry: EventRegistry,
): { ok: true; envelope: Envelope } | { ok: false; code: string; message: string } {
  const parsed = registry.parse(raw);
  if (parsed.ok || parsed.code !== "envelope.unknown_type") return parsed;
  // `envelope.unknown_type` comes after the size and envelope checks: this parse succeeds.
  const base = EnvelopeBase.safeParse(raw);
  if (!base.success) return parsed;
  const { order_key, ...rest } = base.data;
  return { ok: true, envelope: { ...rest, order_key: order_key ?? rest.aggregate.id } };
}

/** Send in SendMessageBatch calls of at most 10 entries and 256 KB: the records that failed. */
async function sendInBatches(
  messages: readonly (FifoMessage & { recordId: string })[],
  sender: FifoSender,
): Promise<{ failedRecordIds: string[]; calls: number }> {
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
  return { failedRecordIds, calls };
}
