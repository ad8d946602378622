import { type EventRegistry, registry as hubRegistry } from "../../../schemas";

/**
 * What the console never shows of the data it draws (a node's input and output, a run's input):
 * the value of every field an event type declares personal (`personal: [...]` in schemas/events,
 * read from the registry: a customer's words), at any depth, reads `[redacted]`. The same fields
 * the functions' logs leave out (functions/handlers/log-redaction.ts); the console shows the rest
 * (an article's title and body are no customer's words).
 */

export const REDACTED = "[redacted]";

/** Nesting beyond which a value is shown as `[redacted]` whole (the data shown is bounded). */
const MAX_DEPTH = 16;

/** Every field any registered event type declares personal. */
export function personalFields(registry: EventRegistry = hubRegistry): ReadonlySet<string> {
  const fields = new Set<string>();
  for (const definition of registry.definitions())
    for (const field of definition.personal ?? []) fields.add(field);
  return fields;
}

/** `value` with the value of every key in `fields` replaced by `[redacted]`, at any depth. */
export function redactPersonal(
  value: unknown,
  fields: ReadonlySet<string> = personalFields(),
  depth = 0,
): unknown {
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return REDACTED;
  if (Array.isArray(value)) return value.map((item) => redactPersonal(item, fields, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [
      key,
      fields.has(key) ? REDACTED : redactPersonal(item, fields, depth + 1),
    ]),
  );
}
