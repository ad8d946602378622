import { isSealed } from "../core/personal-data/vault";

/**
 * What an AG-UI stream shows of a stored value (./agui-events.ts, ./agui-tool-args.ts): a
 * personal field still sealed (the function holds no customer key, or the key was erased) is
 * shown SEALED_SHOWN, never as its ciphertext; a text that would make a message large is cut.
 */

/** What a shown personal field becomes while it is sealed. */
export const SEALED_SHOWN = "[sealed]";

/** A text as shown: "" for anything but a string, SEALED_SHOWN for a sealed one. */
export function shownText(value: unknown): string {
  if (typeof value !== "string") return "";
  return isSealed(value) ? SEALED_SHOWN : value;
}

/** A payload as shown: every sealed value replaced by SEALED_SHOWN. */
export function shownPayload(value: unknown): unknown {
  if (isSealed(value)) return SEALED_SHOWN;
  if (Array.isArray(value)) return value.map(shownPayload);
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shownPayload(v)]));
  return value;
}

/**
 * `text` whole when it has at most `limit` characters (UTF-16 code units), else its first `limit`
 * (one fewer where that would split a surrogate pair) and the marker `…[cut: <n> characters in
 * all]`. Cut, a JSON text no longer parses: the marker says why.
 */
export function cutText(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const end = /[\uD800-\uDBFF]/.test(text.charAt(limit - 1)) ? limit - 1 : limit;
  return `${text.slice(0, end)}…[cut: ${text.length} characters in all]`;
}
