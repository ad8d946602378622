import { Command, Option } from "commander";
import {
  loadAgentRun,
  type StepDecision,
  stepDecisionCheck,
} from "../../lib/operator/agent-actions";
import {
  type ApprovalView,
  approveCommandLine,
  pendingApprovals,
} from "../../lib/operator/approvals";
import { operatorName } from "../../lib/operator/audit";
import { sendDecided } from "../../lib/operator/support-actions";
import { review } from "./customer-support";
import { withStack } from "./ops";
import { out, type Target, UsageError } from "./target";
import { actingTenantOption, tenantArgument, tenantOption } from "./tenant";
import { confirmNode, waitingSinceOf, waitingSinceOption } from "./workflow";

/**
 * What waits for a person's approval, and the answers (the approval primitive,
 * functions/core/approval.ts):
 * - `agentbus approvals`: every pending approval, whichever role holds it: an agent's tool call,
 *   a held reply, a content agent's confirmation, a plan that names roles that write; with the
 *   proposed action, its input and the command that answers it.
 * - `agentbus approve | reject <id> [--step <step>]`: the answer, by what `<id>` is:
 *   - an agent run with `--step <call-id>`: the agent's `<stem>.decision.requested` (approve runs
 *     the call on the run's next step; reject tells the model);
 *   - a workflow run with `--step <node-id>`: `workflow.confirm.requested`, confirmed or refused
 *     (the node's agent resumes, or the node fails; for a node whose plan waits, its child run
 *     starts, or the node fails);
 *   - a held reply's task id, no `--step`: `reply.approve.requested` (`--text` sends an edited
 *     text) or `reply.reject.requested`, as `agentbus reply approve|reject` does.
 * - `agentbus resolve <run-id> --step <call-id> --as applied|not_applied`: whether a write whose
 *   outcome could not be learnt was applied; `agentbus resolve <run-id> --as answer --output JSON`:
 *   the answer of a run handed over for good (NEEDS_HUMAN waiting for an answer), which ends it.
 * A step's answer names the wait it was given to (`--since`, as `agentbus approvals` prints it; none:
 * the wait read as it is sent): a workflow node waits more than once, and a model may give each
 * turn's tool calls the same ids, so an answer given to one wait must not answer a later one.
 * Each is sent on the stage's commands bus with who asked (`$AGENTBUS_OPERATOR` or the OS user)
 * and why (`--reason`), in the tenant of what waits, read from its state. What waits is read
 * first: a decision already taken is reported and nothing is sent (exit 0); one that does not
 * apply, or what waits of another tenant than `--tenant` names, is a usage error naming why
 * (exit 2), nothing sent.
 */

type TargetOf = (command: Command) => Target;

interface DecisionOptions {
  readonly step?: string;
  readonly reason?: string;
  readonly output?: string;
  readonly since?: string;
  readonly tenant?: string;
}

interface ApproveOptions {
  readonly step?: string;
  readonly reason?: string;
  readonly text?: string;
  readonly since?: string;
  readonly tenant?: string;
}

/** Approve or reject what `id` waits for: a held reply, an agent run's call, a workflow node. */
async function approveOrReject(
  t: Target,
  id: string,
  verdict: "approve" | "reject",
  options: ApproveOptions,
): Promise<void> {
  const tenant = tenantArgument(options.tenant);
  if (options.step === undefined) {
    if (options.since !== undefined) throw sinceWithoutStep();
    if (!id.startsWith("task_"))
      throw new UsageError(
        `${JSON.stringify(id)}: name the step with --step (a tool call of an agent run, a node of a workflow run), or give a held reply's task id; nothing sent`,
      );
    return review(t, id, verdict === "approve" ? "approved" : "rejected", {
      text: options.text,
      reason: options.reason,
      tenant,
    });
  }
  if (options.text !== undefined)
    throw new UsageError("--text edits a held reply only (no --step); nothing sent");
  const step = options.step;
  const isAgentRun = await withStack(
    t,
    async (stack) => (await loadAgentRun(stack, id)) !== undefined,
  );
  if (isAgentRun)
    return decide(t, id, verdict, { step, reason: options.reason, since: options.since, tenant });
  const answer = verdict === "approve" ? "confirmed" : "refused";
  return confirmNode(t, id, step, answer, {
    ...(options.reason === undefined ? {} : { note: options.reason }),
    ...(tenant === undefined ? {} : { tenant }),
    ...(options.since === undefined ? {} : { waitingSince: options.since }),
  });
}

function printApprovals(approvals: readonly ApprovalView[]): void {
  if (approvals.length === 0) {
    out("nothing waits for an approval");
    return;
  }
  for (const a of approvals) {
    const deadline = a.deadline ? `, decided by ${a.deadline} if nobody does` : "";
    out(`${a.kind.padEnd(12)}  ${a.action}  (waiting since ${a.since}${deadline})`);
    out(`  tenant   ${a.tenant}`);
    if (a.input !== undefined) out(`  input    ${JSON.stringify(a.input)}`);
    out(`  approve  ${approveCommandLine(a, "approve")}`);
    out(`  reject   ${approveCommandLine(a, "reject")} --reason "..."`);
  }
}

export function approvalsCommand(targetOf: TargetOf): Command {
  return new Command("approvals")
    .option("--json", "print as JSON")
    .addOption(tenantOption())
    .action(async function (this: Command, options: { json?: boolean; tenant?: string }) {
      const tenant = tenantArgument(options.tenant);
      await withStack(targetOf(this), async (stack) => {
        const approvals = await pendingApprovals(stack, 50, tenant);
        if (options.json) return out(JSON.stringify(approvals, null, 2));
        printApprovals(approvals);
      });
    });
}

async function decide(
  t: Target,
  runId: string,
  decision: StepDecision,
  options: DecisionOptions,
): Promise<void> {
  const output = options.output === undefined ? undefined : parseOutput(options.output);
  const tenant = tenantArgument(options.tenant);
  const waitingSince = options.since === undefined ? undefined : waitingSinceOf(options.since);
  await withStack(t, async (stack) => {
    const decided = await stepDecisionCheck(stack, runId, options.step, decision, {
      reason: options.reason,
      output,
      requestedBy: operatorName(),
      tenant,
      ...(waitingSince === undefined ? {} : { waitingSince }),
    });
    const outcome = await sendDecided(stack, decided);
    if ("refused" in outcome) throw new UsageError(`${outcome.refused}; nothing sent`);
    if ("already" in outcome) return out(`${outcome.already}; nothing sent`);
    const { command, envelope, bus } = outcome.sent;
    out(`${command.type} sent to ${bus}`);
    out(`  run_id          ${runId}`);
    if (options.step !== undefined) out(`  step            ${options.step}`);
    out(`  decision        ${decision}`);
    const { waiting_since } = command.payload;
    if (waiting_since !== undefined) out(`  waiting_since   ${String(waiting_since)}`);
    out(`  event_id        ${String(envelope.event_id)}`);
    if (envelope.tenant_id !== undefined) out(`  tenant_id       ${String(envelope.tenant_id)}`);
    out(`  requested_by    ${String(command.payload.requested_by)}`);
    if (options.reason !== undefined) out(`  reason          ${JSON.stringify(options.reason)}`);
  });
}

function parseOutput(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--output is not JSON (${(error as Error).message}); nothing sent`);
  }
}

const reason = () =>
  new Option("--reason <text>", "why (kept on the command, at most 1000 characters)");

const approvalStep = () =>
  new Option(
    "--step <step>",
    "the step that waits: a tool call (agent run) or a node (workflow run); none for a held reply (see agentbus approvals)",
  );

const sinceWithoutStep = () =>
  new UsageError(
    "--since names the wait of a step (a tool call of an agent run, a node of a workflow run), with --step; nothing sent",
  );

export function approveCommand(targetOf: TargetOf): Command {
  return new Command("approve")
    .argument(
      "<id>",
      "an agent run (with --step), a workflow run (with --step) or a held reply's task id",
    )
    .addOption(approvalStep())
    .addOption(waitingSinceOption())
    .option("--text <text>", "a held reply: send this text instead of the draft")
    .addOption(reason())
    .addOption(actingTenantOption())
    .action(async function (this: Command, id: string, options: ApproveOptions) {
      await approveOrReject(targetOf(this), id, "approve", options);
    });
}

export function rejectCommand(targetOf: TargetOf): Command {
  return new Command("reject")
    .argument(
      "<id>",
      "an agent run (with --step), a workflow run (with --step) or a held reply's task id",
    )
    .addOption(approvalStep())
    .addOption(waitingSinceOption())
    .addOption(reason())
    .addOption(actingTenantOption())
    .action(async function (this: Command, id: string, options: ApproveOptions) {
      await approveOrReject(targetOf(this), id, "reject", options);
    });
}

export function resolveCommand(targetOf: TargetOf): Command {
  return new Command("resolve")
    .argument("<run-id>", "the agent run (rrun_...)")
    .addOption(
      new Option(
        "--step <call-id>",
        "the tool call whose outcome is unknown (see agentbus status); none for an answer",
      ),
    )
    .addOption(waitingSinceOption())
    .addOption(
      new Option(
        "--as <outcome>",
        "applied or not_applied (a call's outcome), or answer (a run handed over for good)",
      )
        .choices(["applied", "not_applied", "answer"])
        .makeOptionMandatory(),
    )
    .option(
      "--output <json>",
      "for applied: what the outside system gave, as the tool's output; for answer: the run's answer",
    )
    .addOption(reason())
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runId: string,
      options: DecisionOptions & { as: "applied" | "not_applied" | "answer" },
    ) {
      if (options.as !== "answer" && options.step === undefined)
        throw new UsageError(`--as ${options.as} needs --step <call-id>; nothing sent`);
      if (options.step === undefined && options.since !== undefined) throw sinceWithoutStep();
      await decide(targetOf(this), runId, options.as, options);
    });
}
