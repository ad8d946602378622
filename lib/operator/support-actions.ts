// The commands built here are the customer-support application's: importing its types defines them.
import "../../functions/roles/customer-support/events/index";
import type { SideEffectRecord } from "../../functions/core/side-effects";
import type { SendResolution } from "../../functions/roles/customer-support/events/conversation";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import { opaqueIdProblem } from "../../schemas";
import { recordApproval } from "./audit";
import {
  conversationTenantId,
  conversationVersion,
  loadDelivery,
  loadReply,
  loadSideEffect,
} from "./customer-support";
import {
  inTenant,
  type OperatorCommand,
  operatorEnvelope,
  putCommand,
  tenantProblem,
} from "./operator-command";
import type { OpsStack } from "./stack";

/**
 * The decisions a person takes on what the support conversation parks (seed 000 §14): approve or
 * reject a held reply, resolve an unknown send outcome. Each is checked against the stored state
 * before anything is sent: a decision already taken is reported (`already`), one that cannot apply
 * is refused (`refused`), otherwise the command is completed with the conversation it belongs to.
 * The messages name what is wrong; the callers add "; nothing sent". Shared by the CLI and the
 * console.
 */

/** A support command names its task and conversation (the conversation is its order key). */
export type SupportCommand = OperatorCommand & {
  readonly taskId: string;
  readonly conversationId: string;
};

export type Decided =
  | { readonly already: string }
  | { readonly refused: string }
  | { readonly command: SupportCommand };

export type ReviewDecision = "approved" | "rejected";

/** The conversation of a command is read from the stored state; this stands in until then. */
const UNKNOWN_CONVERSATION = "conv_unknown";

/** Why `value` is not a task id `task_<token>` (undefined: it is one). */
export function taskIdProblem(value: string): string | undefined {
  const problem = opaqueIdProblem(value);
  if (problem || !value.startsWith("task_"))
    return `${JSON.stringify(value)}: must be a task id task_<token> (${problem ?? "prefix must be task"})`;
  return undefined;
}

const REPLY_KEY = /^(task_[A-Za-z0-9-]{1,64}):reply:[1-9][0-9]{0,5}$/;

/** The task of a reply's send key `<task_id>:reply:<n>`, or a message saying it is not one. */
export function replyKeyTask(
  key: string,
): { readonly taskId: string } | { readonly problem: string } {
  const taskId = REPLY_KEY.exec(key)?.[1];
  return taskId
    ? { taskId }
    : { problem: `${JSON.stringify(key)} is not a reply key <task_id>:reply:<n>` };
}

function operatorFields(requestedBy: string, reason: string | undefined) {
  return { requested_by: requestedBy, ...(reason === undefined ? {} : { reason }) };
}

/** `reply.approve.requested` (with the edited text, if any) or `reply.reject.requested`. */
export function reviewCommand(
  taskId: string,
  decision: ReviewDecision,
  fields: { readonly text?: string; readonly reason?: string },
  requestedBy: string,
): SupportCommand {
  const approve = decision === "approved";
  const text = approve && fields.text !== undefined ? { text: fields.text } : {};
  return {
    type: approve ? "reply.approve.requested" : "reply.reject.requested",
    aggregate: { type: "reply", id: taskId },
    taskId,
    conversationId: UNKNOWN_CONVERSATION,
    payload: {
      conversation_id: UNKNOWN_CONVERSATION,
      ...text,
      ...operatorFields(requestedBy, fields.reason),
    },
  };
}

/** `notification.resolve.requested` for the send key `key` of task `taskId`. */
export function sendResolveCommand(
  key: string,
  taskId: string,
  resolution: SendResolution,
  reason: string | undefined,
  requestedBy: string,
): SupportCommand {
  return {
    type: "notification.resolve.requested",
    aggregate: { type: "delivery", id: taskId },
    taskId,
    conversationId: UNKNOWN_CONVERSATION,
    payload: {
      conversation_id: UNKNOWN_CONVERSATION,
      idempotency_key: key,
      resolution,
      ...operatorFields(requestedBy, reason),
    },
  };
}

export function inConversation(command: SupportCommand, conversationId: string): Decided {
  return {
    command: {
      ...command,
      conversationId,
      payload: { ...command.payload, conversation_id: conversationId },
    },
  };
}

/** What a review decision needs: the reply, and for an approval the conversation's version. */
export interface ReviewFacts {
  readonly reply?: ReplyState;
  readonly conversationVersion?: number;
}

/** Whether a held reply can be approved or rejected as `command` asks. */
export function reviewDecision(
  command: SupportCommand,
  decision: ReviewDecision,
  facts: ReviewFacts,
): Decided {
  const { reply } = facts;
  const id = command.taskId;
  if (!reply) return { refused: `no reply of task ${id}` };
  if (reply.status === decision) return { already: `the reply of ${id} was already ${decision}` };
  if (reply.status !== "held_for_review")
    return { refused: `the reply of ${id} is not held for review (it is ${reply.status})` };
  if (decision === "approved") {
    if (reply.customer_id === undefined || reply.channel === undefined)
      return {
        refused: `the reply of ${id} was held before replies kept their recipient; it cannot be sent from here (reject it)`,
      };
    const current = facts.conversationVersion ?? 0;
    if ((reply.input_version ?? current) < current)
      return {
        refused: `a newer customer message superseded the reply of ${id} (it answers version ${reply.input_version}, the conversation is at ${current}): reject it`,
      };
  }
  return inConversation(command, reply.conversation_id);
}

/** What resolving a send needs: its record, the sender's fact about the key, the reply's conversation. */
export interface SendFacts {
  readonly record?: SideEffectRecord;
  readonly delivery?: DeliveryState;
  readonly replyConversationId?: string;
}

/** Whether an unknown send outcome can be resolved as `resolution`. */
export function sendResolveDecision(
  command: SupportCommand,
  resolution: SendResolution,
  facts: SendFacts,
): Decided {
  const key = String(command.payload.idempotency_key);
  const { record } = facts;
  if (!record) return { refused: `no side-effect record ${key}` };
  const fact = facts.delivery?.keys[key];
  if (record.state !== "unknown") {
    if (fact?.resolution === resolution)
      return { already: `${key} was already resolved as ${resolution} (it is ${record.state})` };
    return { refused: `the outcome of ${key} is not unknown (it is ${record.state})` };
  }
  if (resolution === "resend" && fact?.send === undefined)
    return {
      refused: `the sender did not keep what ${key} was to send (escalated before it kept it): resolve it as delivered or abandon`,
    };
  const conversationId = fact?.send?.conversation_id ?? facts.replyConversationId;
  if (!conversationId) return { refused: `cannot tell the conversation of ${key}` };
  return inConversation(command, conversationId);
}

/**
 * A decided command in the tenant its conversation's state records (one read), so that what it
 * causes stays in that tenant; refused when the operator named another (`tenant`, `--tenant`);
 * `already` and `refused` as they are.
 */
export async function inConversationTenant(
  stack: OpsStack,
  decided: Decided,
  tenant?: string,
): Promise<Decided> {
  if (!("command" in decided)) return decided;
  const { conversationId } = decided.command;
  const tenantId = await conversationTenantId(stack, conversationId);
  const foreign = tenantProblem(tenant, tenantId, `conversation ${conversationId}`);
  if (foreign) return { refused: foreign };
  return { command: inTenant(decided.command, tenantId) };
}

/** Read what `reviewDecision` needs from the stack and decide (see inConversationTenant). */
export async function reviewCheck(
  stack: OpsStack,
  command: SupportCommand,
  decision: ReviewDecision,
  tenant?: string,
): Promise<Decided> {
  const reply = await loadReply(stack, command.taskId);
  const version =
    reply && decision === "approved" && reply.status === "held_for_review"
      ? await conversationVersion(stack, reply.conversation_id)
      : undefined;
  const decided = reviewDecision(command, decision, { reply, conversationVersion: version });
  return inConversationTenant(stack, decided, tenant);
}

/** Read what `sendResolveDecision` needs from the stack and decide (see inConversationTenant). */
export async function sendResolveCheck(
  stack: OpsStack,
  command: SupportCommand,
  resolution: SendResolution,
  tenant?: string,
): Promise<Decided> {
  const key = String(command.payload.idempotency_key);
  const record = await loadSideEffect(stack, key);
  if (!record) return sendResolveDecision(command, resolution, {});
  const delivery = await loadDelivery(stack, command.taskId);
  const known = delivery?.keys[key]?.send?.conversation_id;
  const reply = known === undefined ? await loadReply(stack, command.taskId) : undefined;
  const decided = sendResolveDecision(command, resolution, {
    record,
    delivery,
    replyConversationId: reply?.conversation_id,
  });
  return inConversationTenant(stack, decided, tenant);
}

export type SupportOutcome =
  | { readonly already: string }
  | { readonly refused: string }
  | {
      readonly sent: {
        readonly command: SupportCommand;
        readonly envelope: Record<string, unknown>;
        readonly bus: string;
      };
    };

/** Put the decided command on the stack's commands bus; an `already` or `refused` sends nothing. */
export async function sendDecided(
  stack: OpsStack,
  decided: Decided,
  via: "cli" | "console" = "cli",
): Promise<SupportOutcome> {
  if (!("command" in decided)) return decided;
  const envelope = operatorEnvelope(decided.command);
  if (typeof envelope === "string") return { refused: envelope };
  const bus = await putCommand(stack, stack.config, envelope);
  // An approval answered is an operator's action: the audit topic gets who answered what.
  await recordApproval(stack, envelope, via);
  return { sent: { command: decided.command, envelope, bus } };
}
