import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { CLI_BIN } from "../support/cli";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * `agentbus workflow signal` refuses bad input before it reads or sends anything: exit 2, the
 * reason on stderr, nothing on stdout. (Sending one to a run is in
 * test/e2e/workflow-registry.test.ts.)
 */

const RUN = "run_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

/** The CLI against an endpoint nothing listens on: a refusal must come before any call. */
function signal(...args: string[]) {
  return spawnSync(
    process.execPath,
    [CLI_BIN, "--endpoint", "http://127.0.0.1:9", "workflow", "signal", ...args],
    {
      encoding: "utf8",
      env: { ...process.env, AWS_ACCESS_KEY_ID: "x", AWS_SECRET_ACCESS_KEY: "x" },
    },
  );
}

describe("agentbus workflow signal", () => {
  it(
    "refuses a payload that is not a JSON object or is too large, a bad signal and a bad run id",
    () => {
      const cases: [string[], RegExp][] = [
        [[RUN, "approved", "--payload", "{not json"], /--payload is not JSON/],
        [
          [RUN, "approved", "--payload", "[1,2]"],
          /--payload must be a JSON object \(the signal's payload\)/,
        ],
        [
          [RUN, "approved", "--payload", JSON.stringify({ text: "x".repeat(70_000) })],
          /--payload is \d+ bytes of JSON; at most 65536 fit in a signal/,
        ],
        [[RUN, "s".repeat(129)], /signal "s+": must be 1-128 characters/],
        [["not-a-run", "approved"], /run id "not-a-run": must be a run id/],
      ];
      for (const [args, message] of cases) {
        const result = signal(...args);
        expect(result.status, result.stderr).toBe(2);
        expect(result.stdout).toBe("");
        expect(result.stderr).toMatch(message);
      }
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
