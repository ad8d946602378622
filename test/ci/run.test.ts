import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * .ci/run on a machine where Debian's chromium is absent and cannot be installed: the browser
 * tests are skipped with the reason, and the run goes on; any other failure still ends it. `npm`
 * and `apt-get` are stand-ins on PATH (npm records what it is asked; apt-get fails as it does
 * without the package registry), so nothing is installed and no test runs twice.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "agentbus-ci-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NPM_LOG = join(dir, "npm.log");

function standIn(name: string, script: string): void {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${script}\n`);
  chmodSync(path, 0o755);
}

standIn(
  "npm",
  `echo "$*" >> "${NPM_LOG}"
case "$1" in --version) echo 10.0.0 ;; test) exit "\${NPM_TEST_EXIT:-0}" ;; esac`,
);
standIn("apt-get", `echo "E: Unable to locate package chromium" >&2; exit 100`);

function ciRun(env: Record<string, string> = {}) {
  rmSync(NPM_LOG, { force: true });
  const run = spawnSync("bash", [join(ROOT, ".ci", "run")], {
    encoding: "utf8",
    env: {
      ...process.env,
      PATH: `${dir}:${process.env.PATH}`,
      AGENTBUS_CHROMIUM: join(dir, "no-chromium-here"),
      AGENTBUS_TEST_OUTPUT: join(dir, "output"),
      ...env,
    },
    timeout: SLOW_STEP_TIMEOUT_MS,
  });
  const npm = readFileSync(NPM_LOG, "utf8").trim().split("\n");
  return { ...run, npm, output: `${run.stdout}${run.stderr}` };
}

describe(".ci/run without chromium", () => {
  it("skips the browser tests, saying why, and runs npm ci and npm test", () => {
    const run = ciRun();
    expect(run.status, run.output).toBe(0);
    expect(run.output).toContain(
      `browser tests skipped: Debian's chromium is not at ${join(dir, "no-chromium-here")} and could not be installed`,
    );
    expect(run.output).toContain("E: Unable to locate package chromium");
    expect(run.npm).toEqual(["--version", "ci --no-audit --no-fund", "test"]);
  });

  it("still fails when npm test fails", () => {
    const run = ciRun({ NPM_TEST_EXIT: "1" });
    expect(run.status).toBe(1);
    expect(run.npm.at(-1)).toBe("test");
  });
});
