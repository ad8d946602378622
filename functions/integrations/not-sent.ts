/**
 * Whether a failed HTTP call to a remote server (an MCP server, an A2A agent) left no doubt that
 * the request never reached it: the connection was refused or the host not found or reached. Any
 * other failure may have come after the server acted, so a write's outcome is unknown.
 */
export function surelyNotSent(error: unknown): boolean {
  return NOT_SENT.has(causeCode(error));
}

/** Network errors that leave no doubt the request was not sent. */
const NOT_SENT = new Set<string | undefined>([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

function causeCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  return typeof cause?.code === "string" ? cause.code : undefined;
}
