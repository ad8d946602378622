import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ActionOutcome, OpsActions } from "../../lib/operator/actions";
import { type RunningConsole, startConsole } from "../../lib/operator/console/server";
import { haveChromium, launchChromium, NO_CHROMIUM, SCREENSHOTS, seen } from "../support/browser";
import { fakeSource } from "./fixtures";

if (!haveChromium) console.warn(`tenant-stop.test.ts skipped: ${NO_CHROMIUM}`);

/**
 * The console's kill switch in Chromium: the overview filtered to a tenant offers to stop it
 * (a reason required, as the CLI's audit record keeps it) and to resume it; each button asks the
 * stack's actions (recorded here) and the page shows what was done. Unfiltered, there is none.
 */

describe.skipIf(!haveChromium)("the console's tenant stop in Chromium", () => {
  let browser: Browser;
  let server: RunningConsole;
  let page: Page;
  const asked: unknown[][] = [];

  const none = async (): Promise<ActionOutcome> => ({ kind: "refused", message: "no" });
  const actions: OpsActions = {
    run: none,
    review: none,
    resolveSend: none,
    redrive: none,
    decideStep: none,
    start: none,
    async stopOrResume(verb, target, reason) {
      asked.push([verb, target, reason]);
      return verb === "stop"
        ? { kind: "sent", message: `stopped: tenant ${target.id} (${reason})` }
        : { kind: "sent", message: `tenant ${target.id} resumed` };
    },
  };

  beforeAll(async () => {
    await mkdir(SCREENSHOTS, { recursive: true });
    server = await startConsole({ source: fakeSource(), actions });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const open = async (path: string) => (await page.goto(new URL(path, server.url).href))?.status();

  it("offers no stop on the overview of every tenant", async () => {
    expect(await open("/")).toBe(200);
    expect(await page.locator("[data-tenant-stop]").count()).toBe(0);
  });

  it("stops the tenant shown with the reason given, and shows what was done", async () => {
    expect(await open("/?tenant=acme")).toBe(200);
    const form = page.locator('form[data-action="stop-tenant"]');
    const button = form.getByRole("button", { name: "Stop tenant acme" });
    // No reason: the browser refuses to send the form.
    await button.click();
    expect(asked).toEqual([]);
    await form.locator('input[name="reason"]').fill("a runaway agent");
    await Promise.all([page.waitForURL(/[?&]flash=/), button.click()]);
    expect(asked).toEqual([["stop", { scope: "tenant", id: "acme" }, "a runaway agent"]]);
    expect(await seen(page.locator("[data-flash]"))).toContain(
      "stopped: tenant acme (a runaway agent)",
    );
    // Back on the same tenant's overview.
    expect(new URL(page.url()).searchParams.get("tenant")).toBe("acme");
    await page.screenshot({ path: join(SCREENSHOTS, "tenant-stop.png"), fullPage: true });
  });

  it("resumes it without a reason", async () => {
    expect(await open("/?tenant=acme")).toBe(200);
    const button = page.getByRole("button", { name: "Resume tenant acme" });
    await Promise.all([page.waitForURL(/[?&]flash=/), button.click()]);
    expect(asked.at(-1)).toEqual(["resume", { scope: "tenant", id: "acme" }, ""]);
    expect(await seen(page.locator("[data-flash]"))).toContain("tenant acme resumed");
  });
});
