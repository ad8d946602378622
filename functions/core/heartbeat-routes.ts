import type { Envelope } from "../../schemas";
import { type DirectGroup, directMessageOf, takes } from "./direct-delivery";
import type { FifoMessage } from "./ports";

/**
 * Where a consumer's heartbeats go (functions/handlers/heartbeat.ts). An acknowledgement or a
 * heartbeat is a message no stream holds, so the relay never carries it; on the bus it would take
 * the long way to each group that takes it (rule, buffer queue, dispatch function, FIFO queue).
 * Instead the consumer sends it straight to the queue of each group the stack names for it
 * (`HEARTBEAT_TARGETS`), whose rule on the events topic takes it:
 * - a `delivery: "relay"` group (the orchestrator): to its FIFO queue, the message built as its
 *   dispatch function builds it (./direct-delivery.ts `directMessageOf`: same message group or
 *   tenant lane, the event id as deduplication id), so order and deduplication hold as on the bus;
 * - an unordered group: to its standard queue, the envelope as the body, as its rule hands it the
 *   event. (The audit group takes no heartbeat: the run a heartbeat reports on keeps it.)
 * Groups fed by the bus otherwise (a dispatch function, a pipe, a new bus's subscriber) still get
 * it there: the stack sets `EVENTS_BUS_NAME` for a consumer only when one of those takes a
 * heartbeat type.
 */

/** The beating consumer's environment variable naming its targets (JSON, packed). */
export const HEARTBEAT_TARGETS_ENV = "HEARTBEAT_TARGETS";

/**
 * A group a heartbeat goes straight to: its queue, its lanes, and its rule's pattern on the events
 * topic, as the relay's `DIRECT_GROUPS` names a group; `unordered` for a standard queue.
 */
export interface HeartbeatTarget extends DirectGroup {
  readonly unordered?: true;
}

/** One heartbeat as one target's queue receives it (no group or dedup id on a standard queue). */
export interface HeartbeatSend {
  readonly target: HeartbeatTarget;
  readonly message: Omit<FifoMessage, "id" | "groupId" | "deduplicationId"> &
    Partial<Pick<FifoMessage, "groupId" | "deduplicationId">>;
}

/** The sends of a heartbeat (on the events topic): one per target whose rule takes it. */
export function heartbeatSendsOf(
  targets: readonly HeartbeatTarget[],
  envelope: Envelope,
): HeartbeatSend[] {
  const placed = { topic: "events" as const, envelope };
  return targets.flatMap((target): HeartbeatSend[] => {
    if (target.unordered)
      return takes(target, placed) ? [{ target, message: { body: JSON.stringify(envelope) } }] : [];
    const message = directMessageOf(target, placed);
    return message ? [{ target, message }] : [];
  });
}
