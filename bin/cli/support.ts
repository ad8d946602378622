import { Command, Option } from "commander";
import { operatorName } from "../../lib/ops/audit";
import { unknownSideEffects } from "../../lib/ops/lists";
import { type OperatorCommand, operatorEnvelope, putCommand } from "../../lib/ops/operator-command";
import type { OpsStack } from "../../lib/ops/stack";
import {
  conversationVersion,
  heldReplies,
  loadDelivery,
  loadReply,
  loadSideEffect,
} from "../../lib/ops/support";
import { opaqueIdProblem } from "../../schemas";
import { SEND_RESOLUTIONS, type SendResolution } from "../../schemas/events/conversation";
import { withStack } from "./ops";
import { clientConfig, out, type Target, UsageError } from "./target";

/**
 * `agentbus reply list | approve | reject` and `agentbus send list | resolve`: what waits for a
 * person in the support conversation (seed 000 §14). Each decision is a command on the stage's
 * commands bus (`reply.approve.requested`, `reply.reject.requested`,
 * `notification.resolve.requested`) carrying who asked (`$AGENTBUS_OPERATOR` or the OS user) and
 * why (`--reason`); the audit group keeps it. Before sending, the stored state is checked: a
 * decision already taken is reported and nothing is sent (exit 0); one that cannot apply (no such
 * reply, not held, a key whose outcome is not unknown) is a usage error (exit 2), nothing sent.
 */

type TargetOf = (command: Command) => Target;

/** A support command names its task and conversation (the conversation is its order key). */
type SupportCommand = OperatorCommand & {
  readonly taskId: string;
  readonly conversationId: string;
};

interface Decided {
  readonly already?: string;
  readonly command?: SupportCommand;
}

function taskIdOf(value: string): string {
  const problem = opaqueIdProblem(value);
  if (problem || !value.startsWith("task_"))
    throw new UsageError(
      `${JSON.stringify(value)}: must be a task id task_<token> (${problem ?? "prefix must be task"})`,
    );
  return value;
}

function operatorFields(reason: string | undefined) {
  return { requested_by: operatorName(), ...(reason === undefined ? {} : { reason }) };
}

/** Check the command offline, then against the stack; send it unless it was already decided. */
async function decideAndSend(
  t: Target,
  offline: SupportCommand,
  check: (stack: OpsStack) => Promise<Decided>,
): Promise<void> {
  const problem = operatorEnvelope(offline);
  if (typeof problem === "string") throw new UsageError(`${problem}; nothing sent`);
  await withStack(t, async (stack) => {
    const decided = await check(stack);
    if (decided.already !== undefined || !decided.command) {
      out(`${decided.already ?? "nothing to do"}; nothing sent`);
      return;
    }
    const envelope = operatorEnvelope(decided.command);
    if (typeof envelope === "string") throw new UsageError(`${envelope}; nothing sent`);
    const bus = await putCommand(stack, clientConfig(t), envelope);
    out(`${decided.command.type} sent to ${bus}`);
    out(`  task_id         ${decided.command.taskId}`);
    out(`  event_id        ${String(envelope.event_id)}`);
    out(`  requested_by    ${String(decided.command.payload.requested_by)}`);
    const reason = decided.command.payload.reason;
    if (reason !== undefined) out(`  reason          ${JSON.stringify(reason)}`);
  });
}

// ---------------------------------------------------------------------------------------------
// Held replies

async function reviewCheck(
  stack: OpsStack,
  command: SupportCommand,
  decision: "approved" | "rejected",
): Promise<Decided> {
  const reply = await loadReply(stack, command.taskId);
  if (!reply) throw new UsageError(`no reply of task ${command.taskId}; nothing sent`);
  if (reply.status === decision)
    return { already: `the reply of ${command.taskId} was already ${decision}` };
  if (reply.status !== "held_for_review")
    throw new UsageError(
      `the reply of ${command.taskId} is not held for review (it is ${reply.status}); nothing sent`,
    );
  if (decision === "approved" && (reply.customer_id === undefined || reply.channel === undefined))
    throw new UsageError(
      `the reply of ${command.taskId} was held before replies kept their recipient; it cannot be sent from here (reject it); nothing sent`,
    );
  if (decision === "approved") {
    const current = await conversationVersion(stack, reply.conversation_id);
    if ((reply.input_version ?? current) < current)
      throw new UsageError(
        `a newer customer message superseded the reply of ${command.taskId} (it answers version ${reply.input_version}, the conversation is at ${current}): reject it; nothing sent`,
      );
  }
  const conversationId = reply.conversation_id;
  return {
    command: {
      ...command,
      conversationId,
      payload: { ...command.payload, conversation_id: conversationId },
    },
  };
}

function reviewCommand(taskId: string, type: string, payload: Record<string, unknown>) {
  // The conversation id is read from the reply; a placeholder lets the payload be checked first.
  const conversationId = "conv_unknown";
  return {
    type,
    aggregate: { type: "reply", id: taskId },
    taskId,
    conversationId,
    payload: { conversation_id: conversationId, ...payload },
  } satisfies SupportCommand;
}

export function replyCommand(targetOf: TargetOf): Command {
  const reply = new Command("reply").description("replies held for a person's review");
  reply
    .command("list")
    .description("the held replies: task id, conversation, why held, the draft")
    .option("--json", "print as JSON")
    .action(async function (this: Command, options: { json?: boolean }) {
      await withStack(targetOf(this), async (stack) => {
        const held = await heldReplies(stack);
        if (options.json) return out(JSON.stringify(held, null, 2));
        if (held.length === 0) return out("no held replies");
        for (const h of held)
          out(
            `${h.task_id}  ${h.conversation_id}  ${h.held_reason ?? "-"}\n  ${h.reply_text ?? ""}`,
          );
      });
    });
  reply
    .command("approve")
    .description("send a held reply (puts reply.approve.requested; sent under its own key)")
    .argument("<task-id>", "the task id of the held reply (task_...)")
    .option("--text <text>", "send this text instead of the draft")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .action(async function (
      this: Command,
      id: string,
      options: { text?: string; reason?: string },
    ) {
      const taskId = taskIdOf(id);
      const text = options.text === undefined ? {} : { text: options.text };
      const command = reviewCommand(taskId, "reply.approve.requested", {
        ...text,
        ...operatorFields(options.reason),
      });
      await decideAndSend(targetOf(this), command, (s) => reviewCheck(s, command, "approved"));
    });
  reply
    .command("reject")
    .description("drop a held reply: nothing is sent (puts reply.reject.requested)")
    .argument("<task-id>", "the task id of the held reply (task_...)")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .action(async function (this: Command, id: string, options: { reason?: string }) {
      const taskId = taskIdOf(id);
      const command = reviewCommand(taskId, "reply.reject.requested", {
        ...operatorFields(options.reason),
      });
      await decideAndSend(targetOf(this), command, (s) => reviewCheck(s, command, "rejected"));
    });
  return reply;
}

// ---------------------------------------------------------------------------------------------
// Unknown send outcomes

const KEY = /^(task_[A-Za-z0-9-]{1,64}):reply:[1-9][0-9]{0,5}$/;

async function resolveCheck(
  stack: OpsStack,
  command: SupportCommand,
  resolution: SendResolution,
): Promise<Decided> {
  const key = String(command.payload.idempotency_key);
  const record = await loadSideEffect(stack, key);
  if (!record) throw new UsageError(`no side-effect record ${key}; nothing sent`);
  const fact = (await loadDelivery(stack, command.taskId))?.keys[key];
  if (record.state !== "unknown") {
    if (fact?.resolution === resolution)
      return { already: `${key} was already resolved as ${resolution} (it is ${record.state})` };
    throw new UsageError(
      `the outcome of ${key} is not unknown (it is ${record.state}); nothing sent`,
    );
  }
  if (resolution === "resend" && fact?.send === undefined)
    throw new UsageError(
      `the sender did not keep what ${key} was to send (escalated before it kept it): resolve it as delivered or abandon; nothing sent`,
    );
  const reply = await loadReply(stack, command.taskId);
  const conversationId = fact?.send?.conversation_id ?? reply?.conversation_id;
  if (!conversationId) throw new UsageError(`cannot tell the conversation of ${key}; nothing sent`);
  return {
    command: {
      ...command,
      conversationId,
      payload: { ...command.payload, conversation_id: conversationId },
    },
  };
}

export function sendCommand(targetOf: TargetOf): Command {
  const send = new Command("send").description("replies sent whose outcome is unknown");
  send
    .command("list")
    .description("the side-effect records whose outcome is unknown (key, attempts, updated)")
    .action(async function (this: Command) {
      await withStack(targetOf(this), async (stack) => {
        const open = await unknownSideEffects(stack);
        if (open.length === 0) return out("no unknown send outcomes");
        for (const r of open) out(`${r.key}  ${r.attempts} attempt(s)  ${r.updatedAt}`);
      });
    });
  send
    .command("resolve")
    .description("resolve an unknown send outcome (puts notification.resolve.requested)")
    .argument("<idempotency-key>", "the send's key <task_id>:reply:<n>")
    .addOption(
      new Option("--as <resolution>", "delivered, resend (same key) or abandon")
        .choices(SEND_RESOLUTIONS)
        .makeOptionMandatory(),
    )
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .action(async function (
      this: Command,
      key: string,
      options: { as: SendResolution; reason?: string },
    ) {
      const taskId = KEY.exec(key)?.[1];
      if (!taskId)
        throw new UsageError(`${JSON.stringify(key)} is not a reply key <task_id>:reply:<n>`);
      const command: SupportCommand = {
        type: "notification.resolve.requested",
        aggregate: { type: "delivery", id: taskId },
        taskId,
        conversationId: "conv_unknown",
        payload: {
          conversation_id: "conv_unknown",
          idempotency_key: key,
          resolution: options.as,
          ...operatorFields(options.reason),
        },
      };
      await decideAndSend(targetOf(this), command, (s) => resolveCheck(s, command, options.as));
    });
  return send;
}
