import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routeRequest } from "../../lib/operator/console/routes";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import type { ListFilter } from "../../lib/operator/lists";
import type { ItemSummary } from "../../lib/operator/views";
import { haveChromium, launchChromium, NO_CHROMIUM } from "../support/browser";
import { fakeSource } from "./fixtures";

// The console's runs page: a filter by tenant, status and start time, and pages that keep it.

const STATUSES = ["RUNNING", "COMPLETED", "FAILED"] as const;

/** 12 runs, newest first: tenants acme and globex in turn, statuses in turn, a minute apart. */
const RUNS: ItemSummary[] = Array.from({ length: 12 }, (_, i) => {
  const at = new Date(Date.UTC(2026, 11, 5, 12, 59 - i)).toISOString();
  return {
    kind: "run",
    id: `run_${String(i).padStart(2, "0")}`,
    status: STATUSES[i % 3] ?? "RUNNING",
    tenant: i % 2 === 0 ? "acme" : "globex",
    label: "quick-news v3",
    listedAt: at,
    updatedAt: at,
  };
});

const source = () => fakeSource({ runList: RUNS, runPageSize: 2 });

describe("/runs read in memory", () => {
  it("refuses a filter it cannot use with 400, naming the field, and reads nothing", async () => {
    let read = 0;
    const counted = {
      ...source(),
      runList: async () => {
        read += 1;
        return { rows: [] };
      },
    };
    for (const [query, says] of [
      ["?status=not%20a%20status", 'status "not a status"'],
      ["?since=yesterday", 'since "yesterday": an ISO 8601 date or time'],
      ["?tenant=Acme!", 'tenant "Acme!"'],
      ["?since=2026-12-05&before=2026-12-04", "since must be before before"],
    ] as const) {
      const page = await routeRequest(counted, "GET", `/runs${query}`);
      expect(page.status, query).toBe(400);
      expect(page.html).toContain(says.replaceAll('"', "&quot;"));
    }
    expect(read).toBe(0);
  });

  it("answers a page cursor no list gave with 400", async () => {
    const page = await routeRequest(source(), "GET", "/runs?page=nonsense");
    expect(page.status).toBe(400);
    expect(page.html).toContain("is not where a page of a list ended");
  });

  it("passes the checked filter to the source: times as listed_at holds them", async () => {
    const asked: unknown[] = [];
    const base = source();
    const spy = {
      ...base,
      runList: (filter: ListFilter, after?: string) => {
        asked.push([filter, after]);
        return base.runList(filter, after);
      },
    };
    const page = await routeRequest(
      spy,
      "GET",
      "/runs?tenant=acme&status=FAILED&since=2026-12-05T12:00%2B01:00",
    );
    expect(page.status).toBe(200);
    expect(asked).toEqual([
      [{ tenant: "acme", status: "FAILED", since: "2026-12-05T11:00:00.000Z" }, undefined],
    ]);
  });
});

if (!haveChromium) console.warn(`run-list.test.ts's browser cases skipped: ${NO_CHROMIUM}`);

describe.skipIf(!haveChromium)("/runs in Chromium (needs Debian's chromium)", () => {
  let browser: Browser;
  let server: RunningConsole;
  let page: Page;

  beforeAll(async () => {
    server = await startConsole({ source: source() });
    browser = await launchChromium();
    page = await browser.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const listedIds = () =>
    page
      .locator("tr[data-item-id]")
      .evaluateAll((rows) => rows.map((r) => r.getAttribute("data-item-id")));

  it("filters by tenant and status from the form, and the next page keeps the filter", async () => {
    await page.goto(new URL("/", server.url).href);
    await page.getByRole("link", { name: "Runs", exact: true }).click();
    expect(await listedIds()).toEqual(["run_00", "run_01"]);

    await page.locator('[data-run-filter] input[name="tenant"]').fill("globex");
    await page.locator('[data-run-filter] input[name="status"]').fill("FAILED");
    await page.locator("[data-run-filter] button").click();
    await page.waitForURL(/status=FAILED/);
    // globex's runs are the odd ones, FAILED every third: run_05 and run_11.
    expect(await listedIds()).toEqual(["run_05", "run_11"]);
    expect(await page.locator("[data-next-page]").count()).toBe(0);

    await page.locator('[data-run-filter] input[name="status"]').fill("");
    await page.locator('[data-run-filter] input[name="since"]').fill("2026-12-05T12:53Z");
    await page.locator("[data-run-filter] button").click();
    await page.waitForURL(/since=/);
    expect(await listedIds()).toEqual(["run_01", "run_03"]);
    await page.locator("[data-next-page]").click();
    await page.waitForURL(/page=/);
    expect(await listedIds()).toEqual(["run_05"]);
    expect(await page.locator('[data-run-filter] input[name="tenant"]').inputValue()).toBe(
      "globex",
    );
  });
});
