import type { RoleDescriptor } from "../core/role";
import { conversation } from "./customer-support/conversation/conversation";
import { conversationProjection } from "./customer-support/conversation-projection/conversation-projection";
import { REPLY_GENERATION } from "./customer-support/reply-generation/reply-generation";
import { SENDER } from "./customer-support/sender/sender";
import { REFUND_REVIEW } from "./refund-review/refund-agent";

/**
 * The roles whose states keep a customer's words (Role.personalState): what erasing a customer
 * overwrites. Listed here so that what erases (the front door, the operator's tools) imports these
 * five and not every role; test/personal-data/personal-state.test.ts checks it against every
 * module's descriptor.
 */
export const PERSONAL_STATE_ROLES: readonly RoleDescriptor[] = [
  conversation,
  conversationProjection,
  REPLY_GENERATION,
  SENDER,
  REFUND_REVIEW,
];

/**
 * The state types (and the stored texts, `content`) erasure writes: their keys' prefixes are what
 * a policy lets an eraser write (lib/infra).
 */
export function erasedStateTypes(roles = PERSONAL_STATE_ROLES): string[] {
  const part = { conversationId: "conv_x", taskId: "task_x" };
  const types = roles.flatMap((role) => {
    const personal = role.personalState;
    if (!personal) return [];
    return [
      personal.stateOf({ conversationId: part.conversationId }),
      personal.stateOf(part),
    ].flatMap((ref) => (ref ? [ref.type] : []));
  });
  return [...new Set(types)].sort();
}
