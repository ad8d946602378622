/**
 * Reading the console's forms: `application/x-www-form-urlencoded` bodies, the fields every form
 * has (the reason, required on most) and text areas (a browser sends their line breaks as CRLF).
 */

/** The largest form body read (a node's output may be 64 KiB of JSON, larger once encoded). */
export const MAX_FORM_BYTES = 512 * 1024;
/** The longest reason a command or an audit record carries. */
export const MAX_REASON = 1000;

/** The form fields of a body, or undefined when it is not a URL-encoded form. */
export function formOf(contentType: string | undefined, body: string): URLSearchParams | undefined {
  const type = (contentType ?? "").split(";")[0]?.trim().toLowerCase();
  return type === "application/x-www-form-urlencoded" ? new URLSearchParams(body) : undefined;
}

/** A text area's value with its line breaks as LF; undefined when the field is absent. */
export function textOf(form: URLSearchParams, name: string): string | undefined {
  const value = form.get(name);
  return value === null ? undefined : value.replace(/\r\n?/g, "\n");
}

/**
 * The reason, trimmed, or why it cannot be taken: required unless `optional` (then empty when
 * none was given).
 */
export function reasonOf(
  form: URLSearchParams,
  optional = false,
): { reason: string } | { problem: string } {
  const reason = (textOf(form, "reason") ?? "").trim();
  if (!reason && !optional) return { problem: "a reason is required (say why); nothing sent" };
  if (reason.length > MAX_REASON)
    return {
      problem: `the reason is ${reason.length} characters, at most ${MAX_REASON}; nothing sent`,
    };
  return { reason };
}
