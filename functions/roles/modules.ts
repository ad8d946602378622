import type { RoleModule } from "../core/role-module";
import { auditModule } from "./audit/module";
import { contentAgentModules } from "./content-agents/module";
import { conversationModule } from "./customer-support/conversation/module";
import { conversationProjectionModule } from "./customer-support/conversation-projection/module";
import { orderLookupModule } from "./customer-support/order-lookup/module";
import { replyGenerationModule } from "./customer-support/reply-generation/module";
import { routerModule } from "./customer-support/router/module";
import { senderModule } from "./customer-support/sender/module";
import { orchestratorModule } from "./orchestrator/module";
import { refundReviewModule } from "./refund-review/module";
import { taskProjectionModule } from "./task-projection/module";

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
