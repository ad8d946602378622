import { Command, Option } from "commander";
import { type StepDecision, stepDecisionCheck } from "../../lib/operator/agent-actions";
import { operatorName } from "../../lib/operator/audit";
import { sendDecided } from "../../lib/operator/support-actions";
import { withStack } from "./ops";
import { out, type Target, UsageError } from "./target";

/**
 * `agentbus approve | reject | resolve <run-id> --step <call-id>`: a person's answer to what an
 * agent run waits for (a tool call that needs approval; a write whose outcome could not be
 * learnt), sent as the agent's `<stem>.decision.requested` on the stage's commands bus with who
 * asked (`$AGENTBUS_OPERATOR` or the OS user) and why (`--reason`). The run's journal is read
 * first: a decision already taken is reported and nothing is sent (exit 0); one the run does not
 * wait for is a usage error naming what it waits for (exit 2), nothing sent.
 */

type TargetOf = (command: Command) => Target;

interface DecisionOptions {
  readonly step: string;
  readonly reason?: string;
  readonly output?: string;
}

async function decide(
  t: Target,
  runId: string,
  decision: StepDecision,
  options: DecisionOptions,
): Promise<void> {
  const output = options.output === undefined ? undefined : parseOutput(options.output);
  await withStack(t, async (stack) => {
    const decided = await stepDecisionCheck(stack, runId, options.step, decision, {
      reason: options.reason,
      output,
      requestedBy: operatorName(),
    });
    const outcome = await sendDecided(stack, decided);
    if ("refused" in outcome) throw new UsageError(`${outcome.refused}; nothing sent`);
    if ("already" in outcome) return out(`${outcome.already}; nothing sent`);
    const { command, envelope, bus } = outcome.sent;
    out(`${command.type} sent to ${bus}`);
    out(`  run_id          ${runId}`);
    out(`  step            ${options.step}`);
    out(`  decision        ${decision}`);
    out(`  event_id        ${String(envelope.event_id)}`);
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

const step = () =>
  new Option(
    "--step <call-id>",
    "the tool call the run waits on (see agentbus status)",
  ).makeOptionMandatory();
const reason = () =>
  new Option("--reason <text>", "why (kept on the command, at most 1000 characters)");

export function approveCommand(targetOf: TargetOf): Command {
  return new Command("approve")
    .description("approve a tool call an agent run waits on: it runs on the run's next step")
    .argument("<run-id>", "the agent run (rrun_...)")
    .addOption(step())
    .addOption(reason())
    .action(async function (this: Command, runId: string, options: DecisionOptions) {
      await decide(targetOf(this), runId, "approve", options);
    });
}

export function rejectCommand(targetOf: TargetOf): Command {
  return new Command("reject")
    .description("reject a tool call an agent run waits on: it never runs, the model is told why")
    .argument("<run-id>", "the agent run (rrun_...)")
    .addOption(step())
    .addOption(reason())
    .action(async function (this: Command, runId: string, options: DecisionOptions) {
      await decide(targetOf(this), runId, "reject", options);
    });
}

export function resolveCommand(targetOf: TargetOf): Command {
  return new Command("resolve")
    .description(
      "say whether a write whose outcome could not be learnt was applied (its key is never run again)",
    )
    .argument("<run-id>", "the agent run (rrun_...)")
    .addOption(step())
    .addOption(
      new Option("--as <outcome>", "applied or not_applied")
        .choices(["applied", "not_applied"])
        .makeOptionMandatory(),
    )
    .option("--output <json>", "for applied: what the outside system gave, as the tool's output")
    .addOption(reason())
    .action(async function (
      this: Command,
      runId: string,
      options: DecisionOptions & { as: "applied" | "not_applied" },
    ) {
      await decide(targetOf(this), runId, options.as, options);
    });
}
