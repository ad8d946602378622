import { mkdir } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UNUSABLE_DRAFT_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  loadConversation,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import {
  hasContentWorkflow,
  loadRun,
  startWorkflow,
  waitForRunEnd,
} from "../../lib/dev/local/scenario/workflow";
import { opsActions } from "../../lib/operator/actions";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import { listDeadLetters } from "../../lib/operator/dead-letters";
import { opsSource } from "../../lib/operator/source";
import type { Envelope } from "../../schemas";
import { auditedOutcomes } from "../support/audit";
import { emulator } from "../support/aws";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS, seen } from "../support/browser";

/**
 * The console's actions on the local stack, in Chromium: a quick-news run whose writer never
 * answers in shape ends PARTIAL with `writing` FAILED; on the run page a POST without the form
 * token is refused (403), an output that is not JSON or does not fit the writer is refused with
 * the CLI's words, and nothing changes; a fitting output resolves the node and the run completes.
 * A held reply is approved with an edited text from the overview, and a poison message is
 * redriven from the dead-letters page (recorded in the audit trail).
 */

const STAGE = `ca${ulid().slice(-6).toLowerCase()}`;
const TIMEOUT = 120_000;
const OPERATOR = "console_carol";
const DRAFT = { title: "Tides in estuaries", body: "Written by hand in the console." };

if (!haveChromium) console.warn(`actions-local.test.ts skipped: ${NO_CHROMIUM}`);

function rawPost(url: string, path: string, body: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      new URL(path, url),
      {
        method: "POST",
        agent: false,
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe.skipIf(!haveChromium)("the console's actions on the local stack (Chromium)", () => {
  let env: LocalEnvironment;
  let server: RunningConsole;
  let browser: Browser;
  let page: Page;
  let runId: string;
  let held: Envelope;
  let poison: Envelope;
  const operatorBefore = process.env.AGENTBUS_OPERATOR;

  const commandsSeen = (type: string) =>
    [...env.observations.envelopes.values()].filter(
      (e) => e.event_type === type && (e.payload as { run_id?: string }).run_id === runId,
    );
  const open = async (path: string) =>
    (await page.goto(new URL(path, server.url).href))?.status() ?? 0;
  /** Submit a form by one of its buttons and wait for the page the console sends back. */
  const submit = async (button: Locator) => {
    await Promise.all([page.waitForURL(/[?&]flash=/), button.click()]);
    return seen(page.locator("[data-flash]"));
  };

  beforeAll(async () => {
    process.env.AGENTBUS_OPERATOR = OPERATOR;
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
    if (!hasContentWorkflow(env)) throw new Error("the project topology lacks the content groups");
    const run = await startWorkflow(env, "console", "quick-news", `tides ${UNUSABLE_DRAFT_MARKER}`);
    runId = run.runId;
    held = customerMessage(`conv_${ulid()}`, "cust_alice", `Refund twice? ${HUMAN_REVIEW_MARKER}`);
    poison = customerMessage(`conv_${ulid()}`, "cust_dave", "hello");
    (poison.payload as { customer_id: string }).customer_id = "user_13800138000";
    await putOnBus(env, "events", [held, poison]);
    const partial = await waitForRunEnd(env, runId, TIMEOUT);
    expect(partial.run.nodes.writing?.state).toBe("FAILED");
    await waitUntil(
      "the held reply and the poison in audit's dead-letter queue",
      async () => {
        const turn = (await loadConversation(env, held.conversation_id as string))?.turns[
          held.task_id
        ];
        const letters = await listDeadLetters(env.ops, { group: "audit" });
        return turn?.status === "held_for_review" &&
          letters.some((d) => d.eventId === poison.event_id)
          ? true
          : undefined;
      },
      TIMEOUT,
    );
    await env.runtime.idle({ timeoutMs: TIMEOUT });
    server = await startConsole({ source: opsSource(env.ops), actions: opsActions(env.ops) });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  }, 300_000);

  afterAll(async () => {
    if (operatorBefore === undefined) delete process.env.AGENTBUS_OPERATOR;
    else process.env.AGENTBUS_OPERATOR = operatorBefore;
    await browser?.close();
    await server?.close();
    await env?.stop();
  });

  it("refuses a POST without the form token or from another origin (403): nothing sent", async () => {
    const before = await loadRun(env, runId);
    const host = new URL(server.url).host;
    const body = new URLSearchParams({ node: "writing", reason: "no token" }).toString();
    const noToken = await rawPost(server.url, `/runs/${runId}/reset`, body);
    expect(noToken.status).toBe(403);
    expect(noToken.body).toContain("The form&#39;s token is missing");
    // The page's own token, sent from another origin.
    expect(await open(`/runs/${runId}`)).toBe(200);
    const token = await page.locator('input[name="csrf"]').first().inputValue();
    const withToken = `${body}&csrf=${encodeURIComponent(token)}`;
    const foreign = await rawPost(server.url, `/runs/${runId}/reset`, withToken, {
      origin: "http://attacker.example",
    });
    expect(foreign.status).toBe(403);
    const rebound = await rawPost(server.url, `/runs/${runId}/reset`, withToken, {
      host: `localhost:${host.split(":")[1]}`,
    });
    expect(rebound.status).toBe(403);
    await env.runtime.idle({ timeoutMs: TIMEOUT });
    expect(commandsSeen("workflow.reset.requested")).toEqual([]);
    expect(await loadRun(env, runId)).toEqual(before);
  });

  it("refuses an output that is not JSON or does not fit the writer, and changes nothing", async () => {
    const before = await loadRun(env, runId);
    expect(await open(`/runs/${runId}`)).toBe(200);
    const form = page.locator('form[data-action="resolve"][data-node="writing"]');
    expect(JSON.parse(await form.locator('textarea[name="output"]').inputValue())).toEqual({
      title: "<title>",
      body: "<body>",
    });
    await form.locator('textarea[name="output"]').fill('{"title": "half');
    await form.locator('input[name="reason"]').fill("trying the console");
    const notJson = await submit(form.getByRole("button", { name: "Resolve with this output" }));
    expect(notJson).toMatch(/^Refused: the output is not JSON \(.+\); nothing sent$/);
    const again = page.locator('form[data-action="resolve"][data-node="writing"]');
    await again.locator('textarea[name="output"]').fill('{"title": "x"}');
    await again.locator('input[name="reason"]').fill("trying the console");
    const unfit = await submit(again.getByRole("button", { name: "Resolve with this output" }));
    expect(unfit).toMatch(/does not fit node writing \(role writing\): body: .*; nothing sent$/);
    await page.screenshot({ path: join(SCREENSHOTS, "local-run-refused.png"), fullPage: true });
    await env.runtime.idle({ timeoutMs: TIMEOUT });
    expect(commandsSeen("workflow.resolve.requested")).toEqual([]);
    expect(await loadRun(env, runId)).toEqual(before);
  });

  it(
    "resolves the FAILED node with an output typed in the page: the run completes",
    async () => {
      expect(await open(`/runs/${runId}`)).toBe(200);
      const form = page.locator('form[data-action="resolve"][data-node="writing"]');
      await form.locator('textarea[name="output"]').fill(JSON.stringify(DRAFT, null, 2));
      await form.locator('input[name="reason"]').fill("wrote it by hand");
      const flash = await submit(form.getByRole("button", { name: "Resolve with this output" }));
      const sent =
        /^Sent: workflow\.resolve\.requested sent to agentbus-\w+-commands \(event id (\w{26})\)$/.exec(
          flash,
        );
      expect(sent, flash).not.toBeNull();
      const ended = await waitForRunEnd(env, runId, TIMEOUT, (s) => s.run.status === "COMPLETED");
      expect(ended.run.nodes.writing).toMatchObject({ state: "COMPLETED", output: DRAFT });
      const [command] = commandsSeen("workflow.resolve.requested");
      expect(command?.event_id).toBe(sent?.[1]);
      expect(command?.payload).toMatchObject({
        requested_by: OPERATOR,
        reason: "wrote it by hand",
      });
      await page.reload();
      expect(await seen(page.locator("[data-run-status]"))).toBe("COMPLETED");
      expect(await page.locator('form[data-action="resolve"]').count()).toBe(0);
      await page.screenshot({ path: join(SCREENSHOTS, "local-run-resolved.png"), fullPage: true });
    },
    TIMEOUT * 2,
  );

  it(
    "approves a held reply with an edited text from the overview: delivered once",
    async () => {
      expect(await open("/")).toBe(200);
      const details = page.locator(`details[data-held-task="${held.task_id}"]`);
      await details.locator("summary").click();
      const text = "Your refund was submitted once; a second one is not possible.";
      await details.locator('textarea[name="text"]').fill(text);
      await details.locator('input[name="reason"]').fill("checked the order");
      await page.screenshot({ path: join(SCREENSHOTS, "local-overview-held.png"), fullPage: true });
      const flash = await submit(details.getByRole("button", { name: "Approve and send" }));
      expect(flash).toMatch(/^Sent: reply\.approve\.requested sent to agentbus-\w+-commands /);
      const key = `${held.task_id}:reply:2`;
      await waitUntil(
        "the approved reply delivered",
        () => env.channel.deliveries().find((d) => d.key === key),
        TIMEOUT,
      );
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      const delivered = env.channel
        .deliveries()
        .filter((d) => d.conversationId === held.conversation_id);
      expect(delivered.map((d) => [d.key, d.text])).toEqual([[key, text]]);
      await open("/");
      expect(await page.locator(`details[data-held-task="${held.task_id}"]`).count()).toBe(0);
    },
    TIMEOUT * 2,
  );

  it(
    "redrives a group's dead letters from the dead-letters page, recorded in the audit trail",
    async () => {
      expect(await open("/dead-letters")).toBe(200);
      const form = page.locator(
        'form[data-action="redrive"][data-group="audit"][data-queue="queue"]',
      );
      await form.locator('input[name="reason"]').fill("after the fix");
      const flash = await submit(form.getByRole("button"));
      const recorded =
        /^Sent: audit: moved 1 dead letter\(s\) back to \S+; recorded in the audit trail as operator\.action\.recorded (\w{26})$/.exec(
          flash,
        );
      expect(recorded, flash).not.toBeNull();
      const auditId = recorded?.[1] ?? "";
      await waitUntil(
        "the audit record applied",
        async () => (await auditedOutcomes(env.store, [auditId]))[0]?.outcome === "applied",
        TIMEOUT,
      );
      const record = env.observations.envelopes.get(auditId);
      expect(record?.payload).toMatchObject({
        action: "dlq.redrive",
        target: "audit",
        requested_by: OPERATOR,
        reason: "after the fix",
        outcome: { count: 1, event_ids: [poison.event_id], failed: 0 },
      });
      await page.screenshot({ path: join(SCREENSHOTS, "local-dead-letters.png"), fullPage: true });
    },
    TIMEOUT * 2,
  );

  it(
    "shows quick-news's graph, starts a run from its form (a refusal names the problem), and shows the article",
    async () => {
      expect(await open("/workflows")).toBe(200);
      const row = page.locator('tr[data-workflow="quick-news"]');
      expect(await seen(row)).toContain("given to the stack");
      await Promise.all([
        page.waitForURL("**/workflows/quick-news"),
        row.getByRole("link").click(),
      ]);
      const graph = page.locator('[data-graph="content.quick-news"]');
      for (const id of ["topic-selection", "fact-check", "writing", "review"])
        expect(await graph.locator(`g[data-node-id="${id}"]`).isVisible()).toBe(true);
      expect(await graph.locator("g.edge").count()).toBe(5);
      // Review sends the draft back to writing until it approves: the loop's edge.
      expect(await graph.locator('g.edge[data-loop="true"]').getAttribute("data-from")).toBe(
        "review",
      );
      expect(await seen(page.locator('[data-input-spec="declared"]'))).toContain("topic_hint");

      // The browser asks for the required topic hint itself; without it, the console refuses.
      const form = page.locator('form[data-action="start"]');
      const topic = form.locator('input[name="input.topic_hint"]');
      await topic.evaluate((el) => el.removeAttribute("required"));
      await form.locator('textarea[name="input_json"]').fill('{"audience": "commuters"}');
      const refusal = await submit(form.getByRole("button", { name: "Start a run of quick-news" }));
      expect(refusal).toBe(
        "Refused: the input does not fit quick-news v3: 1 problem(s): topic_hint: required; nothing sent",
      );
      expect(page.url()).toContain("/workflows/quick-news?flash=");

      // The refusal's page is the workflow's again, its form as it was sent, the refusal beside it.
      const again = page.locator('form[data-action="start"]');
      expect(await seen(again.locator("[data-start-refused]"))).toContain("topic_hint: required");
      expect(await again.locator('textarea[name="input_json"]').inputValue()).toBe(
        '{"audience": "commuters"}',
      );
      await again.locator('input[name="input.topic_hint"]').fill("night trains in Europe");
      const sent = await submit(
        page.locator('form[data-action="start"]').getByRole("button", { name: /^Start a run/ }),
      );
      const started = /run (run_\w+) of quick-news v3$/.exec(sent);
      expect(started, sent).not.toBeNull();
      const startedRun = started?.[1] ?? "";
      expect(new URL(page.url()).pathname).toBe(`/runs/${startedRun}`);
      const ended = await waitForRunEnd(env, startedRun, TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.input).toEqual({
        audience: "commuters",
        topic_hint: "night trains in Europe",
      });
      await page.reload();
      expect(await seen(page.locator("[data-run-status]"))).toBe("COMPLETED");
      const article = ended.run.nodes.writing?.output as { title: string; body: string };
      expect(article, JSON.stringify(ended.run.nodes.writing)).toBeDefined();
      const writing = page.locator('[data-node-io="writing"]');
      const shown = JSON.parse(await seen(writing.locator('[data-io="output"]')));
      expect(shown).toEqual(article);
      const review = JSON.parse(
        await seen(page.locator('[data-node-io="review"] [data-io="input"]')),
      );
      expect(review).toMatchObject({ topic_hint: "night trains in Europe", writing: article });
      await page.screenshot({ path: join(SCREENSHOTS, "local-workflow-run.png"), fullPage: true });
    },
    TIMEOUT * 2,
  );
});
