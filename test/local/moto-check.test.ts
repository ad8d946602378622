import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { motoProblem } from "../../lib/dev/local/moto";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * Whether moto_server can start here, asked before npm start loads the stack: without moto, npm
 * start ended after tens of seconds with a Python traceback about jsonpath_ng and a Node stack
 * trace, naming neither moto nor what to install. A python3 without moto is this machine's own,
 * run without its site-packages (`-I -S`), so nothing is uninstalled.
 */

const PIP_LINE = "pip install 'moto[server]~=5.2'";
const dir = mkdtempSync(join(tmpdir(), "agentbus-no-moto-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const realPython = spawnSync("sh", ["-c", "command -v python3"], {
  encoding: "utf8",
}).stdout.trim();
const pythonWithoutMoto = join(dir, "python3");
writeFileSync(pythonWithoutMoto, `#!/bin/sh\nexec "${realPython}" -I -S "$@"\n`);
chmodSync(pythonWithoutMoto, 0o755);

describe("motoProblem", () => {
  it(
    "is nothing where moto is installed (as the tests need it)",
    () => {
      expect(motoProblem()).toBeUndefined();
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "names moto, the module it lacks and the pip line for a python3 without moto",
    () => {
      const problem = motoProblem(pythonWithoutMoto);
      expect(problem).toMatch(/^moto is not installed for .*python3 \(it cannot import \w+\)/);
      expect(problem).toContain(PIP_LINE);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "names python3 and the pip line when there is no python3",
    () => {
      const problem = motoProblem(join(dir, "no-python3-here"));
      expect(problem).toMatch(/no-python3-here could not be started/);
      expect(problem).toContain(PIP_LINE);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});

describe("npm start without moto", () => {
  it(
    "stops before loading the stack, naming moto and the pip line, without a stack trace",
    () => {
      const run = spawnSync("npm", ["start"], {
        cwd: join(import.meta.dirname, "..", ".."),
        encoding: "utf8",
        env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, AWS_ENDPOINT_URL: "" },
        timeout: SLOW_STEP_TIMEOUT_MS,
      });
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(/npm start: moto is not installed for python3/);
      expect(run.stderr).toContain(PIP_LINE);
      expect(run.stdout).not.toContain("AgentBus local run");
      expect(`${run.stdout}${run.stderr}`).not.toMatch(/Traceback|\n\s+at /);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
