import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { emulator } from "../support/aws";
import { messageOutcome } from "../support/outcomes";

const ROOT = join(import.meta.dirname, "..", "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
/** The support conversation's example lives beside the roles it drives. */
const ROLES_README = readFileSync(join(ROOT, "functions", "roles", "README.md"), "utf8");
const block = /<!-- cli-example:start -->\n```sh\n([\s\S]*?)```\n<!-- cli-example:end -->/.exec(
  README,
)?.[1];
const conversationBlock =
  /<!-- cli-conversation:start -->\n```sh\n([\s\S]*?)```\n<!-- cli-conversation:end -->/.exec(
    ROLES_README,
  )?.[1];
const viewBlock =
  /<!-- cli-conversation-view:start -->\n```sh\n([\s\S]*?)```\n<!-- cli-conversation-view:end -->/.exec(
    ROLES_README,
  )?.[1];
const awsCli = spawnSync("aws", ["--version"], { stdio: "ignore" }).status === 0;
if (!awsCli)
  console.warn("README AWS CLI example skipped: the `aws` command (AWS CLI) is not installed here");

/**
 * The READMEs' AWS CLI examples (the top-level README's feedback, functions/roles/README.md's
 * customer message and conversation view), run as written against the local stack (only the
 * port differs).
 */
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

  /** Run a README block as written, against this run's emulator endpoint instead of 4566. */
  const shell = (text: string | undefined, what: string): string => {
    expect(text, `README has a ${what} block`).toBeDefined();
    const script = (text ?? "").replaceAll("http://127.0.0.1:4566", env.endpoint);
    return execFileSync("bash", ["-euo", "pipefail", "-c", script], {
      cwd: dir,
      encoding: "utf8",
    });
  };
  const run = () => JSON.parse(shell(block, "cli-example")) as { FailedEntryCount: number };

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
    const outcome = await messageOutcome(env.store, "task-projection", eventId);
    expect(outcome?.outcome).toBe("applied");
  });

  it("drives a conversation: the customer's message gets one reply, which the view shows", async () => {
    const sent = JSON.parse(shell(conversationBlock, "cli-conversation")) as {
      FailedEntryCount: number;
    };
    expect(sent.FailedEntryCount).toBe(0);
    const conversationId = /\\"conversation_id\\":\\"(conv_[0-9A-Z]{26})\\"/.exec(
      conversationBlock ?? "",
    )?.[1];
    expect(conversationId).toBeDefined();
    const deadline = Date.now() + 120_000;
    while (
      !env.channel.deliveries().some((d) => d.conversationId === conversationId) &&
      Date.now() < deadline
    )
      await new Promise((r) => setTimeout(r, 250));
    const deliveries = env.channel.deliveries().filter((d) => d.conversationId === conversationId);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]?.recipient).toBe("cust_alice");
    expect(deliveries[0]?.text).toContain("123");
    await env.runtime.idle({ quietMs: 500 });

    // The view block runs in the terminal the message was sent from: with its exports.
    const exports = (conversationBlock ?? "").split("\n").filter((l) => l.startsWith("export "));
    const view = shell(viewBlock && [...exports, viewBlock].join("\n"), "cli-conversation-view");
    expect(view).toContain('"delivered"');
    expect(view).toContain("Order 123");
  }, 180_000);
});
