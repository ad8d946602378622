import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Locator } from "playwright-core";

/**
 * The browser a page is tested in: Debian's chromium (or the one `$AGENTBUS_CHROMIUM` names, as
 * for .ci/run), driven by playwright-core, headless and without a sandbox, GPU or background
 * networking (nothing leaves loopback).
 */
export const CHROMIUM = process.env.AGENTBUS_CHROMIUM ?? "/usr/bin/chromium";
export const haveChromium = existsSync(CHROMIUM);
/** Where the console tests put their screenshots (an artifact of the run). */
export const SCREENSHOTS = join(process.env.AGENTBUS_TEST_OUTPUT ?? "test/output", "console");

/** Why a browser test is skipped here, for the run's log. */
export const NO_CHROMIUM = `Debian's chromium is not installed at ${CHROMIUM} (apt-get install -y chromium)`;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}

/**
 * The text a person sees in `locator` (rendered text, so the element must be visible), once it
 * shows: a page that reloads itself (a run not recorded yet) may be between documents when the
 * test looks. It fails when the element does not show within 30 s.
 */
export async function seen(locator: Locator): Promise<string> {
  await locator.waitFor({ state: "visible", timeout: 30_000 });
  // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what the test is about
  return locator.innerText();
}
