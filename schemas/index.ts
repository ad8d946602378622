import { defineConversationEvents } from "./events/conversation";
import { defineOperatorEvents } from "./events/operator";
import { defineTaskEvents } from "./events/task";
import { defineWorkflowEvents } from "./events/workflow";
import { defineWorkflowCancelEvents } from "./events/workflow-cancel";
import { defineWorkflowResolveEvents } from "./events/workflow-resolve";
import { EventRegistry } from "./registry";

export * from "./envelope";
export * from "./ids";
export * from "./registry";

/** The registry of every event type AgentBus knows. */
export const registry = new EventRegistry();
defineTaskEvents(registry);
defineWorkflowEvents(registry);
defineWorkflowCancelEvents(registry);
defineWorkflowResolveEvents(registry);
defineConversationEvents(registry);
defineOperatorEvents(registry);
