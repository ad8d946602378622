import { execFile, execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { hasConversation, runConversationScenario } from "../../lib/dev/local/conversation";
import { emulatorConfig } from "../../lib/dev/local/deploy";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { readDeadLetters } from "../../lib/dev/local/scenario/dead-letters";
import {
  hasContentWorkflow,
  startWorkflow,
  type WorkflowRun,
  waitForRunEnd,
} from "../../lib/dev/local/scenario/workflow";
import { startConsole } from "../../lib/operator/console/server";
import { opsSource } from "../../lib/operator/source";
import { connect } from "../../lib/operator/stack";
import type { TraceNode, TraceView } from "../../lib/operator/views";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS } from "../support/browser";
import { runCli } from "../support/cli";

const ROOT = join(import.meta.dirname, "..", "..");
const README = readFileSync(join(ROOT, "README.md"), "utf8");
const STAGE = `ops-${Date.now().toString(36)}`;
const execFileAsync = promisify(execFile);
const jq = spawnSync("jq", ["--version"], { stdio: "ignore" }).status === 0;
if (!jq) console.warn("ops.test.ts: the `| jq .` check is skipped: jq is not installed");
if (!haveChromium) console.warn(`ops.test.ts: the console part is skipped: ${NO_CHROMIUM}`);

/**
 * The operator's views of the local stack after the reference conversation and a workflow run:
 * `agentbus trace | status | dlq` as child processes (with `--endpoint`, and with `--outputs`),
 * and the console page in Chromium.
 */
describe("operator views of the local stack", () => {
  let env: LocalEnvironment;
  let dir: string;
  let second: Envelope;
  let poison: Envelope;
  let run: Omit<WorkflowRun, "state"> & { state: OrchestratorState };

  const cli = (args: string[], extraEnv: Record<string, string> = {}) =>
    runCli(["--region", env.region, ...args], extraEnv);
  const local = (...args: string[]) => cli(["--endpoint", env.endpoint, "--stage", STAGE, ...args]);

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
    dir = mkdtempSync(join(tmpdir(), "agentbus-ops-"));
    if (!hasConversation(env) || !hasContentWorkflow(env))
      throw new Error("the project topology lacks the support or content-production groups");
    const conversation = await runConversationScenario(env);
    const quick = conversation.cases.find((c) => c.label === "quick succession");
    second = quick?.messages[1] as Envelope;
    const started = await startWorkflow(env, "quick news", "quick-news", "ops console");
    run = { ...started, state: await waitForRunEnd(env, started.runId, 60_000) };
    await env.runtime.idle();
    const letters = await readDeadLetters(env);
    const poisonId = letters.find((d) => d.code === "envelope.invalid_payload")?.eventId;
    poison = { event_id: poisonId ?? "" } as Envelope;
    if (!poisonId) throw new Error("the conversation scenario left no poison message");
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("traces a conversation's second message: the client message, the superseded first reply, one delivery", async () => {
    const result = await local("trace", second.event_id);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const text = result.stdout;
    const [tree, moot] = text.split("made moot by this trace");
    expect(tree).toMatch(
      new RegExp(
        `^conversation\\.message\\.received \\[unsequenced\\] ${second.event_id} by `,
        "m",
      ),
    );
    expect(tree?.match(/notification\.delivered \[/g)).toHaveLength(1);
    expect(tree).toContain(`side effect ${second.task_id}:reply:1: succeeded, 1 attempt(s)`);
    expect(moot).toMatch(/notification\.send\.requested [^\n]+\n\s+sender: discarded: superseded/);
  }, 240_000);

  it("traces the poison message: dead-lettered with its reason", async () => {
    const result = await local("trace", poison.event_id);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /audit: dead-lettered after 1 receive\(s\): envelope\.invalid_payload/,
    );
    expect(result.stdout).toContain("in the dead-letter queue of audit");
    // The conversation group's dispatcher dead-lettered it too, before its queue.
    expect(result.stdout).toMatch(
      /conversation: dead-lettered after 1 receive\(s\): envelope\.invalid_payload/,
    );
  }, 240_000);

  it("traces a workflow run: every node's command and its outcome, in causal order", async () => {
    const result = await local("trace", run.correlationId, "--json");
    expect(result.code).toBe(0);
    const view = JSON.parse(result.stdout) as TraceView;
    const seen: string[] = [];
    const walk = (n: TraceNode) => {
      const groups = n.outcomes.map((o) => `${o.group}=${o.outcome}`).join(",");
      seen.push(`${n.event.eventType} ${groups}`);
      for (const c of n.children) walk(c);
    };
    for (const r of view.roots) walk(r);
    expect(seen[0]).toBe("workflow.start.requested audit=applied,orchestrator=applied");
    // Node ids are the roles (fact-check); their event types use underscores (fact_check.*). The
    // stored events are the event store's record: the audit group keeps only unsequenced ones.
    for (const [node, { state }] of Object.entries(run.state.run.nodes)) {
      expect(state).toBe("COMPLETED");
      const type = node.replace(/-/g, "_");
      expect(seen).toContain(`${type}.requested ${node}=applied`);
      expect(seen).toContain(`${type}.completed orchestrator=applied`);
    }
    expect(seen).toContain("workflow.completed ");
  }, 240_000);

  it.skipIf(!jq)(
    "`npx agentbus --outputs <file> trace <id> --json | jq .`: JSON alone on stdout, messages on stderr",
    async () => {
      const file = join(dir, "outputs-for-jq.json");
      writeFileSync(file, JSON.stringify({ [`AgentBus-${STAGE}`]: env.deployment.outputs }));
      const script = 'npx agentbus --outputs "$OUTPUTS" trace "$ID" --json | jq .';
      const { stdout, stderr } = await execFileAsync("bash", ["-euo", "pipefail", "-c", script], {
        cwd: ROOT,
        env: {
          ...process.env,
          OUTPUTS: file,
          ID: run.correlationId,
          AWS_ENDPOINT_URL: env.endpoint,
          AWS_REGION: env.region,
          AWS_ACCESS_KEY_ID: "testing",
          AWS_SECRET_ACCESS_KEY: "testing",
        },
      });
      const view = JSON.parse(stdout) as TraceView;
      expect(view.roots[0]?.event.eventType).toBe("workflow.start.requested");
      expect(stderr).toContain(`agentbus: region ${env.region} (from `);
    },
    240_000,
  );

  it("shows status and the dead letters; the same commands work with --outputs", async () => {
    const status = await local("status");
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^ {2}audit +0 +0 +- +1 /m);
    expect(status.stdout).toContain("runs: 1 COMPLETED");
    const dlq = await local("dlq", "show", "audit");
    expect(dlq.code).toBe(0);
    expect(dlq.stdout).toMatch(
      new RegExp(
        `audit +queue +${poison.event_id} +conversation\\.message\\.received .*envelope\\.invalid_payload +1 `,
      ),
    );
    const file = join(dir, "outputs.json");
    writeFileSync(file, JSON.stringify({ [`AgentBus-${STAGE}`]: env.deployment.outputs }));
    const viaOutputs = await cli(["--outputs", file, "dlq", "list"], {
      AWS_ENDPOINT_URL: env.endpoint,
    });
    expect(viaOutputs.code).toBe(0);
    expect(viaOutputs.stdout).toContain(poison.event_id);
    const traced = await cli(["--outputs", file, "trace", second.event_id], {
      AWS_ENDPOINT_URL: env.endpoint,
    });
    expect(traced.stdout).toContain("sender: discarded: superseded");
  }, 240_000);

  it("runs the README's operator commands as written (the stage set by AGENTBUS_STAGE)", () => {
    const block = /<!-- ops-example:start -->\n```sh\n([\s\S]*?)```\n<!-- ops-example:end -->/.exec(
      README,
    )?.[1];
    expect(block, "README has an ops-example block").toBeDefined();
    const script = (block ?? "").replaceAll("http://127.0.0.1:4566", env.endpoint);
    const output = execFileSync("bash", ["-euo", "pipefail", "-c", script], {
      cwd: ROOT,
      encoding: "utf8",
      env: {
        ...process.env,
        AGENTBUS_STAGE: STAGE,
        AWS_ACCESS_KEY_ID: "testing",
        AWS_SECRET_ACCESS_KEY: "testing",
      },
    });
    expect(output).toContain("consumer groups");
    expect(output).toContain("runs: 1 COMPLETED");
    // dlq list shows the poison in the audit queue's DLQ and the conversation buffer's DLQ.
    expect(output).toMatch(new RegExp(`audit +queue +${poison.event_id} `));
    expect(output).toMatch(new RegExp(`conversation +buffer +${poison.event_id} `));
  }, 240_000);

  it("refuses bad input with exit code 2", async () => {
    const badId = await local("trace", "not an id!");
    expect(badId.code).toBe(2);
    expect(badId.stderr).toContain("is not an id");
    const badGroup = await local("dlq", "show", "no-such-group");
    expect(badGroup.code).toBe(2);
    expect(badGroup.stderr).toContain("no consumer group no-such-group");
    const unknown = await local("trace", "corr_nothing-here");
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("nothing is recorded under corr_nothing-here");
  }, 240_000);

  it.skipIf(!haveChromium)(
    "the console page in Chromium draws the run's DAG with every node COMPLETED and a trace with its outcomes",
    async () => {
      await mkdir(SCREENSHOTS, { recursive: true });
      const config = emulatorConfig(env.endpoint, env.region);
      const stack = connect(config, `AgentBus-${STAGE}`, env.deployment.outputs);
      const server = await startConsole({ source: opsSource(stack) });
      const browser = await launchChromium();
      try {
        const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
        await page.goto(new URL(`/runs/${run.runId}`, server.url).href);
        for (const node of Object.keys(run.state.run.nodes)) {
          const g = page.locator(`svg g[data-node-id="${node}"]`);
          expect(await g.getAttribute("data-state")).toBe("COMPLETED");
          expect(await g.textContent()).toContain(node);
        }
        await page.screenshot({ path: join(SCREENSHOTS, "local-run.png"), fullPage: true });
        await page.goto(new URL(`/trace?id=${second.event_id}`, server.url).href);
        const moot = page.locator(".related li[data-group='sender'][data-outcome='discarded']");
        expect(await moot.getAttribute("data-reason")).toBe("superseded");
        const root = page.locator(`li[data-event-id="${second.event_id}"]`).first();
        expect(await root.getAttribute("data-event-type")).toBe("conversation.message.received");
        await page.screenshot({ path: join(SCREENSHOTS, "local-trace.png"), fullPage: true });
        await page.goto(new URL("/", server.url).href);
        // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a person sees
        expect(await page.locator("body").innerText()).toContain(run.runId);
        await page.screenshot({ path: join(SCREENSHOTS, "local-overview.png"), fullPage: true });
      } finally {
        await browser.close();
        await server.close();
        stack.close();
      }
    },
    240_000,
  );
});
