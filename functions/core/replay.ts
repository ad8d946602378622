import { createHash } from "node:crypto";
import type { Envelope } from "../../schemas";

/**
 * Archive replays as the consumer pipeline sees them. An EventBridge archive replay puts old events
 * on a bus again, each with a `replay-name` field; whatever carries the event to a group's queue
 * keeps that mark (an unordered group's rule and a pipe forward the whole event, the dispatcher
 * wraps a replayed envelope in an event of the same shape), so the consumer knows a replayed
 * message from a live one, and from a dead letter redriven by an operator (which is not a replay;
 * a replayed message that was dead-lettered keeps its mark in its body, and stays one).
 *
 * Why it matters: an unsequenced message (version 0) is de-duplicated by its id alone, which the
 * group's state (or the inbox row it was spilled into) keeps as long as the group's inbox time to
 * live (the dedup horizon, 7 days by default), while the archive keeps events 30 days. Past the
 * horizon the record may be gone, and the group can
 * no longer tell whether it applied the message: a replayed unsequenced message that old is
 * discarded as `expired` rather than risk applying it twice. Sequenced events need none of this:
 * the group's checkpoint of their stream never expires.
 */

/** What a replayed delivery carries besides the envelope. */
export interface ReplayMark {
  /** The EventBridge replay's name (`replay-name`). */
  readonly name: string;
  /** The event's time on the bus (its `time`), ISO 8601, when known. */
  readonly time?: string;
}

/** A message body as the pipeline receives it: the envelope candidate, and the replay if it is one. */
export interface Delivery {
  readonly envelope: unknown;
  readonly replay?: ReplayMark;
}

/**
 * What a queue message's parsed body delivers. A body with `detail-type` and `detail` is an
 * EventBridge event around the envelope (an unordered group's rule, a pipe, a replay through the
 * dispatcher); any other body is the bare envelope. An envelope never has `detail-type`, so the two
 * cannot be mistaken for each other.
 */
export function deliveryOf(body: unknown): Delivery {
  if (!body || typeof body !== "object" || !("detail-type" in body) || !("detail" in body))
    return { envelope: body };
  const event = body as { detail: unknown; "replay-name"?: unknown; time?: unknown };
  const name = event["replay-name"];
  if (typeof name !== "string" || name === "") return { envelope: event.detail };
  const time = typeof event.time === "string" ? { time: event.time } : {};
  return { envelope: event.detail, replay: { name, ...time } };
}

/**
 * The body a dispatcher sends a replayed envelope on in: an EventBridge event around it, with the
 * replay's name and the event's time, as `deliveryOf` reads it.
 */
export function replayedBody(envelope: Envelope, mark: ReplayMark, source?: string): string {
  return JSON.stringify({
    version: "0",
    "detail-type": envelope.event_type,
    ...(source ? { source } : {}),
    ...(mark.time ? { time: mark.time } : {}),
    "replay-name": mark.name,
    detail: envelope,
  });
}

/**
 * The FIFO deduplication id of a replayed envelope: its event id and a digest of the replay's name.
 * A replay within five minutes of the live delivery is not swallowed by the queue's dedup window
 * (the group's inbox and checkpoints de-duplicate it), while a copy of the same replayed event
 * (EventBridge delivers at least once) is. 26 + 1 + 16 characters of [0-9A-Za-z-].
 */
export function replayDeduplicationId(eventId: string, replayName: string): string {
  const digest = createHash("sha256").update(replayName).digest("hex").slice(0, 16);
  return `${eventId}-${digest}`;
}

/**
 * When a replayed unsequenced message is too old for its group to know whether it applied it:
 * its time (the earlier of `occurred_at` and its time on the bus, when both are known) is more
 * than the dedup horizon (the inbox time to live) before now. The inbox row of a message is
 * written when the group handles it, which is never before the message was on the bus, so a row
 * written for it lives at least until `time + horizon`.
 */
export function pastDedupHorizon(
  event: Envelope,
  replay: ReplayMark | undefined,
  now: Date,
  horizonSeconds: number,
): boolean {
  if (!replay || event.aggregate.version > 0) return false;
  const times = [event.occurred_at, replay.time]
    .map((t) => (t === undefined ? Number.NaN : Date.parse(t)))
    .filter((t) => !Number.isNaN(t));
  if (times.length === 0) return true;
  return now.getTime() - Math.min(...times) > horizonSeconds * 1000;
}
