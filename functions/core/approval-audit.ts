import { registry } from "../../schemas";
import type { ApprovalAnsweredPayload } from "../../schemas/events/operator";
import type * as z from "../../schemas/zod";

/**
 * The approval a command answers, as the audit topic's `operator.approval.answered` records it,
 * one home for every way a person answers: an operator's `agentbus approve` and the console
 * (lib/operator/audit.ts), a caller's answer to an A2A task (functions/front-door/a2a). Who
 * answered, how and with what principal, each adds.
 */

export type ApprovalAnswered = Omit<
  z.input<typeof ApprovalAnsweredPayload>,
  "requested_by" | "via" | "principal"
>;

/**
 * The approval an operator command answers, if it answers one: an agent's tool call
 * (`<agent>.decision.requested`, approve or reject), a held reply (`reply.approve.requested`,
 * `reply.reject.requested`) or a BLOCKED workflow node (`workflow.confirm.requested`).
 */
export function approvalAnswered(envelope: Record<string, unknown>): ApprovalAnswered | undefined {
  const type = String(envelope.event_type);
  const payload = (envelope.payload ?? {}) as Record<string, unknown>;
  const aggregate = (envelope.aggregate ?? {}) as { id?: unknown };
  const commandId = String(envelope.event_id);
  // A node's confirmation says why in its note.
  const whyField = type === "workflow.confirm.requested" ? "note" : "reason";
  const why = copiable(type, envelope.schema_version, whyField) ? payload[whyField] : undefined;
  const answer = (target: unknown, decision: "approve" | "reject", step?: unknown) => ({
    target: String(target),
    ...(typeof step === "string" ? { step } : {}),
    decision,
    ...(typeof why === "string" ? { reason: why } : {}),
    command_id: commandId,
  });
  if (
    type.endsWith(".decision.requested") &&
    ["approve", "reject"].includes(String(payload.decision))
  )
    return answer(payload.run_id, payload.decision as "approve" | "reject", payload.tool_call_id);
  if (type === "reply.approve.requested" || type === "reply.reject.requested")
    return answer(aggregate.id, type === "reply.approve.requested" ? "approve" : "reject");
  if (type === "workflow.confirm.requested")
    return answer(
      payload.run_id,
      payload.answer === "confirmed" ? "approve" : "reject",
      payload.node_id,
    );
  return undefined;
}

/**
 * Whether the audit record may copy this field of the command: not when the command's definition
 * declares it personal (the command keeps it sealed under the customer's key where it is stored,
 * which the record's `command_id` names; the record, kept by the audit group, could not be erased),
 * nor when the definition is unknown here.
 */
function copiable(type: string, schemaVersion: unknown, field: string): boolean {
  const definition = registry.get(type, Number(schemaVersion));
  return definition !== undefined && !(definition.personal ?? []).includes(field);
}
