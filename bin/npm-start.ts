import { motoProblem } from "../lib/dev/local/moto";

/**
 * `npm start`: bin/start.ts, once it is known that the emulator it starts can start here. Loading
 * the stack takes tens of seconds on a busy machine, so a run that will start moto_server (no
 * `--endpoint`, no `$AWS_ENDPOINT_URL`) first asks python3 whether moto is installed, and without
 * it stops at once, naming what to install.
 */
const given = (flag: string) =>
  process.argv.slice(2).some((arg) => arg === flag || arg.startsWith(`${flag}=`));
const startsMoto =
  !process.env.AWS_ENDPOINT_URL && !given("--endpoint") && !given("--help") && !given("-h");
const problem = startsMoto ? motoProblem() : undefined;
if (problem) {
  process.stderr.write(`npm start: ${problem}\n`);
  process.exit(1);
}
await import("./start");
