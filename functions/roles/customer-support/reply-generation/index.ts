import { defineModule, handlerBeside, model, OUTPUT_GUARD_ATTENTION, use } from "../../../kit";
import { conversationReader } from "../conversation/conversation";
import { ReplyDraft } from "../events/conversation";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { STEP_FAILED_ATTENTION } from "../step-failure";
import { TENANT_FAIR_CONCURRENCY } from "../tenant-fairness";
import { replyGeneration } from "./local-script";
import { REPLY_DRAFT_SCHEMA, REPLY_GENERATION, replyGenerationRole } from "./reply-generation";
import { HELD_REPLY_ATTENTION } from "./review";

/**
 * Reply generation: drafts a turn's reply with a model, one call per invocation (as for the
 * content agents), and holds a risky one for a person's review.
 */
export const replyGenerationModule = defineModule({
  descriptor: REPLY_GENERATION,
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  deployment: {
    batchSize: 1,
    ...TENANT_FAIR_CONCURRENCY,
    delivery: "relay",
    functionTimeoutSeconds: 120,
    needs: { heartbeat: "visibility" },
    // A reply the output guard refused (./reply-guard.ts) raises `output-guard-refusals` too.
    attention: [HELD_REPLY_ATTENTION, STEP_FAILED_ATTENTION, OUTPUT_GUARD_ATTENTION],
  },
  // On the local model, it answers with its script (./local-script.ts).
  uses: { model: use(model, { localScripts: { "reply-generation": replyGeneration } }) },
  modelSchemas: { [REPLY_DRAFT_SCHEMA]: ReplyDraft },
  build: (ports) =>
    replyGenerationRole({
      model: ports.model,
      conversation: conversationReader(ports.store),
    }),
});
