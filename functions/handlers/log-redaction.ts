import { LogFormatter, LogItem } from "@aws-lambda-powertools/logger";
import type { LogAttributes, UnformattedAttributes } from "@aws-lambda-powertools/logger/types";
import type { EventRegistry } from "../../schemas";
import { EventAttr } from "../adapters/dynamodb/tables";

/**
 * What the functions' log lines may not carry, applied in one place: the Powertools logger's
 * formatter (./observe.ts builds every function's logger with it). A log line never holds payload
 * text:
 * - a key that names a personal field of any event type (`personal: [...]` in schemas/events,
 *   read from the registry) or a message's content (CONTENT_KEYS: `payload`, `body`, `detail`,
 *   `envelope`), at any depth, has its value replaced by `[redacted]`;
 * - an error (an `Error`, or what is logged under `error`, `errors` or `cause`) keeps its name,
 *   code, class and stack frames, and its message only up to where it could start quoting its
 *   input (see loggableMessage); its other fields (an AgentBusError's `details`, a model
 *   error's raw text) are left out.
 * The line's own `message` is the text the code wrote (ids and counts, never input).
 */

export const REDACTED = "[redacted]";

/**
 * Keys whose value is a message or a part of one, wherever they appear in a log line: a message's
 * payload, an SQS body, an EventBridge detail, an envelope (and the event store's deflated copy of
 * one in a stream record).
 */
export const CONTENT_KEYS: readonly string[] = [
  "payload",
  "body",
  "detail",
  "envelope",
  EventAttr.envelopeDeflated,
];

/** Keys whose value describes an error (an Error, an ErrorInfo, a message). */
const ERROR_KEYS: ReadonlySet<string> = new Set(["error", "errors", "cause"]);

/** Nesting beyond which a log line's value is replaced whole (a log line is not a dump). */
const MAX_DEPTH = 8;

/**
 * Where an error's message may start quoting its input: a quotation mark (JSON.parse quotes the
 * text it failed on, zod quotes unknown keys and values, a provider quotes a field), an opening
 * bracket or brace (a JSON snippet), or a new line (what follows a summary: issues, a body).
 */
const QUOTE_START = /["'`\u2018\u201c\u00ab[{\n\r]/;

/** The keys a log line never shows the value of: every declared personal field, and CONTENT_KEYS. */
export function redactedKeys(registry: EventRegistry): ReadonlySet<string> {
  const keys = new Set(CONTENT_KEYS);
  for (const definition of registry.definitions())
    for (const field of definition.personal ?? []) keys.add(field);
  return keys;
}

/**
 * `redactedKeys`, read again whenever the registry has grown: an application's types are defined
 * when its modules are imported, which may be after the function's logger was made.
 */
export function liveRedactedKeys(registry: EventRegistry): () => ReadonlySet<string> {
  let size = -1;
  let keys: ReadonlySet<string> = new Set();
  return () => {
    if (registry.size !== size) {
      size = registry.size;
      keys = redactedKeys(registry);
    }
    return keys;
  };
}

/**
 * An error's message as a log line may show it: the part before anything it could quote of its
 * input (QUOTE_START), followed by `[redacted]` when something was cut.
 */
export function loggableMessage(message: string): string {
  const cut = message.search(QUOTE_START);
  if (cut < 0) return message;
  const kept = message.slice(0, cut).trimEnd();
  return kept ? `${kept} ${REDACTED}` : REDACTED;
}

/** A stack's frames only: its first lines repeat the error's message. */
function framesOf(stack: unknown): string | undefined {
  if (typeof stack !== "string") return undefined;
  const frames = stack.split("\n").filter((line) => /^\s+at /.test(line));
  return frames.length ? frames.join("\n") : undefined;
}

/** An error as a log line shows it: name, code, class, the loggable message, frames, cause. */
function loggableError(error: Error, keys: ReadonlySet<string>, depth: number): LogAttributes {
  const { code, errorClass } = error as { code?: unknown; errorClass?: unknown };
  return {
    name: error.name,
    ...(typeof code === "string" ? { code } : {}),
    ...(typeof errorClass === "string" ? { errorClass } : {}),
    message: loggableMessage(error.message),
    stack: framesOf(error.stack),
    ...(error.cause === undefined ? {} : { cause: redactError(error.cause, keys, depth + 1) }),
  };
}

/** What is logged under an error key: an Error, an ErrorInfo-like object, or a message. */
function redactError(value: unknown, keys: ReadonlySet<string>, depth: number): unknown {
  if (typeof value === "string") return loggableMessage(value);
  if (Array.isArray(value)) return value.map((v) => redactError(v, keys, depth + 1));
  if (value instanceof Error) return loggableError(value, keys, depth);
  const redacted = redactValue(value, keys, depth);
  if (redacted && typeof redacted === "object" && !Array.isArray(redacted)) {
    const info = redacted as Record<string, unknown>;
    if (typeof info.message === "string") info.message = loggableMessage(info.message);
  }
  return redacted;
}

/**
 * A copy of `value` without what a log line may not carry (see the top of this file). Cycles and
 * nesting past MAX_DEPTH are replaced by `[redacted]` too.
 */
export function redactValue(
  value: unknown,
  keys: ReadonlySet<string>,
  depth = 0,
  seen: WeakSet<object> = new WeakSet(),
): unknown {
  if (value === null || typeof value !== "object") return value;
  if (depth > MAX_DEPTH || seen.has(value)) return REDACTED;
  if (value instanceof Error) return loggableError(value, keys, depth);
  if (value instanceof Date) return value;
  seen.add(value);
  try {
    if (Array.isArray(value)) return value.map((v) => redactValue(v, keys, depth + 1, seen));
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      if (keys.has(key)) out[key] = REDACTED;
      else if (ERROR_KEYS.has(key)) out[key] = redactError(v, keys, depth + 1);
      else out[key] = redactValue(v, keys, depth + 1, seen);
    }
    return out;
  } finally {
    seen.delete(value);
  }
}

/**
 * The Powertools formatter of every function's logger: Powertools' own JSON layout (level,
 * message, timestamp, service, the Lambda context, the X-Ray trace id), with every other key of
 * the line redacted (redactValue).
 */
export class RedactingLogFormatter extends LogFormatter {
  constructor(private readonly keys: () => ReadonlySet<string>) {
    super();
  }

  formatAttributes(
    attributes: UnformattedAttributes,
    additionalLogAttributes: LogAttributes,
  ): LogItem {
    const context = attributes.lambdaContext;
    const base: LogAttributes = {
      level: attributes.logLevel,
      message: attributes.message,
      timestamp: this.formatTimestamp(attributes.timestamp),
      service: attributes.serviceName,
      cold_start: context?.coldStart,
      function_arn: context?.invokedFunctionArn,
      function_memory_size: context?.memoryLimitInMB,
      function_name: context?.functionName,
      function_request_id: context?.awsRequestId,
      sampling_rate: attributes.sampleRateValue,
      xray_trace_id: attributes.xRayTraceId,
    };
    const extra = redactValue(additionalLogAttributes, this.keys()) as LogAttributes;
    return new LogItem({ attributes: base }).addAttributes(extra);
  }
}
