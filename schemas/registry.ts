import {
  AggregatePosition,
  ClaimCheck,
  type Envelope,
  EnvelopeBase,
  type EnvelopeInput,
  MAX_ENVELOPE_BYTES,
  utf8Bytes,
} from "./envelope";
import { fastParserOf, INVALID, type Parser } from "./fast-parse";
import { jsonBytesAtMost } from "./json-size";
import * as z from "./zod";

/** The topics (one EventBridge bus each). Commands ask for work; events record facts. */
export const TOPICS = ["commands", "events", "audit"] as const;
export type Topic = (typeof TOPICS)[number];

export function isTopic(value: unknown): value is Topic {
  return (TOPICS as readonly unknown[]).includes(value);
}

/**
 * One version of an event type. `T` and `V` keep the literal type name and version a definition
 * is written with, so the payload types of every registered type can be read off the definitions
 * themselves (`PayloadTypes`) instead of being declared a second time.
 */
export interface EventTypeDefinition<
  P extends z.ZodMiniType = z.ZodMiniType,
  T extends string = string,
  V extends number = number,
> {
  readonly type: T;
  readonly schemaVersion: V;
  /** `command`: a request to one role; `event`: a fact any group may observe. */
  readonly kind: "command" | "event";
  readonly topic: Topic;
  /**
   * Sequenced types come from an aggregate's event stream (version >= 1) and are gated on order
   * by consumers; unsequenced types (version 0) enter from outside and are de-duplicated by id.
   */
  readonly sequenced: boolean;
  readonly description: string;
  readonly payload: P;
  /**
   * The payload's fields that hold personal data: a customer's words, or words written to or
   * about one (top-level string fields). The event store keeps them sealed under the customer's
   * data key (functions/core/personal-data), logs never carry them, and erasing the customer
   * leaves `[erased]` in their place.
   */
  readonly personal?: readonly string[];
  /**
   * A heartbeat: an unsequenced message a role publishes while it works on another
   * (functions/handlers/heartbeat.ts). It says nothing once a day has passed: it carries an
   * `expires_at` within a day, and the audit group keeps it no longer (functions/core/retention.ts).
   */
  readonly heartbeat?: true;
  /**
   * From the previous schema version's payload to this one's (required on every version after
   * the first, absent on version 1). It gets the previous payload as validated and the envelope
   * around it (for fields the old payload implied, such as `occurred_at`); it must be pure.
   */
  readonly upcast?: (previous: unknown, envelope: Envelope) => z.input<P>;
}

/**
 * The payload type of each event type among the definitions `D` (a union): the output of its
 * newest version's schema, since the pipeline upcasts older versions before a role sees them.
 */
export type PayloadTypes<D extends EventTypeDefinition> = {
  readonly [K in D["type"]]: z.output<NewestPayload<D, K>>;
};

/** The definitions among `D` of the type `K` (a definition made in a loop may name several). */
type VersionsOf<D, K> =
  D extends EventTypeDefinition<z.ZodMiniType, infer T> ? (K extends T ? D : never) : never;

/** The payload schema of the newest version of `K` among `D`. */
type NewestPayload<D, K> = NewestOf<VersionsOf<D, K>>;

/**
 * The payload schema of the newest of `All` (the versions of one type). `define` admits versions
 * only in order from 1, so the newest is the one whose next version is not among them.
 */
type NewestOf<All, E = All> =
  E extends EventTypeDefinition<infer P, string, infer V>
    ? [Extract<All, { readonly schemaVersion: Next<V> }>] extends [never]
      ? P
      : never
    : never;

/** `V + 1` for a small non-negative integer literal (a schema version). */
type Next<V extends number, Count extends unknown[] = []> = Count["length"] extends V
  ? [...Count, unknown]["length"]
  : Next<V, [...Count, unknown]>;

export interface ParseOptions {
  /**
   * The largest envelope accepted, in bytes of JSON. @default MAX_ENVELOPE_BYTES (what travels);
   * an envelope a producer appends to a stream, or a claim check opened, may be up to
   * MAX_STORED_ENVELOPE_BYTES.
   */
  readonly maxBytes?: number;
}

export type ParseResult =
  | {
      ok: true;
      /** At its type's newest schema version, whatever version the message was written in. */
      envelope: Envelope;
      definition: EventTypeDefinition;
      /** The schema version the message was written in, when it was upcast from an older one. */
      upcastFrom?: number;
    }
  | { ok: false; code: string; message: string; eventId?: string };

/** Event types, their payload schemas and schema versions, in one place. */
export class EventRegistry {
  private readonly byKey = new Map<string, EventTypeDefinition>();
  /** Full envelope schemas, built on first use: building all of them would slow every cold start. */
  private readonly schemas = new Map<EventTypeDefinition, z.ZodMiniType>();
  /** The fast parser of each full schema, made with it (./fast-parse); null where none applies. */
  private readonly parsers = new Map<EventTypeDefinition, Parser | null>();
  /** Each type's definitions, newest schema version first. */
  private readonly byType = new Map<string, EventTypeDefinition[]>();

  define<P extends z.ZodMiniType, T extends string, V extends number>(
    definition: EventTypeDefinition<P, T, V>,
  ): EventTypeDefinition<P, T, V> {
    const key = `${definition.type}@${definition.schemaVersion}`;
    const known = this.byKey.get(key);
    // The same definition again is a module evaluated twice (two bundles, a test's re-import).
    if (known === definition) return definition;
    if (known)
      throw new Error(
        `event type ${key} is defined twice, by different definitions ("${known.description}" and "${definition.description}"): give the new one another type name or the next schema version`,
      );
    const typeCheck = EnvelopeBase.shape.event_type.safeParse(definition.type);
    if (!typeCheck.success)
      throw new Error(
        `event type name ${JSON.stringify(definition.type)} ${typeCheck.error.issues[0]?.message}`,
      );
    checkChain(definition, this.byType.get(definition.type) ?? []);
    checkPersonalFields(definition);
    if (definition.heartbeat && definition.sequenced)
      throw new Error(`event type ${key} is a heartbeat, which must be unsequenced`);
    this.byKey.set(key, definition);
    const versions = [...(this.byType.get(definition.type) ?? []), definition];
    this.byType.set(
      definition.type,
      versions.sort((a, b) => b.schemaVersion - a.schemaVersion),
    );
    return definition;
  }

  get(type: string, schemaVersion: number): EventTypeDefinition | undefined {
    return this.byKey.get(`${type}@${schemaVersion}`);
  }

  has(type: string): boolean {
    return this.byType.has(type);
  }

  /** The definition of `type` at `schemaVersion`, or its newest one when no version is named. */
  find(type: string, schemaVersion?: number): EventTypeDefinition | undefined {
    const versions = this.byType.get(type);
    if (!versions || schemaVersion === undefined) return versions?.[0];
    // A loop, not `find`: every message is looked up here, and a callback is one more object.
    for (const definition of versions)
      if (definition.schemaVersion === schemaVersion) return definition;
    return undefined;
  }

  /** How many definitions it holds (it only grows): whether one has been added since. */
  get size(): number {
    return this.byKey.size;
  }

  definitions(): EventTypeDefinition[] {
    return [...this.byKey.values()];
  }

  /** The full envelope schema of one type and version (for JSON Schema export). */
  envelopeSchema(type: string, schemaVersion: number): z.ZodMiniType | undefined {
    const definition = this.find(type, schemaVersion);
    return definition && this.schemaOf(definition);
  }

  private schemaOf(definition: EventTypeDefinition): z.ZodMiniType {
    const built = this.schemas.get(definition);
    if (built) return built;
    const schema = z.extend(EnvelopeBase, {
      event_type: z.literal(definition.type),
      schema_version: z.literal(definition.schemaVersion),
      payload: definition.payload,
    });
    this.schemas.set(definition, schema);
    return schema;
  }

  /**
   * A message of `definition`'s type and version, parsed: by its fast parser when that accepts
   * it, else by zod's runtime, which also words the error of an invalid one.
   */
  private parseFull(definition: EventTypeDefinition, raw: unknown) {
    let parse = this.parsers.get(definition);
    if (parse === undefined) {
      parse = fastParserOf(this.schemaOf(definition)).parse ?? null;
      this.parsers.set(definition, parse);
    }
    const fast = parse === null ? INVALID : parse(raw);
    return fast === INVALID
      ? z.safeParse(this.schemaOf(definition), raw)
      : { success: true as const, data: fast, error: undefined };
  }

  /**
   * The envelope at its type's newest schema version: each registered upcaster from its own
   * version on, in order (`upcast` of v2, then of v3, ...). An envelope already at the newest
   * version, or of an unknown type, is returned as it is. Used on envelopes that were valid when
   * stored (gap repair, trace); `parse` upcasts untrusted messages and validates the result.
   */
  upcast(envelope: Envelope): Envelope {
    const versions = this.byType.get(envelope.event_type);
    const newest = versions?.[0];
    if (!versions || !newest || newest.schemaVersion <= envelope.schema_version) return envelope;
    let payload: unknown = envelope.payload;
    for (let i = versions.length - 1; i >= 0; i--) {
      const next = versions[i] as EventTypeDefinition;
      if (next.schemaVersion <= envelope.schema_version || !next.upcast) continue;
      payload = next.upcast(payload, envelope);
    }
    return { ...envelope, schema_version: newest.schemaVersion, payload } as Envelope;
  }

  /**
   * Validate an untrusted message: size, envelope, known type and version, payload; then upcast it
   * to its type's newest version (validated again, so a faulty upcaster is caught here). A valid
   * message is validated once, by its type's full schema; the envelope alone is checked again
   * only to word the error of an invalid one.
   */
  parse(raw: unknown, options: ParseOptions = {}): ParseResult {
    const parsed = this.parseAsWritten(raw, options.maxBytes ?? MAX_ENVELOPE_BYTES);
    if (!parsed.ok || parsed.envelope.claim_check) return parsed;
    const newest = this.byType.get(parsed.definition.type)?.[0];
    if (!newest || newest === parsed.definition) return parsed;
    return this.upcastParsed(parsed.envelope, newest);
  }

  /** An envelope valid at an older version, upcast and validated at `newest`. */
  private upcastParsed(envelope: Envelope, newest: EventTypeDefinition): ParseResult {
    let upcast: Envelope;
    try {
      upcast = this.upcast(envelope);
    } catch (error) {
      return upcastFailure(
        envelope,
        newest,
        error instanceof Error ? error.message : String(error),
      );
    }
    const payload = newest.payload.safeParse(upcast.payload);
    if (!payload.success) return upcastFailure(envelope, newest, describeIssues(payload.error));
    return {
      ok: true,
      envelope: { ...upcast, payload: payload.data } as Envelope,
      definition: newest,
      upcastFrom: envelope.schema_version,
    };
  }

  /** `parse` without the upcast: the message validated at the version it names. */
  private parseAsWritten(raw: unknown, maxBytes: number): ParseResult {
    const sizeProblem = sizeProblemOf(raw, maxBytes);
    if (sizeProblem) return { ok: false, ...sizeProblem, eventId: pickEventId(raw) };
    const definition = this.definitionNamed(raw);
    // The schema pins event_type and schema_version: valid data is of `definition`.
    const full = definition && (isClaim(raw) ? claimParse(raw) : this.parseFull(definition, raw));
    if (!definition || !full?.success)
      return { ok: false, ...this.problemOf(raw, full?.error), eventId: pickEventId(raw) };
    const data = full.data as z.output<typeof EnvelopeBase>;
    if (definition.sequenced !== data.aggregate.version > 0) {
      return {
        ok: false,
        code: "envelope.invalid_sequence",
        message: definition.sequenced
          ? `${definition.type} is sequenced: aggregate.version must be >= 1`
          : `${definition.type} is unsequenced: aggregate.version must be 0`,
        eventId: pickEventId(raw),
      };
    }
    // The object's parser built `data` for this call: the default is filled in place, not copied.
    if (data.order_key === undefined) data.order_key = data.aggregate.id;
    return { ok: true, envelope: data as Envelope, definition };
  }

  /** The definition of the type and version a raw message names, if it names a known one. */
  private definitionNamed(raw: unknown): EventTypeDefinition | undefined {
    if (!raw || typeof raw !== "object") return undefined;
    const { event_type: type, schema_version: version } = raw as Record<string, unknown>;
    return typeof type === "string" && typeof version === "number"
      ? this.find(type, version)
      : undefined;
  }

  /** Why a message that its type's schema rejected (or whose type is unknown) is invalid. */
  private problemOf(raw: unknown, payloadError: z.core.$ZodError | undefined): Problem {
    const base = EnvelopeBase.safeParse(raw);
    if (!base.success) return { code: "envelope.invalid", message: describeIssues(base.error) };
    if (payloadError)
      return { code: "envelope.invalid_payload", message: describeIssues(payloadError) };
    const { event_type: type, schema_version: version } = base.data;
    const known = this.byType.get(type) ?? [];
    return known.length === 0
      ? { code: "envelope.unknown_type", message: `unknown event type ${type}` }
      : {
          code: "envelope.unsupported_version",
          message: `${type} schema_version ${version} is not supported (known: ${known
            .map((d) => d.schemaVersion)
            .reverse()
            .join(", ")})`,
        };
  }
}

interface Problem {
  readonly code: string;
  readonly message: string;
}

function upcastFailure(envelope: Envelope, newest: EventTypeDefinition, why: string): ParseResult {
  return {
    ok: false,
    code: "envelope.upcast_failed",
    message: `${envelope.event_type} v${envelope.schema_version} could not be upcast to v${newest.schemaVersion}: ${why}`,
    eventId: envelope.event_id,
  };
}

/**
 * Versions of a type are defined in order, without holes, and every version after the first says
 * how to upcast from the one before it: a chain from any stored version to the newest.
 */
function checkChain(definition: EventTypeDefinition, known: readonly EventTypeDefinition[]): void {
  const { type, schemaVersion } = definition;
  const newest = known[0]?.schemaVersion ?? 0;
  if (!Number.isInteger(schemaVersion) || schemaVersion !== newest + 1)
    throw new Error(
      `event type ${type} v${schemaVersion}: define versions in order from 1 (next is v${newest + 1})`,
    );
  if (schemaVersion > 1 && !definition.upcast)
    throw new Error(`event type ${type} v${schemaVersion} needs an upcast from v${newest}`);
  if (schemaVersion === 1 && definition.upcast)
    throw new Error(`event type ${type} v1 has nothing to upcast from`);
}

/**
 * A message too large or that cannot be serialized. A bound from a walk clears most messages
 * (./json-size); the rest are serialized, and as UTF-8 takes at most 3 bytes per UTF-16 code unit,
 * their bytes are counted only when the JSON text is long enough to possibly exceed the limit.
 */
function sizeProblemOf(raw: unknown, maxBytes: number): Problem | undefined {
  const bound = jsonBytesAtMost(raw, maxBytes);
  if (bound !== undefined && bound <= maxBytes) return undefined;
  let size: number;
  try {
    const text = JSON.stringify(raw) ?? "";
    size = text.length * 3 <= maxBytes ? text.length : utf8Bytes(text);
  } catch (error) {
    // JSON.stringify gives up on a value nested thousands of levels deep (or with a cycle).
    return {
      code: "envelope.invalid",
      message: `envelope cannot be serialized: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  return size > maxBytes
    ? {
        code: "envelope.too_large",
        message: `envelope is ${size} bytes, limit ${maxBytes}`,
      }
    : undefined;
}

/** A message that carries a claim check instead of its payload. */
function isClaim(raw: unknown): boolean {
  return !!raw && typeof raw === "object" && "claim_check" in raw;
}

/** A claim check's envelope: its payload is null, and it names a position in a stream. */
const ClaimEnvelope = z.extend(EnvelopeBase, {
  claim_check: ClaimCheck,
  payload: z.null(),
  aggregate: z.extend(AggregatePosition, { version: z.int().check(z.minimum(1)) }),
});

/** A claim check's envelope, parsed (its payload is checked where it is opened). */
function claimParse(raw: unknown) {
  return z.safeParse(ClaimEnvelope, raw);
}

function pickEventId(raw: unknown): string | undefined {
  if (raw && typeof raw === "object" && "event_id" in raw) {
    const id = (raw as { event_id: unknown }).event_id;
    return typeof id === "string" ? id.slice(0, 64) : undefined;
  }
  return undefined;
}

export type { Envelope, EnvelopeInput };

/** How many validation issues a message names; the rest are counted (a payload may hold many). */
const MAX_ISSUES_NAMED = 20;

function describeIssues(error: z.core.$ZodError): string {
  const { issues } = error;
  if (issues.length <= MAX_ISSUES_NAMED) return z.prettifyError(error);
  const named = z.prettifyError(new z.$ZodError(issues.slice(0, MAX_ISSUES_NAMED)));
  return `${named}\n... and ${issues.length - MAX_ISSUES_NAMED} more issues`;
}

/** Each personal field a definition declares must be one of its payload's top-level fields. */
function checkPersonalFields(definition: EventTypeDefinition): void {
  if (!definition.personal?.length) return;
  const shape = (definition.payload as { shape?: Record<string, unknown> }).shape;
  for (const field of definition.personal)
    if (!shape || !(field in shape))
      throw new Error(
        `event type ${definition.type}@${definition.schemaVersion} declares personal field ${JSON.stringify(field)}, which its payload does not have`,
      );
}
