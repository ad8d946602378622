import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { commandNamed } from "../../bin/cli/program";
import { CLI_BIN } from "../support/cli";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * The operator CLI as a command: package.json's "bin" runs it from any directory, its help names
 * it as typed, stdout carries only what was asked for, and it never loads the CDK (the stack's
 * topology is read from the outputs and the role modules, not lib/infra/topology.ts).
 */

const ROOT = join(import.meta.dirname, "..", "..");
const elsewhere = mkdtempSync(join(tmpdir(), "agentbus-command-"));
afterAll(() => rmSync(elsewhere, { recursive: true, force: true }));

/** The bin run by node from a directory outside the checkout, with no AWS settings. */
function agentbus(...args: string[]) {
  const env = { ...process.env };
  for (const name of ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AGENTBUS_STAGE"])
    delete env[name];
  return spawnSync(process.execPath, [CLI_BIN, ...args], {
    cwd: elsewhere,
    env,
    encoding: "utf8",
  });
}

describe("npx agentbus", () => {
  it("is package.json's bin, an executable node script", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      bin: Record<string, string>;
    };
    expect(join(ROOT, pkg.bin.agentbus ?? "")).toBe(CLI_BIN);
    accessSync(CLI_BIN, constants.X_OK);
    expect(readFileSync(CLI_BIN, "utf8").split("\n")[0]).toBe("#!/usr/bin/env node");
  });

  it("answers --help from outside the checkout, naming itself as typed, with the exit codes", () => {
    const help = agentbus("--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: npx agentbus \[options\] \[command\]/);
    expect(help.stdout).toContain("Exit codes: 0 done; 1 found a problem");
    expect(help.stdout).toContain("2 refused the input");
    const sub = agentbus("trace", "--help");
    expect(sub.status).toBe(0);
    expect(sub.stdout).toMatch(/^Usage: npx agentbus trace \[options\] <id>/);
  });

  it("refuses bad input with exit 2, the reason on stderr and nothing on stdout", () => {
    const missing = join(elsewhere, "no-such-outputs.json");
    const refused = agentbus("--outputs", missing, "status", "--json");
    expect(refused.status).toBe(2);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toContain(`agentbus: cannot read --outputs ${missing}`);
    const unknown = agentbus("no-such-command");
    expect(unknown.status).toBe(2);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain("unknown command 'no-such-command'");
  });

  it("without the project's tsx (a copy installed without its dev dependencies) says so, exit 1", () => {
    const bare = join(elsewhere, "bare", "bin");
    mkdirSync(bare, { recursive: true });
    copyFileSync(CLI_BIN, join(bare, "agentbus-cli.mjs"));
    const result = spawnSync(process.execPath, [join(bare, "agentbus-cli.mjs"), "--help"], {
      cwd: elsewhere,
      encoding: "utf8",
    });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("agentbus: tsx is not installed beside");
  });

  it("loads only the command its command line names, found past the global options and help", () => {
    expect(commandNamed(["--outputs", "status", "trace", "--json", "x"])).toBe("trace");
    expect(commandNamed(["--endpoint=http://127.0.0.1:4566", "dlq", "list"])).toBe("dlq");
    expect(commandNamed(["--region", "eu-west-1", "help", "workflow"])).toBe("workflow");
    expect(commandNamed(["--app", "build/stack.js", "trace", "x"])).toBe("trace");
    expect(commandNamed(["--help"])).toBeUndefined();
    const viaHelp = agentbus("--stage", "prod", "help", "dlq");
    expect(viaHelp.status).toBe(0);
    expect(viaHelp.stdout).toMatch(/^Usage: npx agentbus dlq \[options\] \[command\]/);
    expect(viaHelp.stdout).toContain("redrive [options] <group>");
  });

  it(
    "does not load the CDK: no module it imports reaches aws-cdk-lib or constructs",
    async () => {
      const { metafile } = await build({
        entryPoints: [join(ROOT, "bin", "agentbus-cli.ts")],
        bundle: true,
        write: false,
        metafile: true,
        platform: "node",
        format: "esm",
        packages: "external",
        logLevel: "silent",
      });
      const packages = new Set(
        Object.values(metafile.inputs).flatMap((input) =>
          input.imports.filter((i) => i.external).map((i) => i.path),
        ),
      );
      expect([...packages]).toContain("commander");
      expect([...packages].filter((p) => /^(aws-cdk-lib|constructs)(\/|$)/.test(p))).toEqual([]);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
