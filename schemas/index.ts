import { defineAgentRunEvents } from "./events/agent-run";
import { defineConversationEvents } from "./events/conversation";
import { defineOperatorEvents } from "./events/operator";
import { defineRefundEvents } from "./events/refund";
import { defineSupportCommands } from "./events/support-commands";
import { defineSupportFailureEvents } from "./events/support-failure";
import { defineSupportSupersededEvents } from "./events/support-superseded";
import { defineTaskEvents } from "./events/task";
import { defineWorkflowEvents } from "./events/workflow";
import { defineWorkflowCancelEvents } from "./events/workflow-cancel";
import { defineWorkflowResolveEvents } from "./events/workflow-resolve";
import { EventRegistry, type PayloadTypes } from "./registry";

export * from "./envelope";
export * from "./ids";
export * from "./registry";

/** The registry of every event type AgentBus knows. */
export const registry = new EventRegistry();

/**
 * Every definition in `registry`, in the order defined. The payload types below are read from
 * these, so a type's payload is declared once, where the type is defined.
 */
export const DEFINITIONS = [
  ...defineTaskEvents(registry),
  ...defineWorkflowEvents(registry),
  ...defineWorkflowCancelEvents(registry),
  ...defineWorkflowResolveEvents(registry),
  ...defineAgentRunEvents(registry),
  ...defineConversationEvents(registry),
  ...defineSupportCommands(registry),
  ...defineSupportFailureEvents(registry),
  ...defineSupportSupersededEvents(registry),
  ...defineOperatorEvents(registry),
  ...defineRefundEvents(registry),
] as const;

/** The payload of each registered event type, at its newest schema version. */
export type EventPayloads = PayloadTypes<(typeof DEFINITIONS)[number]>;
/** The name of a registered event type. */
export type EventType = keyof EventPayloads;
