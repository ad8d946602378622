import { defineAgentRunEvents } from "./events/agent-run";
import { defineConversationEvents } from "./events/conversation";
import { defineOperatorEvents } from "./events/operator";
import { defineStepEvents } from "./events/step";
import { defineTaskEvents } from "./events/task";
import { defineWorkflowEvents } from "./events/workflow";
import { defineWorkflowCancelEvents } from "./events/workflow-cancel";
import { defineWorkflowResolveEvents } from "./events/workflow-resolve";
import { defineWorkflowWaitEvents } from "./events/workflow-wait";
import { EventRegistry, type EventTypeDefinition, type PayloadTypes } from "./registry";
import type * as z from "./zod";

export * from "./envelope";
export * from "./ids";
export * from "./registry";

/**
 * The registry of every event type: the hub's own (`DEFINITIONS`) and those an application
 * defines (`defineEventType`), which its role modules register when they are imported.
 */
export const registry = new EventRegistry();

/**
 * The hub's own event types, in the order defined: the task, the workflow, the agent run, the
 * conversation's ingress (the front door's contract) and the operator's record. The payload types
 * below are read from these, so a type's payload is declared once, where the type is defined.
 */
export const DEFINITIONS = [
  ...defineTaskEvents(registry),
  ...defineWorkflowEvents(registry),
  ...defineWorkflowCancelEvents(registry),
  ...defineWorkflowResolveEvents(registry),
  ...defineWorkflowWaitEvents(registry),
  ...defineStepEvents(registry),
  ...defineAgentRunEvents(registry),
  ...defineConversationEvents(registry),
  ...defineOperatorEvents(registry),
] as const;

/**
 * The payload of each registered event type, at its newest schema version: those of
 * `DEFINITIONS`, and those an application adds. An interface, so that an application that
 * defines its own types (`defineEventType`) adds their payloads by declaration merging, through
 * the kit that re-exports it:
 *
 *   declare module "agentbus" {
 *     interface EventPayloads extends PayloadTypes<typeof entryRecorded> {}
 *   }
 */
export interface EventPayloads extends PayloadTypes<(typeof DEFINITIONS)[number]> {}
/** The name of a registered event type. */
export type EventType = keyof EventPayloads;

/**
 * An application's own event type (or a later schema version of one), registered in `registry`:
 * the one the hub's functions read in the same process, so that the application's role, its
 * consumer, the topology and the test kit know the type once its module is imported. Defining
 * the same definition object again does nothing (a module evaluated twice); a different one
 * under a known type and version throws, naming it. A role module's `events` are defined so.
 */
export function defineEventType<P extends z.ZodMiniType, T extends string, V extends number>(
  definition: EventTypeDefinition<P, T, V>,
): EventTypeDefinition<P, T, V> {
  return registry.define(definition);
}
