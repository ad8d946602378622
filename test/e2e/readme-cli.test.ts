import { execFile, execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { DEV_TOKEN_CLAIMS } from "../../lib/dev/local/front-door";
import { emulator } from "../support/aws";
import { runCli } from "../support/cli";
import { messageOutcome } from "../support/outcomes";

const execFileAsync = promisify(execFile);
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
const curlBlock =
  /<!-- curl-example:start -->\n```sh\n([\s\S]*?)```\n<!-- curl-example:end -->/.exec(README)?.[1];
const streamBlock =
  /<!-- curl-stream-example:start -->\n```sh\n([\s\S]*?)```\n<!-- curl-stream-example:end -->/.exec(
    README,
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
  /** What the README's curl example posted (its 202 answer). */
  let posted: { conversation_id: string; task_id: string } | undefined;

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

  it("sends a message over HTTP with curl: 202 with the task, the same answer again, then the reply", async () => {
    const frontDoor = env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    // The development token npm start prints.
    const token = await frontDoor.issuer.token(DEV_TOKEN_CLAIMS);
    const port = new URL(frontDoor.url).port;
    // Asynchronously: the front door answers from this process, which must not block on curl.
    const curl = async () => {
      const script = (curlBlock ?? "").replaceAll("127.0.0.1:8631", `127.0.0.1:${port}`);
      const { stdout } = await execFileAsync("bash", ["-euo", "pipefail", "-c", script], {
        cwd: dir,
        encoding: "utf8",
        env: { ...process.env, TOKEN: token },
        timeout: 30_000,
      });
      return stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    };
    expect(curlBlock, "README has a curl-example block").toBeDefined();
    const [accepted] = await curl();
    expect(accepted).toMatchObject({ task_id: expect.stringMatching(/^task_/) });
    posted = accepted as { conversation_id: string; task_id: string };
    const deadline = Date.now() + 120_000;
    let turns: { task_id: string; status: string; reply_text?: string }[] = [];
    while (Date.now() < deadline) {
      const [again, conversation] = await curl();
      expect(again).toEqual(accepted);
      turns = (conversation as { turns?: typeof turns }).turns ?? [];
      if (turns[0]?.status === "delivered") break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(turns).toEqual([
      expect.objectContaining({ task_id: accepted?.task_id, status: "delivered" }),
    ]);
    // The example asks about order 123, and the token's customer has it: the reply tells of it.
    expect(turns[0]?.reply_text).toMatch(/Order 123 \(/);
    expect(turns[0]?.reply_text).not.toMatch(/could not find/i);

    // The stream block, stopped after three seconds (as Ctrl-C would): the delivered turn.
    expect(streamBlock, "README has a curl-stream-example block").toBeDefined();
    const streamed = await execFileAsync(
      "bash",
      [
        "-euo",
        "pipefail",
        "-c",
        (streamBlock ?? "").replaceAll("127.0.0.1:8631", `127.0.0.1:${port}`),
      ],
      { cwd: dir, encoding: "utf8", env: { ...process.env, TOKEN: token }, timeout: 3_000 },
    ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
    const event = /^event: conversation\ndata: (.*)$/m.exec(streamed.stdout)?.[1];
    expect(JSON.parse(event ?? "{}")).toMatchObject({
      turns: [expect.objectContaining({ task_id: accepted?.task_id, status: "delivered" })],
    });
  }, 180_000);

  it("traces the conversation by the id the HTTP client used, with its tenant; without, says to give it", async () => {
    if (!posted) throw new Error("the curl example posted nothing");
    const trace = (...args: string[]) =>
      runCli([
        "--endpoint",
        env.endpoint,
        "trace",
        posted?.conversation_id ?? "",
        "--json",
        ...args,
      ]);
    const found = await trace("--tenant", DEV_TOKEN_CLAIMS.tenant_id);
    expect(found.code, found.stderr).toBe(0);
    expect(found.stdout).toContain(posted.task_id);
    const unnamed = await trace();
    expect(unnamed.code).toBe(1);
    expect(unnamed.stderr).toContain("--tenant");
  }, 180_000);
});
