import { defineModule } from "../../core/role-module";
import { moduleEntry } from "../../handlers/module-entry";
import { CONTENT_EVENT_TYPES } from "../content-agents/events";
import { SUPPORT_EVENT_TYPES } from "../customer-support/events/index";
import { REFUND_EVENT_TYPES } from "../refund-review/events";
import { auditModule } from "./index";

/**
 * The reference stack's audit group: its function defines the reference applications' event types
 * too, which the stack routes to it, so that it validates their messages and keeps the personal
 * fields of those it keeps whole sealed (a function knows the types its bundle defines).
 */
export const { create, handler } = moduleEntry(
  defineModule({
    ...auditModule,
    events: [...SUPPORT_EVENT_TYPES, ...REFUND_EVENT_TYPES, ...CONTENT_EVENT_TYPES],
  }),
);
