import { type ContentStore, MAX_CONTENT_BYTES } from "../../core/agent/content";

/**
 * Files in another system's agent's answer (A2A file parts: bytes, or a URI), as the output keeps
 * them: bytes stored in the content store (a claim check: the output names their reference, never
 * carries them), a URI kept as the reference it is (never fetched). A file's bytes are bounded. The
 * agent has acted when its answer comes, so a file that cannot be kept (over the limit, or bytes
 * and no store) does not fail the call, which would record an applied write as failed: the output
 * names it with its size and why it was left at the agent (`omitted`), and the call succeeds.
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
} & (
  | { readonly ref: string; readonly size: number }
  | { readonly uri: string }
  | { readonly omitted: FileOmitted; readonly size: number }
);

/** Why a file's bytes were left at the agent: over `maxFileBytes`, or no store was named. */
export type FileOmitted = "too_large" | "no_store";

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

/** The answer's files as the output keeps them: bytes stored, a URI as it is, else omitted. */
export async function keepFiles(
  files: readonly A2aFile[],
  keeping: FileKeeping,
): Promise<A2aFileRef[]> {
  const limit = fileLimit(keeping.agent, keeping.maxFileBytes);
  const kept: A2aFileRef[] = [];
  for (const { name, mediaType, bytes, uri } of files) {
    const about = { ...(name ? { name } : {}), ...(mediaType ? { mediaType } : {}) };
    const omitted = bytes === undefined ? undefined : omission(bytes, keeping.store, limit);
    if (bytes === undefined) kept.push({ ...about, uri: uri ?? "" });
    else if (omitted || !keeping.store) {
      kept.push({ ...about, omitted: omitted ?? "no_store", size: bytes.byteLength });
    } else {
      const ref = await keeping.store.put(Buffer.from(bytes).toString("base64"));
      kept.push({ ...about, ref, size: bytes.byteLength });
    }
  }
  return kept;
}

function omission(
  bytes: Uint8Array,
  store: ContentStore | undefined,
  limit: number,
): FileOmitted | undefined {
  if (bytes.byteLength > limit) return "too_large";
  return store ? undefined : "no_store";
}

/** The bytes of a file the output keeps in `store`. */
export async function readA2aFile(
  store: ContentStore,
  file: { readonly ref: string },
): Promise<Uint8Array> {
  const [base64] = await store.getMany([file.ref]);
  return Buffer.from(base64 ?? "", "base64");
}
