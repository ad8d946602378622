import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import type { ItemSummary, OpsSource, OverviewView } from "../../lib/operator/views";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS } from "../support/browser";
import { deadLetters, EVENT_IDS, fakeSource, overview, RUN_ID, TASK_ID } from "./fixtures";

if (!haveChromium) console.warn(`tenant-filter.test.ts skipped: ${NO_CHROMIUM}`);

const OTHER_RUN = "run_01J9Z3R0000CONTENT000000002";
const OTHER_LETTER = "01J9Z3QW8Y0000000000000DEF";

/** The tenant of each fixture item: the failed run and the conversations are acme's. */
const TENANTS: Readonly<Record<string, string>> = {
  [RUN_ID]: "acme",
  [OTHER_RUN]: "default",
  conv_01J9Z3QW8Y: "acme",
  conv_01J9Z3HELD: "acme",
  [TASK_ID]: "default",
};

/**
 * The fixtures with a tenant on each item, read as the stack's source reads them: a tenant's
 * items only when the console asks for one (the filtering itself is lib/operator/lists.ts's,
 * tested on moto); `asked` records what the console asked for.
 */
function tenantSource(asked: (string | undefined)[]): OpsSource {
  const named = (items: readonly ItemSummary[], tenant: string | undefined) =>
    items
      .map((i) => ({ ...i, tenant: TENANTS[i.id] ?? "default" }))
      .filter((i) => tenant === undefined || i.tenant === tenant);
  const base = fakeSource();
  return {
    ...base,
    async overview(tenant) {
      asked.push(tenant);
      const all = overview();
      const view: OverviewView = {
        ...all,
        runs: named(all.runs, tenant),
        conversations: named(all.conversations, tenant),
        tasks: named(all.tasks, tenant),
        waiting: {
          ...all.waiting,
          heldReplies: named(all.waiting.heldReplies, tenant),
          failedRuns: named(all.waiting.failedRuns, tenant),
        },
      };
      return view;
    },
    async deadLetters(tenant) {
      asked.push(tenant);
      const [acme] = deadLetters();
      if (!acme) throw new Error("no dead letter fixture");
      const letters = [
        { ...acme, tenantId: "acme" },
        { ...acme, messageId: "other", eventId: OTHER_LETTER },
      ];
      return letters.filter((l) => tenant === undefined || (l.tenantId ?? "default") === tenant);
    },
  };
}

describe.skipIf(!haveChromium)("the console's tenant filter in Chromium", () => {
  let browser: Browser;
  let server: RunningConsole;
  let page: Page;
  const asked: (string | undefined)[] = [];

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    server = await startConsole({ source: tenantSource(asked) });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const rowTenants = (kind: string) =>
    page
      .locator(`tr[data-item-kind="${kind}"]`)
      .evaluateAll((rows) =>
        rows.map((r) => [r.getAttribute("data-item-id"), r.getAttribute("data-tenant")]),
      );

  it("shows every tenant's items, each with its tenant, until a tenant is chosen", async () => {
    await page.goto(server.url);
    expect(await rowTenants("run")).toEqual([
      [RUN_ID, "acme"],
      [OTHER_RUN, "default"],
    ]);
    expect(await page.locator("[data-tenant-filter]").textContent()).toContain("every tenant");
    expect(asked.at(-1)).toBeUndefined();
  });

  it("filters the lists to the tenant typed in, and the navigation keeps it", async () => {
    await page.goto(server.url);
    await page.getByLabel("Tenant").fill("acme");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL("**/?tenant=acme");
    expect(asked.at(-1)).toBe("acme");
    expect(await rowTenants("run")).toEqual([[RUN_ID, "acme"]]);
    expect(await rowTenants("task")).toEqual([]);
    expect(await page.locator("[data-tenant-shown]").textContent()).toBe("acme");
    expect(await page.getByLabel("Tenant").inputValue()).toBe("acme");
    await page.screenshot({ path: join(SCREENSHOTS, "tenant-filter.png"), fullPage: true });

    await page.getByRole("navigation").getByRole("link", { name: "Dead letters" }).click();
    await page.waitForURL("**/dead-letters?tenant=acme");
    expect(asked.at(-1)).toBe("acme");
    expect(await page.locator(`tr[data-event-id="${EVENT_IDS.orderLookup}"]`).isVisible()).toBe(
      true,
    );
    expect(await page.locator(`tr[data-event-id="${OTHER_LETTER}"]`).count()).toBe(0);

    // Cleared, the filter shows every tenant's again.
    await page.getByLabel("Tenant").fill("");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL("**/dead-letters?tenant=");
    expect(asked.at(-1)).toBeUndefined();
    expect(await page.locator(`tr[data-event-id="${OTHER_LETTER}"]`).isVisible()).toBe(true);
  });

  it("does not send a tenant that is not a tenant id, and answers 400 to one in the address", async () => {
    await page.goto(server.url);
    const before = asked.length;
    const valid = () =>
      page
        .getByLabel("Tenant")
        .evaluate((e) => (e as unknown as { validity: { valid: boolean } }).validity.valid);
    await page.getByLabel("Tenant").fill("acme-eu-1");
    expect(await valid()).toBe(true);
    await page.getByLabel("Tenant").fill("Acme Corp");
    await page.getByRole("button", { name: "Filter" }).click();
    // The browser refuses the form (the input's pattern): the page stays, nothing is read.
    expect(await valid()).toBe(false);
    expect(new URL(page.url()).search).toBe("");
    expect(asked.length).toBe(before);

    const response = await page.goto(new URL("/?tenant=Acme%20Corp", server.url).href);
    expect(response?.status()).toBe(400);
    expect(await page.locator("[data-request-error]").textContent()).toContain(
      'The tenant "Acme Corp" is not a tenant id',
    );
    expect(asked.length).toBe(before);
  });
});
