import type { RoleModule } from "../../../functions/core/role-module";
import type { Envelope } from "../../../schemas";

/**
 * A defect planted in the conversation group: it applies a customer's messages as they arrive,
 * their client sequence ignored (`client-seq-ignored`), so two messages sent back to back that
 * the dispatcher swapped are accepted the other way round.
 */
export type PlantedOrderBug = "client-seq-ignored";

/** The modules with the conversation's messages stripped of their client sequence. */
export function withOrderBug(
  bug: string | undefined,
  modules: readonly RoleModule<unknown>[],
): RoleModule<unknown>[] {
  if (bug !== "client-seq-ignored") return [...modules];
  return modules.map((module) =>
    module.descriptor.group !== "conversation"
      ? module
      : {
          ...module,
          build(ports, settings) {
            const role = module.build(ports, settings);
            return {
              ...role,
              decide: (state, event, context) => role.decide(state, unsequenced(event), context),
            };
          },
        },
  );
}

function unsequenced(event: Envelope): Envelope {
  if (event.event_type !== "conversation.message.received") return event;
  const { client_seq: _ignored, ...payload } = event.payload as Record<string, unknown>;
  return { ...event, payload };
}
