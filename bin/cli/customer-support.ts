import { Command, Option } from "commander";
import {
  SEND_RESOLUTIONS,
  type SendResolution,
} from "../../functions/roles/customer-support/events/conversation";
import { operatorName } from "../../lib/operator/audit";
import { heldReplies } from "../../lib/operator/customer-support";
import { unknownSideEffects } from "../../lib/operator/lists";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import type { OpsStack } from "../../lib/operator/stack";
import {
  type Decided,
  type ReviewDecision,
  replyKeyTask,
  reviewCheck,
  reviewCommand,
  type SupportCommand,
  sendDecided,
  sendResolveCheck,
  sendResolveCommand,
  taskIdProblem,
} from "../../lib/operator/support-actions";
import { cancelCheck, cancelCommand } from "../../lib/operator/support-cancel";
import { withStack } from "./ops";
import { out, type Target, UsageError } from "./target";
import { actingTenantOption, tenantArgument, tenantOption } from "./tenant";

/**
 * `agentbus reply list | approve | reject | cancel` and `agentbus send list | resolve`: what waits
 * for a person in the support conversation (seed 000 §14). Each decision is a command on the
 * stage's commands bus (`reply.approve.requested`, `reply.reject.requested`,
 * `support.cancel.requested`, `notification.resolve.requested`) carrying who asked
 * (`$AGENTBUS_OPERATOR` or the OS user) and why (`--reason`); the audit group keeps it. Before
 * sending, the stored state is checked (the checks live in lib/operator/support-actions, shared with
 * the console, and lib/operator/support-cancel): a decision already taken is reported and nothing is
 * sent (exit 0); one that cannot apply (no such reply, not held, a reply already delivered, a key
 * whose outcome is not unknown, a conversation of another tenant than `--tenant` names) is a
 * usage error (exit 2), nothing sent. Each goes in the tenant its conversation's state records.
 */

type TargetOf = (command: Command) => Target;

interface ListOptions {
  readonly json?: boolean;
  readonly tenant?: string;
}

function taskIdOf(value: string): string {
  const problem = taskIdProblem(value);
  if (problem) throw new UsageError(problem);
  return value;
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
    const outcome = await sendDecided(stack, await check(stack));
    if ("refused" in outcome) throw new UsageError(`${outcome.refused}; nothing sent`);
    if ("already" in outcome) {
      out(`${outcome.already}; nothing sent`);
      return;
    }
    const { command, envelope, bus } = outcome.sent;
    out(`${command.type} sent to ${bus}`);
    out(`  task_id         ${command.taskId}`);
    out(`  event_id        ${String(envelope.event_id)}`);
    if (envelope.tenant_id !== undefined) out(`  tenant_id       ${String(envelope.tenant_id)}`);
    out(`  requested_by    ${String(command.payload.requested_by)}`);
    const reason = command.payload.reason;
    if (reason !== undefined) out(`  reason          ${JSON.stringify(reason)}`);
  });
}

// ---------------------------------------------------------------------------------------------
// Held replies

/** Approve or reject a held reply (also `agentbus approve|reject <task-id>`). */
export function review(
  t: Target,
  id: string,
  decision: ReviewDecision,
  fields: Fields,
): Promise<void> {
  const tenant = tenantArgument(fields.tenant);
  const command = reviewCommand(taskIdOf(id), decision, fields, operatorName());
  return decideAndSend(t, command, (s) => reviewCheck(s, command, decision, tenant));
}

export interface Fields {
  readonly text?: string;
  readonly reason?: string;
  /** `--tenant`: the conversation must be this tenant's. */
  readonly tenant?: string;
}

export function replyCommand(targetOf: TargetOf): Command {
  const reply = new Command("reply");
  reply
    .command("list")
    .description("the held replies: task id, conversation, why held, the draft")
    .option("--json", "print as JSON")
    .addOption(tenantOption())
    .action(async function (this: Command, options: ListOptions) {
      const tenant = tenantArgument(options.tenant);
      await withStack(targetOf(this), async (stack) => {
        const held = await heldReplies(stack, 50, tenant);
        if (options.json) return out(JSON.stringify(held, null, 2));
        if (held.length === 0) return out("no held replies");
        for (const h of held)
          out(
            `${h.task_id}  ${h.conversation_id}  ${h.tenant}  ${h.held_reason ?? "-"}\n  ${h.reply_text ?? ""}`,
          );
      });
    });
  reply
    .command("approve")
    .description("send a held reply (puts reply.approve.requested; sent under its own key)")
    .argument("<task-id>", "the task id of the held reply (task_...)")
    .option("--text <text>", "send this text instead of the draft")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .addOption(actingTenantOption())
    .action(async function (this: Command, id: string, options: Fields) {
      await review(targetOf(this), id, "approved", options);
    });
  reply
    .command("reject")
    .description("drop a held reply: nothing is sent (puts reply.reject.requested)")
    .argument("<task-id>", "the task id of the held reply (task_...)")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .addOption(actingTenantOption())
    .action(async function (this: Command, id: string, options: Fields) {
      await review(targetOf(this), id, "rejected", {
        reason: options.reason,
        tenant: options.tenant,
      });
    });
  reply
    .command("cancel")
    .description(
      "cancel a support turn: a reply not sent yet is not sent, a refund review of it refunds nothing more (puts support.cancel.requested)",
    )
    .argument("<task-id>", "the task id of the customer's message (task_...)")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .addOption(actingTenantOption())
    .action(async function (this: Command, id: string, options: Fields) {
      const tenant = tenantArgument(options.tenant);
      const command = cancelCommand(taskIdOf(id), options.reason, operatorName());
      await decideAndSend(targetOf(this), command, (s) => cancelCheck(s, command, tenant));
    });
  return reply;
}

// ---------------------------------------------------------------------------------------------
// Unknown send outcomes

export function sendCommand(targetOf: TargetOf): Command {
  const send = new Command("send");
  send
    .command("list")
    .description("the side-effect records whose outcome is unknown (key, attempts, updated)")
    .option("--json", "print as JSON")
    .addOption(
      tenantOption(
        "only the records of this tenant's tasks (a task's tenant is the one its first event names, the tenant default when that names none)",
      ),
    )
    .action(async function (this: Command, options: ListOptions) {
      const tenant = tenantArgument(options.tenant);
      await withStack(targetOf(this), async (stack) => {
        const open = await unknownSideEffects(stack, 100, tenant);
        if (options.json) return out(JSON.stringify(open, null, 2));
        if (open.length === 0) return out("no unknown send outcomes");
        for (const r of open)
          out(
            `${r.key}  ${r.attempts} attempt(s)  ${r.updatedAt}${r.tenant === undefined ? "" : `  ${r.tenant}`}`,
          );
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
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      key: string,
      options: { as: SendResolution; reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const parsed = replyKeyTask(key);
      if ("problem" in parsed) throw new UsageError(parsed.problem);
      const command = sendResolveCommand(
        key,
        parsed.taskId,
        options.as,
        options.reason,
        operatorName(),
      );
      await decideAndSend(targetOf(this), command, (s) =>
        sendResolveCheck(s, command, options.as, tenant),
      );
    });
  return send;
}
