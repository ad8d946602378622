import { type ContentStore, MAX_CONTENT_BYTES } from "../../core/agent/content";
import { PermanentError } from "../../core/errors";

/**
 * Files in another system's agent's answer (A2A file parts: bytes, or a URI), as the output keeps
 * them: bytes stored in the content store (a claim check: the output names their reference, never
 * carries them), a URI kept as the reference it is (never fetched). A file's bytes are bounded:
 * over the limit, the answer is refused with `a2a.file_too_large`, naming the agent, the file and
 * its size; bytes and no store to keep them in: `a2a.file_not_kept`.
 */

/** A file part as the agent sent it. */
export interface A2aFile {
  readonly name?: string;
  readonly mediaType?: string;
  readonly bytes?: Uint8Array;
  readonly uri?: string;
}

/** A file of the output: its bytes' reference in the content store, or its URI. */
export type A2aFileRef = {
  readonly name?: string;
  readonly mediaType?: string;
} & ({ readonly ref: string; readonly size: number } | { readonly uri: string });

/** The most bytes a file may have: its base64 must fit one stored content (350,000 characters). */
export const MAX_A2A_FILE_BYTES = Math.floor(MAX_CONTENT_BYTES / 4) * 3;

export interface FileKeeping {
  /** The agent, as errors name it. */
  readonly agent: string;
  /** Where bytes are kept; none: an answer with bytes is refused. */
  readonly store?: ContentStore;
  /** @default MAX_A2A_FILE_BYTES */
  readonly maxFileBytes?: number;
}

/** The limit a declaration sets, checked: a positive integer up to MAX_A2A_FILE_BYTES. */
export function fileLimit(agent: string, maxFileBytes = MAX_A2A_FILE_BYTES): number {
  if (!Number.isInteger(maxFileBytes) || maxFileBytes < 1 || maxFileBytes > MAX_A2A_FILE_BYTES)
    throw new Error(
      `the A2A agent ${agent}'s maxFileBytes is ${maxFileBytes}; it must be an integer from 1 to ${MAX_A2A_FILE_BYTES}`,
    );
  return maxFileBytes;
}

/** The answer's files as the output keeps them (bytes stored first), or the refusal. */
export async function keepFiles(
  files: readonly A2aFile[],
  keeping: FileKeeping,
): Promise<A2aFileRef[]> {
  const limit = fileLimit(keeping.agent, keeping.maxFileBytes);
  for (const file of files) refuseUnkept(file, keeping, limit);
  const kept: A2aFileRef[] = [];
  for (const { name, mediaType, bytes, uri } of files) {
    const about = { ...(name ? { name } : {}), ...(mediaType ? { mediaType } : {}) };
    if (bytes === undefined || !keeping.store) kept.push({ ...about, uri: uri ?? "" });
    else {
      const ref = await keeping.store.put(Buffer.from(bytes).toString("base64"));
      kept.push({ ...about, ref, size: bytes.byteLength });
    }
  }
  return kept;
}

function refuseUnkept(file: A2aFile, keeping: FileKeeping, limit: number): void {
  if (file.bytes === undefined) return;
  const which = `a file${file.name ? ` ${file.name}` : ""} of ${file.bytes.byteLength} bytes`;
  if (file.bytes.byteLength > limit)
    throw new PermanentError(
      "a2a.file_too_large",
      `the A2A agent ${keeping.agent} answered with ${which}; at most ${limit} are kept (it acted on the message: the file is at the agent)`,
      { details: { agent: keeping.agent, bytes: file.bytes.byteLength, limit } },
    );
  if (!keeping.store)
    throw new PermanentError(
      "a2a.file_not_kept",
      `the A2A agent ${keeping.agent} answered with ${which}, and the declaration names no store to keep it in (files: ports.content)`,
      { details: { agent: keeping.agent } },
    );
}

/** The bytes of a file the output keeps in `store`. */
export async function readA2aFile(
  store: ContentStore,
  file: { readonly ref: string },
): Promise<Uint8Array> {
  const [base64] = await store.getMany([file.ref]);
  return Buffer.from(base64 ?? "", "base64");
}
