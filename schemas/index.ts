import { defineAgentRunEvents } from "./events/agent-run";
import { defineConversationEvents } from "./events/conversation";
import { defineOperatorEvents } from "./events/operator";
import { defineSupportCommands } from "./events/support-commands";
import { defineSupportFailureEvents } from "./events/support-failure";
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
defineAgentRunEvents(registry);
defineConversationEvents(registry);
defineSupportCommands(registry);
defineSupportFailureEvents(registry);
defineOperatorEvents(registry);
