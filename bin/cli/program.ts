import { Command, Option } from "commander";
import { chooseRegion, type GlobalOptions, type Target, target } from "./target";

/**
 * The operator CLI's commands and options, as `npx agentbus --help` shows them (the entry that
 * runs them and turns errors into exit codes is bin/agentbus-cli.ts).
 *
 * Each command's module (./ops, ./workflow, ...) loads the operator code it runs, and with it
 * the AWS SDK, zod and the roles: a second or so. So the program loads only the module of the
 * command named on the command line; the others are listed by name and description alone, which
 * is all `npx agentbus --help` shows of them.
 */

type TargetOf = (command: Command) => Target;

/** A top-level command: its description (the one home of it) and where it is defined. */
interface CommandEntry {
  readonly name: string;
  readonly description: string;
  readonly load: () => Promise<(targetOf: TargetOf) => Command>;
}

const COMMANDS: readonly CommandEntry[] = [
  {
    name: "workflow",
    description: "workflow runs (the orchestrator's DAG runs)",
    load: async () => (await import("./workflow")).workflowCommand,
  },
  {
    name: "trace",
    description: "the causal tree of an event, task or correlation id, with every group's outcome",
    load: async () => (await import("./ops")).traceCommand,
  },
  {
    name: "status",
    description: "queues per consumer group, relay, runs by status and what waits for a person",
    load: async () => (await import("./ops")).statusCommand,
  },
  {
    name: "dlq",
    description: "the consumer groups' dead-letter queues",
    load: async () => (await import("./ops")).dlqCommand,
  },
  {
    name: "console",
    description:
      "serve the console page on 127.0.0.1, with forms for the actions above (Ctrl-C stops it)",
    load: async () => (await import("./ops")).consoleCommand,
  },
  {
    name: "reply",
    description: "replies held for a person's review",
    load: async () => (await import("./customer-support")).replyCommand,
  },
  {
    name: "send",
    description: "replies sent whose outcome is unknown",
    load: async () => (await import("./customer-support")).sendCommand,
  },
  {
    name: "approvals",
    description:
      "what waits for a person's approval: agents' tool calls, held replies, content agents' confirmations, plans that write",
    load: async () => (await import("./agent")).approvalsCommand,
  },
  {
    name: "approve",
    description:
      "approve what waits for a person: an agent's tool call runs, a held reply is sent, a BLOCKED node resumes, a plan's child run starts",
    load: async () => (await import("./agent")).approveCommand,
  },
  {
    name: "reject",
    description:
      "reject what waits for a person: an agent's tool call never runs (the model is told why), a held reply is dropped, a BLOCKED node fails, a plan never runs (its node fails)",
    load: async () => (await import("./agent")).rejectCommand,
  },
  {
    name: "resolve",
    description:
      "say whether a write whose outcome could not be learnt was applied (its key is never run again)",
    load: async () => (await import("./agent")).resolveCommand,
  },
  {
    name: "rebuild",
    description:
      "feed a group every stream of an aggregate type from the event store, in version order (resumable); --reset rewrites its states from the fold",
    load: async () => (await import("./rebuild")).rebuildCommand,
  },
  {
    name: "check",
    description:
      "compare a group's stored states with the fold of their streams (state = fold(events))",
    load: async () => (await import("./rebuild")).checkCommand,
  },
  {
    name: "republish",
    description:
      "put stored events on their buses again (a time window, or what the relay gave up on)",
    load: async () => (await import("./republish")).republishCommand,
  },
  {
    name: "replay",
    description:
      "replay a window of the topics' archives to chosen consumer groups (consumers de-duplicate)",
    load: async () => (await import("./replay")).replayCommand,
  },
  {
    name: "erase",
    description:
      "erase a customer's personal data: what is stored reads [erased] (their key is deleted; copies overwritten)",
    load: async () => (await import("./erase")).eraseCommand,
  },
  {
    name: "stop",
    description:
      "stop a tenant or a run: no model or tool call starts for it, its workflow runs in flight are cancelled, the front door refuses its new work",
    load: async () => (await import("./stop")).stopCommand,
  },
  {
    name: "resume",
    description: "lift the stop of a tenant or a run: new work runs again",
    load: async () => (await import("./stop")).resumeCommand,
  },
  {
    name: "lists",
    description:
      "runs, conversations and tasks by tenant, status and age, and the backfill of the list indexes' keys",
    load: async () => (await import("./lists")).listsCommand,
  },
];

/** Global options that take a value: what follows them is not the command's name. */
const VALUED_GLOBALS = new Set([
  "--endpoint",
  "--region",
  "--stage",
  "--outputs",
  "--app",
  "--bus",
  "--state-table",
]);

/**
 * The command `args` (the arguments after the program's name) names: the first that is neither
 * an option nor a global option's value; after `help`, the one it asks about.
 */
export function commandNamed(args: readonly string[]): string | undefined {
  const words: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (VALUED_GLOBALS.has(arg)) i++;
    else if (!arg.startsWith("-")) words.push(arg);
    if (words.length === 2 || (words.length === 1 && words[0] !== "help")) break;
  }
  return words[0] === "help" ? words[1] : words[0];
}

const AFTER_HELP = `
Run it as typed here: npx agentbus <command> in a checkout (or agentbus <command> once linked
with npm link). Against a deployed stack give --outputs <file> (cdk deploy --outputs-file), or
export AGENTBUS_OUTPUTS=<file> once; against the local stack --endpoint http://127.0.0.1:4566.

--json prints JSON alone on stdout; every message goes to stderr.
Exit codes: 0 done; 1 found a problem (an AWS error, nothing recorded under an id, states that
drift from their fold, dead letters that could not be re-queued); 2 refused the input (a
command-line mistake: nothing was sent).

Tenants: status, approvals, reply list, send list, dlq list|show and trace take --tenant <id>
(what names no tenant is the tenant default's); a command that acts on a run, a conversation
or an agent run is sent in its tenant, read from its state, and with --tenant <id> it is refused
(exit 2) when that is another tenant. See lib/operator/README.md#tenants.`;

/**
 * The program, with the full definition of the commands `load` picks (by default every one;
 * bin/agentbus-cli.ts picks the one its command line names) and the others by name and
 * description only.
 */
export async function agentbusProgram(
  load: (name: string) => boolean = () => true,
): Promise<Command> {
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
    // From the environment too, so the commands the alarms name (`npx agentbus status`) run as
    // written against a deployed stack once the operator has exported it.
    .addOption(
      new Option("--outputs <file>", "cdk deploy --outputs-file JSON (stack AgentBus-<stage>)").env(
        "AGENTBUS_OUTPUTS",
      ),
    )
    .addOption(
      new Option(
        "--app <module>",
        "the application's module exporting what its stack is given ({ roles, ... }): its roles, for rebuild, check, trace and answers (default: the reference applications')",
      ).env("AGENTBUS_APP"),
    )
    .option("--bus <name>", "commands bus name (default: outputs, else agentbus-<stage>-commands)")
    .option(
      "--state-table <name>",
      "state table name (default: outputs, else with an endpoint the table found by ListTables)",
    );

  const globals: TargetOf = (command) => target(command.optsWithGlobals<GlobalOptions>());

  // Before any command acts: the region it acts in, and (unless --region gave it) where it came from.
  program.hook("preAction", async (_program, command) => {
    const { app } = command.optsWithGlobals<GlobalOptions>();
    if (app) await (await import("./app")).useApplication(app);
    const choice = await chooseRegion(command.optsWithGlobals<GlobalOptions>());
    program.setOptionValue("region", choice.region);
    if (choice.source !== "--region")
      process.stderr.write(`agentbus: region ${choice.region} (from ${choice.source})\n`);
  });

  for (const entry of COMMANDS) {
    const command = load(entry.name) ? (await entry.load())(globals) : new Command(entry.name);
    program.addCommand(command.description(entry.description));
  }
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
