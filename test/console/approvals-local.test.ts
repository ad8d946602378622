import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import { REFUND_REVIEW_DECISION } from "../../functions/roles/refund-review/events";
import { RAMBLE_AFTER_REFUND_MARKER } from "../../functions/roles/refund-review/local-script";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { streamOf, waitUntil } from "../../lib/dev/local/scenario/customer-support";
import {
  agentRunOf,
  askForRefund,
  refundableOrder,
  runReaches,
} from "../../lib/dev/local/scenario/refund";
import { opsActions } from "../../lib/operator/actions";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import { opsSource } from "../../lib/operator/source";
import { emulator } from "../support/aws";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS, seen } from "../support/browser";

/**
 * Refunds awaiting approval, decided from the console's overview in Chromium on the local stack
 * (refunds above 100.00 wait; payments go to a stand-in the test counts): one is approved with
 * the page's button and made exactly once, one is rejected with a reason and never made, and a
 * decision sent from a page opened before those (the run no longer waits) is reported or refused
 * and changes nothing. A refund whose outcome could not be learnt (NEEDS_HUMAN) is resolved as
 * applied with the receipt typed in the page, and not made again. A review handed over for good
 * after its refund (its model rambles instead of answering) is answered in the page: an answer
 * that is not JSON or does not fit is refused there and nothing is sent; the right one ends the
 * run and the customer is told.
 */

const STAGE = `cp${ulid().slice(-6).toLowerCase()}`;
// As the support e2e files wait (test/e2e/support-stack.ts): the suite runs files side by side.
const TIMEOUT = 120_000;
const OPERATOR = "console_olga";

if (!haveChromium) console.warn(`approvals-local.test.ts skipped: ${NO_CHROMIUM}`);

describe.skipIf(!haveChromium)("refund approvals from the console (Chromium, local stack)", () => {
  const payments = new LocalPayments();
  let env: LocalEnvironment;
  let server: RunningConsole;
  let browser: Browser;
  let page: Page;
  /** Pages opened while both runs waited, to send a decision after they no longer do. */
  const stale: Page[] = [];
  const runs = { approved: "", rejected: "", unknown: "", answered: "" };
  const orders = { approved: "", rejected: "", unknown: "", answered: "" };
  const operatorBefore = process.env.AGENTBUS_OPERATOR;

  const newOrder = (totalCents: number) =>
    refundableOrder(env, totalCents, { item: "Standing desk" });
  const askFor = (orderId: string, question?: string) => askForRefund(env, orderId, question);
  const journalOf = (runId: string) => agentRunOf(env, runId);
  const reaches = (runId: string, status: string) => runReaches(env, runId, status, TIMEOUT);
  const refundsOf = (orderId: string) => payments.refundsByOrder().get(orderId) ?? 0;
  const decisionsOf = (runId: string) =>
    [...env.observations.envelopes.values()].filter(
      (e) =>
        e.event_type === REFUND_REVIEW_DECISION &&
        (e.payload as { run_id?: string }).run_id === runId,
    );
  const open = async (on: Page, path: string) =>
    (await on.goto(new URL(path, server.url).href))?.status() ?? 0;
  /** The overview's details of what run `runId` waits for. */
  const waitOf = (on: Page, runId: string) => on.locator(`div[data-agent-run="${runId}"]`);
  /** Submit a form by one of its buttons and wait for the page the console sends back. */
  const submit = async (on: Page, button: Locator) => {
    await Promise.all([on.waitForURL(/[?&]flash=/), button.click()]);
    return seen(on.locator("[data-flash]"));
  };

  beforeAll(async () => {
    process.env.AGENTBUS_OPERATOR = OPERATOR;
    await mkdir(SCREENSHOTS, { recursive: true });
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: STAGE,
      payments,
      envOverrides: { REFUND_APPROVAL_ABOVE_CENTS: "10000" },
    });
    orders.approved = await newOrder(20_000);
    orders.rejected = await newOrder(35_000);
    orders.unknown = await newOrder(4_999);
    orders.answered = await newOrder(4_200);
    // The first refund made (the one under the threshold; the others wait) times out after it
    // applied, and no query can tell: the run is handed to a person.
    payments.failNext("timeout_after", ...Array<"query_unknown">(5).fill("query_unknown"));
    runs.approved = await askFor(orders.approved);
    runs.rejected = await askFor(orders.rejected);
    runs.unknown = await askFor(orders.unknown);
    // Its refund is made once the unknown one has taken the payment system's faults; then its
    // model answers in prose three turns in a row, and the run waits for a person's answer.
    const handedOver = async () => {
      await reaches(runs.unknown, "NEEDS_HUMAN");
      const question = `Please refund order ${orders.answered} ${RAMBLE_AFTER_REFUND_MARKER}`;
      runs.answered = await askFor(orders.answered, question);
      return reaches(runs.answered, "NEEDS_HUMAN");
    };
    await Promise.all([
      reaches(runs.approved, "BLOCKED"),
      reaches(runs.rejected, "BLOCKED"),
      handedOver(),
    ]);
    await env.runtime.idle({ timeoutMs: TIMEOUT });
    server = await startConsole({ source: opsSource(env.ops), actions: opsActions(env.ops) });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  }, 480_000);

  afterAll(async () => {
    if (operatorBefore === undefined) delete process.env.AGENTBUS_OPERATOR;
    else process.env.AGENTBUS_OPERATOR = operatorBefore;
    await browser?.close();
    await server?.close();
    await env?.stop();
  });

  it("lists both refunds awaiting approval with the proposed call and its input", async () => {
    expect(await open(page, "/")).toBe(200);
    const card = page.locator('[data-waiting="awaiting-approval"]');
    expect(await card.getAttribute("data-count")).toBe("2");
    for (const which of ["approved", "rejected"] as const) {
      const wait = waitOf(page, runs[which]);
      expect(await seen(wait)).toMatch(/^Proposed: issue_refund \(call call_2_1\)/);
      const input = JSON.parse(await seen(wait.locator("pre[data-tool-input]")));
      expect(input).toMatchObject({
        order_id: orders[which],
        amount_cents: which === "approved" ? 20_000 : 35_000,
      });
    }
    expect(refundsOf(orders.approved) + refundsOf(orders.rejected)).toBe(0);
    await page.screenshot({
      path: join(SCREENSHOTS, "local-overview-approvals.png"),
      fullPage: true,
    });
    for (let i = 0; i < 2; i++) {
      const opened = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
      expect(await open(opened, "/")).toBe(200);
      stale.push(opened);
    }
  });

  it(
    "approves a refund with the page's button: the run completes with exactly one refund",
    async () => {
      const wait = waitOf(page, runs.approved);
      await wait.locator('input[name="reason"]').fill("checked the order");
      const flash = await submit(
        page,
        wait.getByRole("button", { name: "Approve: the call runs" }),
      );
      const sent =
        /^Sent: refund_review\.decision\.requested sent to agentbus-\w+-commands \(event id (\w{26})\)$/.exec(
          flash,
        );
      expect(sent, flash).not.toBeNull();
      const done = await reaches(runs.approved, "COMPLETED");
      expect(done.window.some((s) => s.outcome === `approve by ${OPERATOR}`)).toBe(true);
      const [command] = decisionsOf(runs.approved);
      expect(command?.event_id).toBe(sent?.[1]);
      expect(command?.payload).toMatchObject({
        tool_call_id: "call_2_1",
        decision: "approve",
        requested_by: OPERATOR,
        reason: "checked the order",
      });
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      expect(refundsOf(orders.approved)).toBe(1);
      await open(page, "/");
      expect(await waitOf(page, runs.approved).count()).toBe(0);
    },
    TIMEOUT * 2,
  );

  it(
    "rejects the other with a reason: no refund is made and the review says why",
    async () => {
      const wait = waitOf(page, runs.rejected);
      await wait.locator('input[name="reason"]').fill("outside policy");
      const flash = await submit(page, wait.getByRole("button", { name: /^Reject/ }));
      expect(flash).toMatch(/^Sent: refund_review\.decision\.requested sent to /);
      const done = await reaches(runs.rejected, "COMPLETED");
      expect(done.window.some((s) => s.outcome === `reject by ${OPERATOR}`)).toBe(true);
      const rejected = (
        await streamOf(env, { type: AGENT_RUN_AGGREGATE, id: runs.rejected })
      ).filter((e) => e.event_type === "refund.rejected");
      expect(rejected.map((e) => e.payload)).toEqual([
        expect.objectContaining({
          order_id: orders.rejected,
          reason: expect.stringContaining("outside policy"),
        }),
      ]);
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      expect(refundsOf(orders.rejected)).toBe(0);
      await open(page, "/");
      const card = page.locator('[data-waiting="awaiting-approval"]');
      expect(await card.getAttribute("data-count")).toBe("0");
    },
    TIMEOUT * 2,
  );

  it(
    "a decision on a run that no longer waits is reported or refused, and changes nothing",
    async () => {
      const [againPage, latePage] = stale;
      if (!againPage || !latePage) throw new Error("the first test opened the stale pages");
      const journals = await Promise.all([journalOf(runs.approved), journalOf(runs.rejected)]);
      const approve = (on: Page, runId: string) =>
        submit(on, waitOf(on, runId).getByRole("button", { name: "Approve: the call runs" }));
      expect(await approve(againPage, runs.approved)).toBe(
        `Nothing to do: call_2_1 of ${runs.approved} was already decided: approve by ${OPERATOR}; nothing sent`,
      );
      expect(await approve(latePage, runs.rejected)).toBe(
        `Refused: call_2_1 of ${runs.rejected} was already decided: reject by ${OPERATOR}; nothing sent`,
      );
      await latePage.screenshot({
        path: join(SCREENSHOTS, "local-overview-approval-refused.png"),
        fullPage: true,
      });
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      expect(decisionsOf(runs.approved)).toHaveLength(1);
      expect(decisionsOf(runs.rejected)).toHaveLength(1);
      expect(await Promise.all([journalOf(runs.approved), journalOf(runs.rejected)])).toEqual(
        journals,
      );
      expect([refundsOf(orders.approved), refundsOf(orders.rejected)]).toEqual([1, 0]);
    },
    TIMEOUT,
  );

  it(
    "resolves a refund whose outcome could not be learnt as applied, with the receipt typed in the page",
    async () => {
      expect(refundsOf(orders.unknown)).toBe(1);
      expect(await open(page, "/")).toBe(200);
      const wait = page.locator(
        `[data-waiting="needs-human"] div[data-agent-run="${runs.unknown}"]`,
      );
      const key = `${(await journalOf(runs.unknown))?.task_id}:${runs.unknown}:2:call_2_1`;
      expect(await seen(wait)).toContain(`key ${key}`);
      const record = page.locator(`[data-side-effect-key="${key}"]`);
      expect(await seen(record)).toContain(`resolve it on agent run ${runs.unknown} (NEEDS_HUMAN)`);
      await wait.locator("summary").click();
      const receipt = await payments.refundOf(orders.unknown);
      await wait.locator('textarea[name="output"]').fill(JSON.stringify(receipt, null, 2));
      await wait.locator('input[name="reason"]').fill("seen at the provider");
      await page.screenshot({
        path: join(SCREENSHOTS, "local-overview-unknown-refund.png"),
        fullPage: true,
      });
      const flash = await submit(
        page,
        wait.getByRole("button", { name: "Applied, with this output" }),
      );
      expect(flash).toMatch(/^Sent: refund_review\.decision\.requested sent to /);
      const done = await reaches(runs.unknown, "COMPLETED");
      expect(done.window.some((s) => s.outcome === `applied by ${OPERATOR}`)).toBe(true);
      const approved = (
        await streamOf(env, { type: AGENT_RUN_AGGREGATE, id: runs.unknown })
      ).filter((e) => e.event_type === "refund.approved");
      expect(approved.map((e) => e.payload)).toEqual([
        expect.objectContaining({ order_id: orders.unknown, amount_cents: 4_999 }),
      ]);
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      expect(refundsOf(orders.unknown)).toBe(1);
    },
    TIMEOUT * 2,
  );

  it(
    "answers a review handed over for good: a bad answer is refused in the page, the right one ends the run and the customer is told",
    async () => {
      expect(await open(page, "/")).toBe(200);
      const wait = page.locator(
        `[data-waiting="needs-human"] div[data-agent-run="${runs.answered}"]`,
      );
      expect(await wait.getAttribute("data-wait")).toBe("answer");
      expect(await seen(wait)).toContain("Handed over: the run waits for a person's answer");
      /** Open the form, type `output`, send it; what the page then says. */
      const answerWith = async (output: string, reason = "") => {
        await wait.locator("summary").click();
        await wait.locator('textarea[name="output"]').fill(output);
        await wait.locator('input[name="reason"]').fill(reason);
        return submit(page, wait.getByRole("button", { name: "Answer: the run ends with it" }));
      };
      await wait.locator("summary").click();
      const shape = JSON.parse(await seen(wait.locator("pre[data-answer-example]")));
      expect(Object.keys(shape).sort()).toEqual([
        "amount_cents",
        "decision",
        "reason",
        "refund_id",
      ]);
      await wait.locator("summary").click();

      expect(await answerWith("{decision: approved}")).toMatch(
        /^Refused: the answer is not JSON \(.+\); nothing sent$/,
      );
      expect(await answerWith('{"decision": "refunded", "reason": ""}')).toMatch(
        new RegExp(
          `^Refused: run ${runs.answered}: a person's answer must fit the agent's answer: decision: .+; reason: .+; nothing sent$`,
        ),
      );
      await wait.locator("summary").click();
      await wait.screenshot({ path: join(SCREENSHOTS, "local-overview-answer.png") });
      await page.screenshot({
        path: join(SCREENSHOTS, "local-overview-answer-refused.png"),
        fullPage: true,
      });
      await wait.locator("summary").click();
      expect(decisionsOf(runs.answered)).toEqual([]);
      expect((await journalOf(runs.answered))?.status).toBe("NEEDS_HUMAN");

      const receipt = await payments.refundOf(orders.answered);
      const answer = {
        decision: "approved",
        reason: "Your refund has been issued.",
        amount_cents: receipt?.amount_cents,
        refund_id: receipt?.refund_id,
      };
      const flash = await answerWith(JSON.stringify(answer, null, 2), "checked the payment system");
      expect(flash).toMatch(/^Sent: refund_review\.decision\.requested sent to /);
      const done = await reaches(runs.answered, "COMPLETED");
      expect(done.output).toEqual(answer);
      expect(done.window.at(-1)?.outcome).toBe(`answer by ${OPERATOR}`);
      const [command] = decisionsOf(runs.answered);
      expect(command?.payload).toEqual(
        expect.objectContaining({
          decision: "answer",
          output: answer,
          requested_by: OPERATOR,
          reason: "checked the payment system",
        }),
      );
      expect(command?.payload).not.toHaveProperty("tool_call_id");
      const delivered = await waitUntil(
        "the reply once a person answered",
        () =>
          env.channel.deliveries().find((d) => d.conversationId === done.subject.conversation_id),
        TIMEOUT,
      );
      expect(delivered.text).toContain("Your refund has been issued.");
      await env.runtime.idle({ timeoutMs: TIMEOUT });
      expect(refundsOf(orders.answered)).toBe(1);
      await open(page, "/");
      expect(await waitOf(page, runs.answered).count()).toBe(0);
    },
    TIMEOUT * 2,
  );
});
