import { type ContentStore, InMemoryContentStore } from "../../core/agent/content";
import { defineIntegration } from "../../core/integration";

/**
 * An agent loop's content store (functions/core/agent/content.ts): the messages of its
 * conversation with the model, kept by content hash beside its state so that each step's commit
 * stays small. On AWS, items of the hub's state table.
 */
export const content = /* @__PURE__ */ defineIntegration<ContentStore>({
  name: "content",
  access: "write",
  does: "keeps its model conversation's content",
  defaults: undefined,
  memory: () => new InMemoryContentStore(),
});
