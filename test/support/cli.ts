import { spawn } from "node:child_process";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");
/** The file package.json's "bin" names for `agentbus`. */
export const CLI_BIN = join(ROOT, "bin", "agentbus-cli.mjs");

/** How long one CLI call may take before it is killed and reported as hung. */
export const CLI_TIMEOUT_MS = 60_000;

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run the operator CLI as `npx agentbus` runs it (package.json "bin": bin/agentbus-cli.mjs, which
 * runs bin/agentbus-cli.ts) in a child process, asynchronously: the local stack's handlers run in
 * the test's process and must go on while the CLI waits. Emulator credentials; `env` adds or
 * overrides variables (AGENTBUS_OPERATOR, ...). A CLI that has not ended after `timeoutMs` is
 * killed and the call fails naming its arguments and what it printed, so a hang is reported as
 * one rather than as the test's own timeout.
 */
export function runCli(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
  timeoutMs = CLI_TIMEOUT_MS,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BIN, ...args], {
      cwd: ROOT,
      env: {
        ...process.env,
        AWS_ACCESS_KEY_ID: "testing",
        AWS_SECRET_ACCESS_KEY: "testing",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(
          `agentbus ${args.join(" ")} did not end within ${timeoutMs} ms; it printed: ${stdout}${stderr}`,
        ),
      );
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The CLI pointed at a local stack: its endpoint and stage first (a later --stage wins). */
export function localCli(
  target: () => { readonly endpoint: string; readonly region: string },
  stage: string,
  env: Readonly<Record<string, string | undefined>> = {},
): (...args: string[]) => Promise<CliResult> {
  return (...args) => {
    const { endpoint, region } = target();
    return runCli(["--endpoint", endpoint, "--region", region, "--stage", stage, ...args], env);
  };
}
