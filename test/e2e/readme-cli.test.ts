import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalEnvironment, startLocal } from "../../lib/local/environment";
import { emulator } from "../support/aws";

const README = readFileSync(join(import.meta.dirname, "..", "..", "README.md"), "utf8");
const block = /<!-- cli-example:start -->\n```sh\n([\s\S]*?)```\n<!-- cli-example:end -->/.exec(
  README,
)?.[1];
const awsCli = spawnSync("aws", ["--version"], { stdio: "ignore" }).status === 0;
if (!awsCli)
  console.warn("README AWS CLI example skipped: the `aws` command (AWS CLI) is not installed here");

/** The README's AWS CLI example, run as written against the local stack (only the port differs). */
describe.skipIf(!awsCli)("README: send an event with the AWS CLI", () => {
  let env: LocalEnvironment;
  let dir: string;

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: "local" });
    dir = mkdtempSync(join(tmpdir(), "agentbus-readme-"));
  }, 120_000);

  afterAll(async () => {
    await env?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const run = () => {
    expect(block, "README has a cli-example block").toBeDefined();
    const script = (block ?? "").replaceAll("http://127.0.0.1:4566", env.endpoint);
    return JSON.parse(
      execFileSync("bash", ["-euo", "pipefail", "-c", script], { cwd: dir, encoding: "utf8" }),
    ) as {
      FailedEntryCount: number;
    };
  };

  it("is applied once, and a second send is a duplicate", async () => {
    expect(run().FailedEntryCount).toBe(0);
    const eventId = /\\"event_id\\":\\"([0-9A-Z]{26})\\"/.exec(block ?? "")?.[1] ?? "";
    await env.runtime.idle({ quietMs: 500 });
    expect(run().FailedEntryCount).toBe(0);
    await env.runtime.idle({ quietMs: 500 });
    // Applied once; the repeat is either dropped by the FIFO queue's 5-minute deduplication or
    // reaches the consumer and is recognised there as a duplicate.
    const statuses =
      env.observations.deliveries
        .get(eventId)
        ?.filter((d) => d.group === "task-projection")
        .map((d) => d.status) ?? [];
    expect(statuses[0]).toBe("applied");
    expect(statuses.slice(1).every((s) => s === "duplicate")).toBe(true);
    const [row] = await env.store.inboxRecords("task-projection", [eventId]);
    expect(row?.outcome).toBe("applied");
  });
});
