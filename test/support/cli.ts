import { spawn } from "node:child_process";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..", "..");
/** The file package.json's "bin" names for `agentbus`. */
export const CLI_BIN = join(ROOT, "bin", "agentbus-cli.mjs");

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run the operator CLI as `npx agentbus` runs it (package.json "bin": bin/agentbus-cli.mjs, which
 * runs bin/agentbus-cli.ts) in a child process, asynchronously: the local stack's handlers run in
 * the test's process and must go on while the CLI waits. Emulator credentials; `env` adds or
 * overrides variables (AGENTBUS_OPERATOR, ...).
 */
export function runCli(
  args: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
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
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
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
