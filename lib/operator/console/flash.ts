import { randomBytes } from "node:crypto";
import type { ActionOutcome } from "../actions";
import { escapeHtml } from "./html";

/**
 * What an action answered, shown once the browser follows the redirect after a POST: the page's
 * address carries a random id (`?flash=<id>`) and the console keeps the message, so nobody can
 * put words of their own into a link to the console. The newest messages are kept, and with a
 * refused start what its form sent (kept here, never in an address).
 */

/** An action's answer; a refused start keeps what its form sent, to fill the form in again. */
export type Flash = ActionOutcome & { readonly typed?: Readonly<Record<string, string>> };

const KEPT = 200;
const FLASH_ID = /^[A-Za-z0-9_-]{16,64}$/;

export class FlashMessages {
  private readonly messages = new Map<string, Flash>();

  /** Keep `flash`; returns the id the page's address carries. */
  put(flash: Flash): string {
    const id = randomBytes(12).toString("base64url");
    this.messages.set(id, flash);
    for (const old of this.messages.keys()) {
      if (this.messages.size <= KEPT) break;
      this.messages.delete(old);
    }
    return id;
  }

  /** The message kept under the `flash` query parameter, if any. */
  of(params: URLSearchParams): Flash | undefined {
    const id = params.get("flash");
    return id && FLASH_ID.test(id) ? this.messages.get(id) : undefined;
  }
}

const TITLES: Readonly<Record<Flash["kind"], string>> = {
  sent: "Sent",
  unchanged: "Nothing to do",
  refused: "Refused",
  failed: "Failed",
};

/** The message as the top of a page shows it. */
export function renderFlash(flash: Flash): string {
  const role = flash.kind === "refused" || flash.kind === "failed" ? "alert" : "status";
  return `<div class="flash flash-${flash.kind}" role="${role}" data-flash="${escapeHtml(flash.kind)}"><strong>${escapeHtml(TITLES[flash.kind])}:</strong> ${escapeHtml(flash.message)}</div>`;
}
