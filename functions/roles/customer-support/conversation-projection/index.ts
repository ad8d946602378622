import { defineModule, handlerBeside } from "../../../kit";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { conversationProjection } from "./conversation-projection";

/** The conversation read model: each conversation's turns and their status, for people. */
export const conversationProjectionModule = defineModule({
  descriptor: conversationProjection,
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  // It emits nothing and folds only stored events: it reads them from the event store's stream,
  // in batches, with no bus, rule or queue per event on the way.
  deployment: { delivery: "stream", batchSize: 100 },
  build: () => conversationProjection,
});
