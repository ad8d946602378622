import type { ModelToolCall } from "../core/model";

/** A scripted turn of the local model (./local-model.ts) that asks for tools instead of answering. */
export class ToolUse {
  constructor(readonly calls: readonly ModelToolCall[]) {}
}
