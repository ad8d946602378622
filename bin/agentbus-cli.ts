import { CommanderError } from "commander";
import { silenceNodeVersionWarning } from "../lib/operator/warnings";
import { agentbusProgram, commandNamed } from "./cli/program";
import { EXIT_PROBLEM, EXIT_REFUSED, NotFoundError, UsageError } from "./cli/target";

silenceNodeVersionWarning();

/**
 * The operator CLI, `npx agentbus <command>` (package.json "bin" runs it through
 * ./agentbus-cli.mjs): workflow runs (./cli/workflow); trace, status, dead letters and the console
 * page (./cli/ops); held replies and unknown send outcomes (./cli/customer-support); the commands
 * and options in ./cli/program.ts.
 *
 * stdout carries only what was asked for (with --json, JSON alone); messages go to stderr.
 * Exit codes: 0 done; 1 found a problem (an AWS error, or the AWS side lacks or contradicts what
 * was asked for: no such run, drifted states, letters not re-queued); 2 refused the input (a
 * usage error: nothing was sent).
 */

// A reader that stops early (`| head`) is no error of the command's.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(process.exitCode ?? 0);
});

async function main(): Promise<number> {
  try {
    const named = commandNamed(process.argv.slice(2));
    const program = await agentbusProgram((name) => name === named);
    await program.parseAsync();
    return 0;
  } catch (error) {
    if (error instanceof CommanderError)
      // Help and version exit 0; every parse error (commander already printed it) is refused input.
      return error.exitCode === 0 ? 0 : EXIT_REFUSED;
    if (error instanceof UsageError) {
      process.stderr.write(`agentbus: ${error.message}\n`);
      return EXIT_REFUSED;
    }
    const e = error as Error;
    const name = e instanceof NotFoundError ? "" : `${e.name ?? "Error"}: `;
    process.stderr.write(`agentbus: ${name}${e.message ?? String(error)}\n`);
    return EXIT_PROBLEM;
  }
}

process.exitCode = await main();
