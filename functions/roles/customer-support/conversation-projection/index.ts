import { defineModule, handlerBeside } from "../../../kit";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { conversationProjection } from "./conversation-projection";

/** The conversation read model: each conversation's turns and their status, for people. */
export const conversationProjectionModule = defineModule({
  descriptor: conversationProjection,
  entry: handlerBeside(import.meta.url),
  events: SUPPORT_EVENT_TYPES,
  // It emits nothing and folds only stored events: it reads them from the event store's stream,
  // in batches, with no bus, rule or queue per event on the way. A batch gathers for 2 seconds,
  // so a turn's facts, which come within seconds, mostly write the view once a batch rather than
  // once each: the view is a read model for people, and lags by up to that much.
  deployment: { delivery: "stream", batchSize: 100, batchingWindowSeconds: 2 },
  build: () => conversationProjection,
});
