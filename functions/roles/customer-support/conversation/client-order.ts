import type { EventOf } from "../../../kit";

/**
 * A conversation's messages in the order the client sent them (seed 000 §5.2: seq(e_i) <
 * seq(e_j) => apply(e_i) before apply(e_j)). Two messages posted back to back may reach the
 * conversation group the other way round (the buffer queue before the group's FIFO queue keeps
 * no order), so a message that carries `client_seq` is applied only after the one before it:
 * - `client_seq` = the last applied + 1: applied, then every held message that now follows;
 * - at or below the last applied, or one already held: a repeat, discarded (`superseded`);
 * - further ahead: held in the conversation's state (acknowledged, nothing emitted), until the
 *   messages before it arrive or its wait (`holdSeconds`, from when it was held) is over: then
 *   it is applied without them, and `conversation.sequence.skipped` records the sequences it
 *   skipped. A skipped sequence that arrives afterwards is a repeat.
 * The wait cannot be a held delivery (the transient hold of functions/core/required-version.ts):
 * the missing message is behind the held one in the same FIFO message group, so holding the
 * queue would hold the very message it waits for. The state's due time is the oldest held
 * message's end of wait; the sweeper then sends `conversation.hold.expired`, and any message to
 * the conversation settles what is due as well (the wait of the lowest held message decides). At most HELD_LIMIT messages are held: one more
 * skips the oldest gap at once.
 * A message without `client_seq` (an AWS CLI client's) is applied as it arrives.
 */

/** How long a message waits for the ones sent before it, unless told otherwise. */
export const DEFAULT_HOLD_SECONDS = 60;
/** The most messages a conversation holds; one more skips the oldest gap at once. */
export const HELD_LIMIT = 20;

/** A customer's message as the conversation applies it: delivered now, or held until its turn. */
export interface ClientMessage {
  readonly event_id: string;
  readonly correlation_id: string;
  readonly task_id: string;
  readonly text: string;
  readonly customer_id: string;
  readonly channel: string;
  readonly client_seq?: number;
  readonly expires_at?: string;
  /** When the conversation received it. */
  readonly received_at: string;
}

/** What a conversation records of the client's order. */
export interface ClientOrder {
  /** The last client sequence applied (absent: none yet). */
  readonly client_seq?: number;
  /** Messages that came before an earlier sequence, lowest `client_seq` first. */
  readonly held?: readonly ClientMessage[];
}

/** A gap the conversation stopped waiting for: sequences `from`..`to`, before `next`. */
export interface SkippedGap {
  readonly from: number;
  readonly to: number;
  readonly next: ClientMessage;
  readonly waitedSeconds: number;
}

/** What to apply now, in order, and what stays held. */
export interface Settled {
  readonly apply: readonly { readonly message: ClientMessage; readonly skipped?: SkippedGap }[];
  readonly clientSeq: number | undefined;
  readonly held: readonly ClientMessage[];
  /** When the oldest held message's wait is over (null: nothing held). */
  readonly dueAt: string | null;
}

export function clientMessageOf(
  event: EventOf<"conversation.message.received">,
  now: Date,
): ClientMessage {
  const { text, customer_id, channel, client_seq } = event.payload;
  return {
    event_id: event.event_id,
    correlation_id: event.correlation_id,
    task_id: event.task_id,
    text,
    customer_id,
    channel,
    ...(client_seq === undefined ? {} : { client_seq }),
    ...(event.expires_at === undefined ? {} : { expires_at: event.expires_at }),
    received_at: now.toISOString(),
  };
}

/** True when the message's sequence was applied, skipped or is held already. */
export function isRepeat(order: ClientOrder | undefined, message: ClientMessage): boolean {
  const seq = message.client_seq;
  if (seq === undefined) return false;
  return seq <= (order?.client_seq ?? 0) || (order?.held ?? []).some((h) => h.client_seq === seq);
}

/**
 * Take `arrived` (undefined: a nudge, nothing new) into the client's order: what to apply now
 * and what stays held (see top).
 */
export function settle(
  order: ClientOrder | undefined,
  arrived: ClientMessage | undefined,
  now: Date,
  holdSeconds: number,
): Settled {
  let clientSeq = order?.client_seq;
  const held = [...(order?.held ?? [])];
  const apply: Settled["apply"][number][] = [];
  if (arrived?.client_seq === undefined && arrived !== undefined) apply.push({ message: arrived });
  else if (arrived) held.push(arrived);
  held.sort((a, b) => (a.client_seq ?? 0) - (b.client_seq ?? 0));
  for (let next = held[0]; next !== undefined; next = held[0]) {
    const expected = (clientSeq ?? 0) + 1;
    const seq = next.client_seq ?? expected;
    const waited = (now.getTime() - Date.parse(next.received_at)) / 1000;
    if (seq !== expected && waited < holdSeconds && held.length <= HELD_LIMIT) break;
    held.shift();
    const skipped =
      seq === expected ? undefined : { from: expected, to: seq - 1, next, waitedSeconds: waited };
    apply.push({ message: next, ...(skipped ? { skipped } : {}) });
    clientSeq = seq;
  }
  const first = held[0];
  const dueAt = first && new Date(Date.parse(first.received_at) + holdSeconds * 1000);
  return { apply, clientSeq, held, dueAt: dueAt ? dueAt.toISOString() : null };
}
