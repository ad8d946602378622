import { Command } from "commander";
import { approvalsCommand, approveCommand, rejectCommand, resolveCommand } from "./agent";
import { replyCommand, sendCommand } from "./customer-support";
import { listsCommand } from "./lists";
import { consoleCommand, dlqCommand, statusCommand, traceCommand } from "./ops";
import { checkCommand, rebuildCommand } from "./rebuild";
import { replayCommand } from "./replay";
import { republishCommand } from "./republish";
import { chooseRegion, type GlobalOptions, target } from "./target";
import { workflowCommand } from "./workflow";

/**
 * The operator CLI's commands and options, as `npx agentbus --help` shows them (the entry that
 * runs them and turns errors into exit codes is bin/agentbus-cli.ts).
 */

const AFTER_HELP = `
Run it as typed here: npx agentbus <command> in a checkout (or agentbus <command> once linked
with npm link). Against a deployed stack give --outputs <file> (cdk deploy --outputs-file),
against the local stack --endpoint http://127.0.0.1:4566.

--json prints JSON alone on stdout; every message goes to stderr.
Exit codes: 0 done; 1 found a problem (an AWS error, nothing recorded under an id, states that
drift from their fold, dead letters that could not be re-queued); 2 refused the input (a
command-line mistake: nothing was sent).

Tenants: status, approvals, reply list, send list, dlq list|show and trace take --tenant <id>
(what names no tenant is the tenant default's); a command that acts on a run, a conversation
or an agent run is sent in its tenant. See lib/operator/README.md#tenants.`;

export function agentbusProgram(): Command {
  const program = new Command()
    .name("npx agentbus")
    .description(
      "AgentBus operator commands: workflow runs, traces, status, dead letters and the console.",
    )
    .exitOverride()
    .showHelpAfterError("(add --help for usage)")
    .addHelpText("after", AFTER_HELP)
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

  for (const command of [
    workflowCommand,
    traceCommand,
    statusCommand,
    dlqCommand,
    consoleCommand,
    replyCommand,
    sendCommand,
    approvalsCommand,
    approveCommand,
    rejectCommand,
    resolveCommand,
    rebuildCommand,
    checkCommand,
    republishCommand,
    replayCommand,
    listsCommand,
  ])
    program.addCommand(command(globals));
  inheritSettings(program);
  return program;
}

/** Subcommands built apart (addCommand) take the program's exit override and error output. */
function inheritSettings(parent: Command): void {
  for (const child of parent.commands) {
    child.copyInheritedSettings(parent);
    inheritSettings(child);
  }
}
