import type { WorkflowDefinition } from "../core/dag/definition";
import type { RoleModule } from "../core/role-module";
import { auditModule } from "./audit/index";
import { contentAgentModules } from "./content-agents/index";
import { CONTENT_WORKFLOWS } from "./content-agents/workflows";
import { conversationModule } from "./customer-support/conversation/index";
import { conversationProjectionModule } from "./customer-support/conversation-projection/index";
import { orderLookupModule } from "./customer-support/order-lookup/index";
import { replyGenerationModule } from "./customer-support/reply-generation/index";
import { routerModule } from "./customer-support/router/index";
import { senderModule } from "./customer-support/sender/index";
import { orchestratorModule } from "./orchestrator/index";
import { refundReviewModule } from "./refund-review/index";
import { taskProjectionModule } from "./task-projection/index";

/**
 * Every role AgentBus deploys, one module each (functions/core/role-module.ts). The topology, the
 * stack, the simulation and the local runtime build from this list: adding a role is its folder
 * and one line here.
 */
export const ROLE_MODULES: readonly RoleModule[] = [
  taskProjectionModule,
  auditModule,
  orchestratorModule,
  ...contentAgentModules,
  conversationModule,
  routerModule,
  orderLookupModule,
  replyGenerationModule,
  senderModule,
  conversationProjectionModule,
  refundReviewModule,
];

/**
 * The workflows the reference stack gives its orchestrator (`workflows` of `new AgentBus`): the
 * content-production application's, every version a run may still be on.
 */
export const REFERENCE_WORKFLOWS: readonly WorkflowDefinition[] = CONTENT_WORKFLOWS;
