import type { Envelope, EventRegistry } from "../../../schemas";
import { DEFAULT_TENANT } from "../../../schemas/ids";
import { PermanentError } from "../errors";
import type { PersonalFieldOpener } from "../ports";
import { ERASED } from "./erased";
import { isSealed } from "./vault";

/**
 * What a consumer does with the sealed personal fields of a message (./vault.ts): the buses, their
 * archives, the queues and the dead-letter queues carry them sealed, as the event store keeps them.
 * A role that reads a type's personal fields (`Role.readsPersonal`) gets them opened, once per
 * message, by its function's vault (`[erased]` once the customer is erased: a message of an erased
 * customer is handled, never retried for it); any other role never opens them: it gets them
 * sealed, and what it emits or keeps of them stays sealed under the same key.
 */

/** A delivered message ready to validate, and how to give its sealed fields back afterwards. */
export interface RoleDelivery {
  /** The message to validate: opened fields in the clear, unopened ones as `[erased]`. */
  readonly raw: unknown;
  /** The validated envelope with the fields left unopened sealed again, as they came. */
  restore(envelope: Envelope): Envelope;
}

/** What a role is to the opening: its group and `Role.readsPersonal`. */
interface Reader {
  readonly group: string;
  readonly readsPersonal?: readonly string[];
}

/**
 * The message as `role` is to read it, before validation: the sealed personal fields of its type
 * opened when the role reads them; else given to the validation as `[erased]` (a sealed text is
 * longer than the words it holds, and a field's schema must accept the marker anyway), then
 * restored sealed. A message without sealed fields comes back as it is.
 */
export async function deliveryFor(
  raw: unknown,
  role: Reader,
  registry: EventRegistry,
  opener: PersonalFieldOpener | undefined,
): Promise<RoleDelivery> {
  const sealed = sealedFieldsOf(raw, registry);
  if (!sealed) return { raw, restore: (envelope) => envelope };
  const message = raw as Record<string, unknown> & { payload: Record<string, unknown> };
  if (reads(role, String(message.event_type))) {
    const tenant = typeof message.tenant_id === "string" ? message.tenant_id : DEFAULT_TENANT;
    const payload = await openerFor(role, message, opener).openFields(
      message.payload,
      sealed,
      tenant,
    );
    return { raw: { ...message, payload }, restore: (envelope) => envelope };
  }
  const masked = { ...message.payload };
  for (const field of sealed) masked[field] = ERASED;
  return {
    raw: { ...message, payload: masked },
    restore: (envelope) => withFields(envelope, message.payload, sealed),
  };
}

/** A stored event (a gap's) as `role` is to read it: its sealed fields opened if it reads them. */
export async function storedFor(
  event: Envelope,
  role: Reader,
  registry: EventRegistry,
  opener: PersonalFieldOpener | undefined,
): Promise<Envelope> {
  if (!reads(role, event.event_type)) return event;
  return (await deliveryFor(event, role, registry, opener)).raw as Envelope;
}

function reads(role: Reader, type: string): boolean {
  return role.readsPersonal?.includes(type) ?? false;
}

/** The declared personal fields of the message's type that hold a sealed text; none: undefined. */
function sealedFieldsOf(raw: unknown, registry: EventRegistry): string[] | undefined {
  if (!raw || typeof raw !== "object") return undefined;
  const { event_type: type, schema_version: version, payload } = raw as Record<string, unknown>;
  if (typeof type !== "string" || !payload || typeof payload !== "object") return undefined;
  const personal =
    registry.find(type, typeof version === "number" ? version : undefined)?.personal ?? [];
  const sealed = personal.filter((field) => isSealed((payload as Record<string, unknown>)[field]));
  return sealed.length ? sealed : undefined;
}

function openerFor(
  role: Reader,
  message: Record<string, unknown>,
  opener: PersonalFieldOpener | undefined,
): PersonalFieldOpener {
  if (opener) return opener;
  throw new PermanentError(
    "personal.no_keys",
    `consumer group ${role.group} reads the personal fields of ${String(message.event_type)}, but its function was given no customer keys`,
  );
}

/** The envelope with `fields` as `from` has them, where validation left the marker in their place. */
function withFields(
  envelope: Envelope,
  from: Readonly<Record<string, unknown>>,
  fields: readonly string[],
): Envelope {
  const payload = { ...(envelope.payload as Record<string, unknown>) };
  for (const field of fields) if (payload[field] === ERASED) payload[field] = from[field];
  return { ...envelope, payload } as Envelope;
}
