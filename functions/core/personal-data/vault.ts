import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { registry as defaultRegistry, type Envelope, type EventRegistry } from "../../../schemas";
import { tenantOf } from "../../../schemas/ids";
import { PermanentError } from "../errors";
import type { CommitRequest } from "../ports";
import type { CustomerKeyStore, DataSubject } from "./customer-keys";
import { subjectKey } from "./customer-keys";
import { ERASED } from "./erased";
import { KeyCache, type KeyCacheLimits } from "./key-cache";
import type { KeyWrapping } from "./key-wrapping";

export { KEY_CACHE_MESSAGES, KEY_CACHE_MS } from "./key-cache";
export { ERASED };

/**
 * Crypto-shredding of personal data (seed 000 §4.3). The personal fields an event type declares
 * (`personal` on its definition) are stored sealed: AES-256-GCM under a data key of the
 * customer's own (./customer-keys), wrapped by KMS in AWS (./key-wrapping). Erasing the customer
 * deletes the key, and every sealed copy reads `[erased]` from then on; the ids and the rest of
 * the event stay, so consumers, the trace, rebuild and replay go on working.
 *
 * A sealed field is the text `sealed:v1:<tenant>:<customer>:<key id>:<base64 of iv|tag|cipher>`
 * (no id has a colon), with the tenant, customer and key id as associated data. Whose key seals
 * an event: its payload's `customer_id`; else the owner of its conversation, which the first
 * sealed event naming both claimed. An event of a conversation no customer claimed (stored
 * before sealing existed) stays plain.
 *
 * The buses, their archives, the queues and the dead-letter queues carry the fields sealed as
 * stored: a consumer opens only the fields its role reads (./delivery.ts), so deleting the key
 * reaches every copy at once.
 *
 * Plain keys stay in memory within the bounds of ./key-cache (KEY_CACHE_MS, KEY_CACHE_MESSAGES):
 * one key-store read and one KMS call per customer per container and period, not per event. Past
 * them the customer's record is read again, so a warm function opens an erased customer's field
 * as `[erased]` at most KEY_CACHE_MS after the erasure; one that sealed with the key just before
 * may go on sealing with it for that long, and what it seals then reads `[erased]`.
 */

/** What every sealed field begins with. */
export const SEALED_PREFIX = "sealed:v1:";
const OWNERS = 1_000;

export interface VaultOptions {
  readonly keys: CustomerKeyStore;
  readonly wrapping: KeyWrapping;
  readonly registry?: EventRegistry;
  readonly now?: () => Date;
  /** How long, and for how many fields, a plain key read is used (./key-cache). */
  readonly cache?: KeyCacheLimits;
}

export class Vault {
  private readonly registry: EventRegistry;
  private readonly now: () => Date;
  /** Plain keys by `<tenant>#<customer>#<key id>`. */
  private readonly plainKeys: KeyCache<Uint8Array>;
  /** Each customer's current key id, by `<tenant>#<customer>`. */
  private readonly currentKeys: KeyCache<string>;
  /** Keys found erased, by `<tenant>#<customer>#<key id>`: for good (ids are never reused). */
  private readonly erasedKeys = new Set<string>();
  /** Conversation owners (never change once claimed). */
  private readonly owners = new Map<string, DataSubject>();

  constructor(private readonly options: VaultOptions) {
    this.registry = options.registry ?? defaultRegistry;
    this.now = options.now ?? (() => new Date());
    const clock = () => this.now().getTime();
    this.plainKeys = new KeyCache(clock, options.cache);
    this.currentKeys = new KeyCache(clock, options.cache);
  }

  /**
   * The envelope with its declared personal fields sealed (itself when there are none). `claims`:
   * whether its customer claims its conversation (./customer-keys): a stored event's does; a
   * message a group keeps is sealed under its own customer's key, or its conversation's owner's,
   * and claims nothing, so a conversation is claimed and listed where its events are stored.
   */
  async seal(envelope: Envelope, claims = true): Promise<Envelope> {
    const fields = this.personalFieldsOf(envelope);
    if (!fields.length) return envelope;
    const subject = await this.subjectOf(envelope, claims);
    if (!subject) return envelope;
    const { keyId, key } = await this.sealingKey(subject);
    const payload = { ...(envelope.payload as Record<string, unknown>) };
    for (const field of fields)
      payload[field] = sealText(subject, keyId, key, payload[field] as string);
    return { ...envelope, payload };
  }

  /** A commit with the personal fields of what it appends and of a message it keeps sealed. */
  async sealCommit(request: CommitRequest): Promise<CommitRequest> {
    // One after another: the first of a conversation's events finds its owner and key, the
    // others find them cached.
    const sealed: Envelope[] = [];
    for (const event of request.append ?? []) sealed.push(await this.seal(event));
    const append = request.append && sealed;
    const kept = request.inbox?.envelope && (await this.seal(request.inbox.envelope, false));
    return {
      ...request,
      ...(append ? { append } : {}),
      ...(request.inbox && kept ? { inbox: { ...request.inbox, envelope: kept } } : {}),
    };
  }

  /**
   * Envelopes with their sealed fields opened, one after another: a batch of one customer's
   * events reads their key once.
   */
  async openAll(envelopes: readonly Envelope[]): Promise<Envelope[]> {
    const opened: Envelope[] = [];
    for (const envelope of envelopes) opened.push(await this.open(envelope));
    return opened;
  }

  /** An outcome record with the message it keeps opened. */
  async openRecord<R extends { readonly envelope?: Envelope }>(record: R): Promise<R> {
    return record.envelope ? { ...record, envelope: await this.open(record.envelope) } : record;
  }

  /** The envelope with every sealed field opened, or `[erased]` where its key is gone. */
  async open(envelope: Envelope): Promise<Envelope> {
    const payload = envelope.payload;
    if (!payload || typeof payload !== "object") return envelope;
    let opened: Record<string, unknown> | undefined;
    for (const [field, value] of Object.entries(payload))
      if (isSealed(value)) {
        opened ??= { ...(payload as Record<string, unknown>) };
        opened[field] = await this.openText(value);
      }
    return opened ? { ...envelope, payload: opened } : envelope;
  }

  /**
   * `payload` with each of `fields` that is sealed opened (`[erased]` where its key is gone): what
   * a consumer reads of a message of `tenant`. A field sealed for another tenant, malformed or
   * altered is a PermanentError (`personal.*`): no retry opens it.
   */
  async openFields(
    payload: Readonly<Record<string, unknown>>,
    fields: readonly string[],
    tenant: string,
  ): Promise<Record<string, unknown>> {
    const opened = { ...payload };
    for (const field of fields) {
      const value = payload[field];
      if (isSealed(value)) opened[field] = await this.openText(value, tenant);
    }
    return opened;
  }

  private personalFieldsOf(envelope: Envelope): string[] {
    const definition = this.registry.get(envelope.event_type, envelope.schema_version);
    const payload = envelope.payload as Record<string, unknown> | undefined;
    return (definition?.personal ?? []).filter(
      (field) => typeof payload?.[field] === "string" && !isSealed(payload[field]),
    );
  }

  private async subjectOf(envelope: Envelope, claims: boolean): Promise<DataSubject | undefined> {
    const payload = envelope.payload as { customer_id?: unknown; conversation_id?: unknown };
    const conversation =
      typeof payload.conversation_id === "string"
        ? payload.conversation_id
        : envelope.conversation_id;
    const known = conversation ? this.owners.get(conversation) : undefined;
    if (known) return known;
    if (typeof payload.customer_id === "string") {
      const subject = { tenant: tenantOf(envelope), customer: payload.customer_id };
      if (!conversation || !claims) return subject;
      return this.remember(
        conversation,
        await this.options.keys.claimConversation(conversation, subject),
      );
    }
    const owner = conversation ? await this.options.keys.ownerOf(conversation) : undefined;
    return owner && conversation ? this.remember(conversation, owner) : undefined;
  }

  private remember(conversation: string, owner: DataSubject): DataSubject {
    if (this.owners.size >= OWNERS) this.owners.clear();
    this.owners.set(conversation, owner);
    return owner;
  }

  /**
   * The key to seal with: the customer's current one, from the cache or with one read of its
   * record (a new one when it has none: never made, or erased since this container cached it).
   */
  private async sealingKey(subject: DataSubject): Promise<{ keyId: string; key: Uint8Array }> {
    const name = subjectKey(subject);
    const cachedId = this.currentKeys.use(name);
    const cached = cachedId ? this.plainKeys.use(`${name}#${cachedId}`) : undefined;
    if (cachedId && cached) return { keyId: cachedId, key: cached };
    const record = await this.options.keys.customer(subject);
    const current = record?.key
      ? {
          keyId: record.key.keyId,
          key: await this.options.wrapping.unwrap(record.key.wrapped, subject),
        }
      : await this.makeKey(subject);
    this.currentKeys.keep(name, current.keyId);
    this.plainKeys.keep(`${name}#${current.keyId}`, current.key);
    return current;
  }

  /** A new key for the customer, or the one another container made first. */
  private async makeKey(subject: DataSubject): Promise<{ keyId: string; key: Uint8Array }> {
    const made = await this.options.wrapping.newKey(subject);
    const keyId = randomBytes(8).toString("hex");
    const kept = await this.options.keys.createKey(
      subject,
      { keyId, wrapped: made.wrapped },
      this.now(),
    );
    return kept.keyId === keyId
      ? { keyId, key: made.plain }
      : { keyId: kept.keyId, key: await this.options.wrapping.unwrap(kept.wrapped, subject) };
  }

  /**
   * The plain key `keyId` of the customer; null once it is erased. A cached key is used within
   * the cache's bounds; past them the customer's record is read again, and a key no longer in
   * it is erased.
   */
  private async plainKey(subject: DataSubject, keyId: string): Promise<Uint8Array | null> {
    const name = `${subjectKey(subject)}#${keyId}`;
    if (this.erasedKeys.has(name)) return null;
    const cached = this.plainKeys.use(name);
    if (cached) return cached;
    const record = await this.options.keys.customer(subject);
    if (record?.key?.keyId !== keyId) {
      if (this.erasedKeys.size >= OWNERS) this.erasedKeys.clear();
      this.erasedKeys.add(name);
      return null;
    }
    const key = await this.options.wrapping.unwrap(record.key.wrapped, subject);
    this.plainKeys.keep(name, key);
    return key;
  }

  private async openText(sealed: string, tenant?: string): Promise<string> {
    const { subject, keyId, body } = partsOf(sealed);
    if (tenant !== undefined && subject.tenant !== tenant)
      throw new PermanentError(
        "personal.foreign_tenant",
        `a field sealed for tenant ${subject.tenant} came in a message of tenant ${tenant}`,
      );
    const key = await this.plainKey(subject, keyId);
    return key ? openText(subject, keyId, key, body) : ERASED;
  }
}

export function isSealed(value: unknown): value is string {
  return typeof value === "string" && value.startsWith(SEALED_PREFIX);
}

/** A sealed field's customer, key id and body (iv | tag | cipher, base64). */
function partsOf(sealed: string): { subject: DataSubject; keyId: string; body: string } {
  const parts = sealed.slice(SEALED_PREFIX.length).split(":");
  const [tenant, customer, keyId, body] = parts;
  if (parts.length !== 4 || !tenant || !customer || !keyId || !body)
    // Its text is not quoted: a value that only looks sealed may be a customer's own words.
    throw new PermanentError(
      "personal.malformed",
      `a sealed field is malformed (${parts.length} parts of the 4 a sealed field has, ${sealed.length} characters)`,
    );
  return { subject: { tenant, customer }, keyId, body };
}

function associatedData(subject: DataSubject, keyId: string): Buffer {
  return Buffer.from(`${subject.tenant}:${subject.customer}:${keyId}`, "utf8");
}

function sealText(subject: DataSubject, keyId: string, key: Uint8Array, text: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", key, iv).setAAD(associatedData(subject, keyId));
  const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()]);
  const sealed = Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64");
  return `${SEALED_PREFIX}${subject.tenant}:${subject.customer}:${keyId}:${sealed}`;
}

function openText(subject: DataSubject, keyId: string, key: Uint8Array, body: string): string {
  const bytes = Buffer.from(body, "base64");
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, 12))
      .setAAD(associatedData(subject, keyId))
      .setAuthTag(bytes.subarray(12, 28));
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
  } catch {
    throw new PermanentError(
      "personal.altered",
      `a field sealed under ${subject.tenant}/${subject.customer} key ${keyId} does not open: it was altered`,
    );
  }
}
