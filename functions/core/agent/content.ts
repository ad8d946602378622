import { createHash } from "node:crypto";
import { PermanentError } from "../errors";

/**
 * Content an agent run refers to (prompts, model turns, tool results), stored once by the hash of
 * its text so that the run's item keeps 64-character references instead of the text: a run of a
 * hundred turns stays a few KB however long its conversation grows. Writes are idempotent (the
 * same text has the same reference), and a write that a crash leaves unreferenced costs nothing
 * but its bytes. Implementations: InMemoryContentStore here; the DynamoDB adapter in
 * functions/adapters/dynamodb.
 */
export interface ContentStore {
  /** Store `text` (idempotent); its reference. */
  put(text: string): Promise<string>;
  /** The texts of these references, in the same order; a missing one is a permanent error. */
  getMany(refs: readonly string[]): Promise<string[]>;
}

/** The reference of a text: the hex SHA-256 of its UTF-8 bytes. */
export function contentRef(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

export function missingContent(ref: string): PermanentError {
  return new PermanentError("content.missing", `no content is stored under ${ref}`, {
    details: { ref },
  });
}

/** The ContentStore of tests, the simulation and the local runtime. */
export class InMemoryContentStore implements ContentStore {
  readonly texts = new Map<string, string>();
  /** How many texts were written (a write of a text already stored counts too). */
  writes = 0;

  async put(text: string): Promise<string> {
    const ref = contentRef(text);
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
}
