import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS, seen } from "../support/browser";
import {
  CHILD_RUN_ID,
  CORRELATION_ID,
  EVENT_IDS,
  fakeSource,
  parentAndChildRuns,
  RUN_ID,
  TASK_ID,
} from "./fixtures";

if (!haveChromium) {
  console.warn(`browser.test.ts skipped: ${NO_CHROMIUM}`);
}

describe.skipIf(!haveChromium)("the console in Chromium (needs Debian's chromium)", () => {
  let browser: Browser;
  let server: RunningConsole;
  let page: Page;

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    server = await startConsole({ source: fakeSource({ runs: parentAndChildRuns() }) });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function open(path: string): Promise<number> {
    const response = await page.goto(new URL(path, server.url).href);
    return response?.status() ?? 0;
  }

  it("shows the run's DAG: every node's label and state, laid out left to right", async () => {
    expect(await open(`/runs/${RUN_ID}`)).toBe(200);
    const expected = [
      ["topic_selection", "topic-selection", "COMPLETED", "attempt 1 · 2.1 s"],
      ["fact_check", "fact-check", "COMPLETED", "attempt 1 · 4.3 s"],
      ["writing", "writing", "FAILED", "attempt 3 · 45.8 s"],
      ["review", "review", "CANCELLED", "attempt 0 · —"],
    ];
    for (const [id, ...label] of expected) {
      const node = page.locator(`svg g[data-node-id="${id}"]`);
      expect(await node.isVisible()).toBe(true);
      expect(await node.locator("text").allTextContents()).toEqual([id, ...label]);
      expect(await node.getAttribute("data-state")).toBe(label[1]);
    }
    const box = async (id: string) => {
      const b = await page.locator(`g[data-node-id="${id}"] rect`).boundingBox();
      if (!b) throw new Error(`${id} is not drawn`);
      return b;
    };
    const [topic, fact, writing, review] = await Promise.all([
      box("topic_selection"),
      box("fact_check"),
      box("writing"),
      box("review"),
    ]);
    expect(topic.x + topic.width).toBeLessThan(Math.min(fact.x, writing.x));
    expect(Math.max(fact.x + fact.width, writing.x + writing.width)).toBeLessThan(review.x);
    const overlap =
      fact.y < writing.y ? fact.y + fact.height > writing.y : writing.y + writing.height > fact.y;
    expect(overlap).toBe(false);
    expect(await page.getByText('verdict = "pass"').isVisible()).toBe(true);
    expect(await seen(page.locator('[data-node-row="writing"]'))).toContain(
      "MODEL_TIMEOUT the model did not answer within 15 s",
    );
    await page.screenshot({ path: join(SCREENSHOTS, "run.png"), fullPage: true });
  });

  it("links a parent run to its child runs, and a child run to its parent", async () => {
    expect(await open(`/runs/${RUN_ID}`)).toBe(200);
    const children = page.locator("ul.facts li", { hasText: "child runs:" });
    expect(await seen(children)).toContain(`${CHILD_RUN_ID} (node fact_check)`);
    expect(await page.locator("ul.facts li", { hasText: "parent run:" }).count()).toBe(0);
    await children.getByRole("link", { name: CHILD_RUN_ID }).click();
    await page.waitForURL(`**/runs/${CHILD_RUN_ID}`);
    expect(await seen(page.locator("h1"))).toBe(`Run ${CHILD_RUN_ID}`);
    const parent = page.locator("ul.facts li", { hasText: "parent run:" });
    expect(await seen(parent)).toContain(RUN_ID);
    expect(await page.locator("ul.facts li", { hasText: "child runs:" }).count()).toBe(0);
    await parent.getByRole("link", { name: RUN_ID }).click();
    await page.waitForURL(`**/runs/${RUN_ID}`);
    expect(await seen(page.locator("h1"))).toBe(`Run ${RUN_ID}`);
  });

  it("shows the trace with each group's outcome beside its event", async () => {
    expect(await open(`/trace?id=${CORRELATION_ID}`)).toBe(200);
    const details = (eventId: string) =>
      page.locator(`li[data-event-id="${eventId}"] > .event > .details`);
    const superseded = details(EVENT_IDS.firstReply).locator('[data-group="sender"]');
    expect(await superseded.isVisible()).toBe(true);
    expect(await seen(superseded)).toContain("discarded: superseded");
    expect(await seen(details(EVENT_IDS.secondReply).locator('[data-group="sender"]'))).toMatch(
      /^sender applied /,
    );
    expect(await seen(details(EVENT_IDS.routed).locator('[data-group="audit"]'))).toContain(
      "retrying (3 attempt(s), last error THROTTLED: Rate exceeded)",
    );
    const lookup = details(EVENT_IDS.orderLookup);
    expect(await seen(lookup.locator('[data-outcome="dead-lettered"]'))).toContain(
      "dead-lettered: poison",
    );
    expect(await seen(lookup.locator(".dead-letter"))).toContain("agentbus-order-lookup-dlq.fifo");
    const root = page.locator(`ul.tree > li[data-event-id="${EVENT_IDS.clientMessage}"]`);
    expect(await seen(root.locator("> .event .event-head"))).toContain("unsequenced");
    await page.screenshot({ path: join(SCREENSHOTS, "trace.png"), fullPage: true });
  });

  it("lists the dead-lettered event on the dead-letters page", async () => {
    expect(await open("/dead-letters")).toBe(200);
    const row = page.locator(`tr[data-event-id="${EVENT_IDS.orderLookup}"]`);
    expect(await row.isVisible()).toBe(true);
    const text = await seen(row);
    expect(text).toContain("order-lookup");
    expect(text).toContain("order.lookup.requested");
    expect(text).toContain("poison");
  });

  it("lists the run with its status on the overview, and its link opens the DAG", async () => {
    expect(await open("/")).toBe(200);
    const row = page.locator(`tr[data-item-kind="run"][data-item-id="${RUN_ID}"]`);
    expect(await seen(row)).toContain("FAILED");
    expect(await seen(page.locator('[data-waiting="failed-runs"]'))).toContain(RUN_ID);
    await row.getByRole("link", { name: RUN_ID }).click();
    await page.waitForURL(`**/runs/${RUN_ID}`);
    expect(await seen(page.locator("h1"))).toBe(`Run ${RUN_ID}`);
  });

  it("finds a trace from the search box and says clearly when nothing is known", async () => {
    await open("/dead-letters");
    await page.getByRole("searchbox").fill(TASK_ID);
    await page.getByRole("button", { name: "Trace" }).click();
    await page.waitForURL("**/trace?id=*");
    expect(await page.locator(`li[data-event-id="${EVENT_IDS.secondReply}"]`).isVisible()).toBe(
      true,
    );
    expect(await open("/trace?id=evt_unknown")).toBe(404);
    expect(await seen(page.locator("[data-not-found]"))).toContain(
      'Nothing is known of id "evt_unknown"',
    );
  });
});
