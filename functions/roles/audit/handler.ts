import { defineModule } from "../../core/role-module";
import { moduleEntry } from "../../handlers/module-entry";
import { REFERENCE_EVENT_TYPES } from "../events";
import { auditModule } from "./index";

/**
 * The reference stack's audit group: its function defines the reference applications' event types
 * too (as they declare them: ../events.ts), which the stack routes to it, so that it validates
 * their messages and keeps the personal fields of those it keeps whole sealed (a function knows
 * the types its bundle defines).
 */
export const { create, handler } = moduleEntry(
  defineModule({ ...auditModule, events: REFERENCE_EVENT_TYPES }),
);
