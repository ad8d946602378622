import { createHash } from "node:crypto";
import { PermanentError } from "../errors";
import type { ModelMessage } from "../model";
import { ERASED } from "../personal-data/erased";

/**
 * Content an agent run refers to (prompts, model turns, tool results), stored once by the hash of
 * its text so that the run's item keeps 64-character references instead of the text: a run of a
 * hundred turns stays a few KB however long its conversation grows. Writes are idempotent (the
 * same text in the same scope has the same reference), and a write that a crash leaves
 * unreferenced costs nothing but its bytes. Implementations: InMemoryContentStore here; the
 * DynamoDB adapter in functions/adapters/dynamodb.
 *
 * An agent run writes in its own scope (scopedContent, ./agent-role.ts): the same text in two runs
 * is two items. Erasing a customer overwrites the texts of the customer's runs in place
 * (../personal-data/erase.ts), so a text shared with another customer's run would be erased
 * under that run too: an identical question, or a tool's `{"found":false}` that a run can be led
 * to produce, would let one customer's erasure rewrite what other customers' runs, of any tenant,
 * send their model. Storing apart costs nothing: a put of a text already stored bills the same.
 */
export interface ContentStore {
  /**
   * Store `text` (idempotent); its reference. `scope`: whose text it is (an agent run's state
   * key), hashed with it so that no other scope's reference finds it.
   */
  put(text: string, scope?: string): Promise<string>;
  /** The texts of these references, in the same order; a missing one is a permanent error. */
  getMany(refs: readonly string[]): Promise<string[]>;
}

/**
 * The reference of a text: the hex SHA-256 of its UTF-8 bytes, after its scope's and a NUL when it
 * has one (a scope is a key, which holds no NUL).
 */
export function contentRef(text: string, scope?: string): string {
  const hash = createHash("sha256");
  if (scope !== undefined) hash.update(`${scope}\u0000`);
  return hash.update(text).digest("hex");
}

/** The store as one scope writes to it: every put in `scope` (ContentStore.put). */
export function scopedContent(store: ContentStore, scope: string): ContentStore {
  return {
    put: (text) => store.put(text, scope),
    getMany: (refs) => store.getMany(refs),
  };
}

/** Largest text stored, in UTF-8 bytes (a DynamoDB item is at most 400 KB, key and names included). */
export const MAX_CONTENT_BYTES = 350_000;

/** PermanentError `content.too_large` for a text over MAX_CONTENT_BYTES, else undefined. */
export function contentTooLarge(text: string): PermanentError | undefined {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= MAX_CONTENT_BYTES) return undefined;
  return new PermanentError(
    "content.too_large",
    `a text of ${bytes} UTF-8 bytes cannot be stored; at most ${MAX_CONTENT_BYTES}`,
    { details: { bytes, limit: MAX_CONTENT_BYTES } },
  );
}

/** The code of the error a read of a reference not stored throws. */
export const CONTENT_MISSING = "content.missing";

export function missingContent(ref: string): PermanentError {
  return new PermanentError(CONTENT_MISSING, `no content is stored under ${ref}`, {
    details: { ref },
  });
}

/**
 * Texts written again in place (functions/core/personal-data/erase.ts): a run's messages once its
 * customer is erased. The reference stays the hash of what was first stored under it.
 */
export interface ContentOverwriter {
  getMany(refs: readonly string[]): Promise<string[]>;
  overwrite(ref: string, text: string): Promise<void>;
}

/** What a run may read back of a message, a tool's result or a record: ids and names. */
const KEPT_WHEN_ERASED = new Set(["role", "id", "toolUseId", "tool_use_id", "name", "status"]);

/**
 * A stored JSON text with every string in it `[erased]` but the names and ids a run needs to read
 * it back (a message's role, a tool call's id and name); what is not JSON becomes `"[erased]"`.
 */
export function erasedContent(text: string): string {
  const erase = (value: unknown, key?: string): unknown => {
    if (typeof value === "string")
      return key !== undefined && KEPT_WHEN_ERASED.has(key) ? value : ERASED;
    if (Array.isArray(value)) return value.map((v) => erase(v));
    if (value && typeof value === "object")
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, erase(v, k)]));
    return value;
  };
  try {
    return JSON.stringify(erase(JSON.parse(text)));
  } catch {
    return JSON.stringify(ERASED);
  }
}

/**
 * The tool outputs a run's model saw, as JSON texts, oldest first: what the output guard
 * (../output-guard.ts) is given to tell a paste of them from an answer. Read from the texts of the
 * run's conversation (each user turn's tool results, refusals and errors included), as an agent
 * role's `finish` is given them (RunConversation, ./agent-role.ts).
 */
export function toolOutputsSeen(conversation: readonly string[]): string[] {
  return conversation.flatMap((text) => {
    const message = JSON.parse(text) as Partial<ModelMessage> | null;
    return (message?.toolResults ?? []).map((result) => JSON.stringify(result.content ?? null));
  });
}

/** The ContentStore of tests, the simulation and the local runtime. */
export class InMemoryContentStore implements ContentStore, ContentOverwriter {
  readonly texts = new Map<string, string>();
  /** How many texts were written (a write of a text already stored counts too). */
  writes = 0;

  async put(text: string, scope?: string): Promise<string> {
    const tooLarge = contentTooLarge(text);
    if (tooLarge) throw tooLarge;
    const ref = contentRef(text, scope);
    this.texts.set(ref, text);
    this.writes += 1;
    return ref;
  }

  async getMany(refs: readonly string[]): Promise<string[]> {
    return refs.map((ref) => {
      const text = this.texts.get(ref);
      if (text === undefined) throw missingContent(ref);
      return text;
    });
  }

  async overwrite(ref: string, text: string): Promise<void> {
    this.texts.set(ref, text);
  }
}
