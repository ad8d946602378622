import * as z from "zod";
import {
  type Envelope,
  EnvelopeBase,
  type EnvelopeInput,
  envelopeBytes,
  MAX_ENVELOPE_BYTES,
} from "./envelope";

/** The topics (one EventBridge bus each). Commands ask for work; events record facts. */
export const TOPICS = ["commands", "events", "audit"] as const;
export type Topic = (typeof TOPICS)[number];

export interface EventTypeDefinition<P extends z.ZodType = z.ZodType> {
  readonly type: string;
  readonly schemaVersion: number;
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
}

export type ParseResult =
  | { ok: true; envelope: Envelope; definition: EventTypeDefinition }
  | { ok: false; code: string; message: string; eventId?: string };

/** Event types, their payload schemas and schema versions, in one place. */
export class EventRegistry {
  private readonly byKey = new Map<string, EventTypeDefinition>();
  private readonly schemas = new Map<string, z.ZodType>();

  define<P extends z.ZodType>(definition: EventTypeDefinition<P>): EventTypeDefinition<P> {
    const key = `${definition.type}@${definition.schemaVersion}`;
    if (this.byKey.has(key)) throw new Error(`event type ${key} is defined twice`);
    const typeCheck = EnvelopeBase.shape.event_type.safeParse(definition.type);
    if (!typeCheck.success)
      throw new Error(
        `event type name ${JSON.stringify(definition.type)} ${typeCheck.error.issues[0]?.message}`,
      );
    this.byKey.set(key, definition);
    this.schemas.set(
      key,
      EnvelopeBase.extend({
        event_type: z.literal(definition.type),
        schema_version: z.literal(definition.schemaVersion),
        payload: definition.payload,
      }),
    );
    return definition;
  }

  get(type: string, schemaVersion: number): EventTypeDefinition | undefined {
    return this.byKey.get(`${type}@${schemaVersion}`);
  }

  has(type: string): boolean {
    return this.definitions().some((d) => d.type === type);
  }

  definitions(): EventTypeDefinition[] {
    return [...this.byKey.values()];
  }

  /** The full envelope schema of one type and version (for JSON Schema export). */
  envelopeSchema(type: string, schemaVersion: number): z.ZodType | undefined {
    return this.schemas.get(`${type}@${schemaVersion}`);
  }

  /** Validate an untrusted message: size, envelope, known type and version, payload. */
  parse(raw: unknown): ParseResult {
    const eventId = pickEventId(raw);
    let size: number;
    try {
      size = envelopeBytes(raw);
    } catch (error) {
      // JSON.stringify gives up on a value nested thousands of levels deep (or with a cycle).
      return {
        ok: false,
        code: "envelope.invalid",
        message: `envelope cannot be serialized: ${error instanceof Error ? error.message : String(error)}`,
        eventId,
      };
    }
    if (size > MAX_ENVELOPE_BYTES) {
      return {
        ok: false,
        code: "envelope.too_large",
        message: `envelope is ${size} bytes, limit ${MAX_ENVELOPE_BYTES}`,
        eventId,
      };
    }
    const base = EnvelopeBase.safeParse(raw);
    if (!base.success) {
      return { ok: false, code: "envelope.invalid", message: describeIssues(base.error), eventId };
    }
    const definition = this.get(base.data.event_type, base.data.schema_version);
    if (!definition) {
      const known = this.definitions().filter((d) => d.type === base.data.event_type);
      return known.length === 0
        ? {
            ok: false,
            code: "envelope.unknown_type",
            message: `unknown event type ${base.data.event_type}`,
            eventId,
          }
        : {
            ok: false,
            code: "envelope.unsupported_version",
            message: `${base.data.event_type} schema_version ${base.data.schema_version} is not supported (known: ${known.map((d) => d.schemaVersion).join(", ")})`,
            eventId,
          };
    }
    const full = this.schemas.get(`${definition.type}@${definition.schemaVersion}`)?.safeParse(raw);
    if (!full?.success) {
      return {
        ok: false,
        code: "envelope.invalid_payload",
        message: full ? describeIssues(full.error) : "no schema",
        eventId,
      };
    }
    const data = full.data as z.output<typeof EnvelopeBase>;
    if (definition.sequenced !== data.aggregate.version > 0) {
      return {
        ok: false,
        code: "envelope.invalid_sequence",
        message: definition.sequenced
          ? `${definition.type} is sequenced: aggregate.version must be >= 1`
          : `${definition.type} is unsequenced: aggregate.version must be 0`,
        eventId,
      };
    }
    const envelope: Envelope = { ...data, order_key: data.order_key ?? data.aggregate.id };
    return { ok: true, envelope, definition };
  }
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

function describeIssues(error: z.ZodError): string {
  const { issues } = error;
  if (issues.length <= MAX_ISSUES_NAMED) return z.prettifyError(error);
  const named = z.prettifyError(new z.ZodError(issues.slice(0, MAX_ISSUES_NAMED)));
  return `${named}\n... and ${issues.length - MAX_ISSUES_NAMED} more issues`;
}
