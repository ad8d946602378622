import { Command, CommanderError } from "commander";
import { silenceNodeVersionWarning } from "../lib/operator/warnings";
import { approvalsCommand, approveCommand, rejectCommand, resolveCommand } from "./cli/agent";
import { replyCommand, sendCommand } from "./cli/customer-support";
import { listsCommand } from "./cli/lists";
import { consoleCommand, dlqCommand, statusCommand, traceCommand } from "./cli/ops";
import { checkCommand, rebuildCommand } from "./cli/rebuild";
import { replayCommand } from "./cli/replay";
import { republishCommand } from "./cli/republish";
import {
  chooseRegion,
  EXIT_AWS,
  EXIT_USAGE,
  type GlobalOptions,
  NotFoundError,
  target,
  UsageError,
} from "./cli/target";
import { workflowCommand } from "./cli/workflow";

silenceNodeVersionWarning();

/**
 * Operator commands for AgentBus (./cli): workflow runs (./cli/workflow); trace, status, dead
 * letters and the console page (./cli/ops); held replies and unknown send outcomes (./cli/customer-support).
 *
 * Exit codes: 0 ok, 1 AWS error (or the AWS side lacks what was asked for, e.g. no such run),
 * 2 usage error (nothing was sent).
 */

const program = new Command()
  .name("agentbus")
  .description(
    "AgentBus operator commands: workflow runs, traces, status, dead letters and the console.",
  )
  .exitOverride()
  .showHelpAfterError("(add --help for usage)")
  .addHelpText(
    "after",
    "\nTenants: status, approvals, reply list, send list, dlq list|show and trace take --tenant <id>\n(what names no tenant is the tenant default's); a command that acts on a run, a conversation\nor an agent run is sent in its tenant. See lib/operator/README.md#tenants.",
  )
  .option("--endpoint <url>", "AWS endpoint, e.g. an emulator (default: $AWS_ENDPOINT_URL)")
  .option(
    "--region <region>",
    "AWS region (default: the outputs file's, else $AWS_REGION, $AWS_DEFAULT_REGION, else the AWS profile's)",
  )
  .option(
    "--stage <stage>",
    "stack stage (default: $AGENTBUS_STAGE, else local with an endpoint, else dev)",
  )
  .option("--outputs <file>", "cdk deploy --outputs-file JSON (stack AgentBus-<stage>)")
  .option("--bus <name>", "commands bus name (default: outputs, else agentbus-<stage>-commands)")
  .option(
    "--state-table <name>",
    "state table name (default: outputs, else with an endpoint the table found by ListTables)",
  );

const globals = (command: Command) => target(command.optsWithGlobals<GlobalOptions>());

// Before any command acts: the region it acts in, and (unless --region gave it) where it came from.
program.hook("preAction", async (_program, command) => {
  const choice = await chooseRegion(command.optsWithGlobals<GlobalOptions>());
  program.setOptionValue("region", choice.region);
  if (choice.source !== "--region")
    process.stderr.write(`agentbus: region ${choice.region} (from ${choice.source})\n`);
});

program.addCommand(workflowCommand(globals));
program.addCommand(traceCommand(globals));
program.addCommand(statusCommand(globals));
program.addCommand(dlqCommand(globals));
program.addCommand(consoleCommand(globals));
program.addCommand(replyCommand(globals));
program.addCommand(sendCommand(globals));
program.addCommand(approvalsCommand(globals));
program.addCommand(approveCommand(globals));
program.addCommand(rejectCommand(globals));
program.addCommand(resolveCommand(globals));
program.addCommand(rebuildCommand(globals));
program.addCommand(checkCommand(globals));
program.addCommand(republishCommand(globals));
program.addCommand(replayCommand(globals));
program.addCommand(listsCommand(globals));
inheritSettings(program);

/** Subcommands built apart (addCommand) take the program's exit override and error output. */
function inheritSettings(parent: Command): void {
  for (const child of parent.commands) {
    child.copyInheritedSettings(parent);
    inheritSettings(child);
  }
}

async function main(): Promise<number> {
  try {
    await program.parseAsync();
    return 0;
  } catch (error) {
    if (error instanceof CommanderError)
      // Help and version exit 0; every parse error (commander already printed it) is a usage error.
      return error.exitCode === 0 ? 0 : EXIT_USAGE;
    if (error instanceof UsageError) {
      process.stderr.write(`agentbus: ${error.message}\n`);
      return EXIT_USAGE;
    }
    const e = error as Error & { $metadata?: { httpStatusCode?: number } };
    const name = e instanceof NotFoundError ? "" : `${e.name ?? "Error"}: `;
    process.stderr.write(`agentbus: ${name}${e.message ?? String(error)}\n`);
    return EXIT_AWS;
  }
}

process.exitCode = await main();
