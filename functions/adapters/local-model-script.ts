import type { ModelRequest, ModelToolCall } from "../core/model";

/** What a script of the local model (./local-model.ts) is, and what it answers with. */

export const LOCAL_MODEL_NAME = "deterministic-local-model";

/** A scripted turn that asks for tools instead of answering. */
export class ToolUse {
  constructor(readonly calls: readonly ModelToolCall[]) {}
}

/**
 * A role's canned behaviour: an object is answered as JSON text, a string as is, a ToolUse asks
 * for its tools.
 */
export type LocalScript = (request: ModelRequest, facts: RequestFacts) => string | object | ToolUse;

/** Scripts by the role a request names (`request.metadata.role`). */
export type LocalScripts = Readonly<Record<string, LocalScript>>;

/** What scripts derive their answers from: a hash of the request text and helpers over it. */
export interface RequestFacts {
  /** The system prompt and every message, joined by newlines. */
  readonly text: string;
  /** Hex SHA-256 of the role and `text`. */
  readonly digest: string;
  /** A stable pick from `options`; `salt` gives independent picks from one request. */
  pick<T>(options: readonly T[], salt: string): T;
  /** A stable integer in [min, max]. */
  int(min: number, max: number, salt: string): number;
}
