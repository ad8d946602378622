import type { Envelope } from "../../kit";

/** The envelope fields every event of the support chain keeps from the event that caused it. */
export function factFields(event: Envelope, conversationId: string) {
  return {
    inputVersion: event.input_version,
    conversationId,
    orderKey: conversationId,
  } as const;
}
