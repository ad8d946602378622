import { defineModule, handlerBeside } from "../../../kit";
import { REFUND_EVENT_TYPES } from "../../refund-review/events";
import { conversationContextReader } from "../conversation/conversation";
import { SUPPORT_EVENT_TYPES } from "../events/index";
import { TENANT_FAIR_CONCURRENCY } from "../tenant-fairness";
import { ROUTER, routerRole } from "./router";

/** The router: picks a turn's route from the conversation's recent messages (the `store` port). */
export const routerModule = defineModule({
  descriptor: ROUTER,
  entry: handlerBeside(import.meta.url),
  events: [...SUPPORT_EVENT_TYPES, ...REFUND_EVENT_TYPES],
  deployment: { ...TENANT_FAIR_CONCURRENCY, delivery: "relay" },
  build: (ports) => routerRole({ context: conversationContextReader(ports.store) }),
});
