import type { Envelope, EventPayloads, EventType } from "../../schemas";
import { PermanentError } from "./errors";

/**
 * The payload of `event`, typed as the registry defines it for the event type asked for; several
 * types handled alike give the union of their payloads. An event of another type throws
 * `payload.unexpected_type` (permanent: the same event would fail the same way on every retry).
 *
 * The payload is not validated again: the pipeline parsed the whole envelope against the schema
 * of its type (upcast to the newest version) before the role saw it. An event read back from a
 * stream was validated when it was emitted, at the version it was written in: upcast it
 * (`registry.upcast`) first when its type has more than one. What this adds is the one check a
 * cast left out, that the event is of the type the code reads it as, for a string comparison.
 */
export function payloadOf<K extends EventType>(
  event: Envelope,
  ...types: readonly [K, ...K[]]
): EventPayloads[K] {
  if (!types.includes(event.event_type as K))
    throw new PermanentError(
      "payload.unexpected_type",
      `expected the payload of ${types.join(" or ")}, got ${event.event_type} (event ${event.event_id})`,
      { details: { expected: [...types], event_type: event.event_type, event_id: event.event_id } },
    );
  // The registry's schema for event.event_type, one of `types`, validated this payload.
  return event.payload as EventPayloads[K];
}
