import type { Construct } from "constructs";
import type { RoleModule } from "../../functions/core/role-module";
import {
  orchestratingDescriptor,
  type StepRoleTable,
  stepRolesOf,
} from "../../functions/core/steps";
import { AgentBusStack, type AgentBusStackProps } from "./agentbus-stack";
import { rolesWith } from "./app-roles";
import type { TopicName } from "./constructs/topic";
import { defineTopology, type GroupDeclaration, groupOf, type Topology } from "./topology";

/** The topics a stack has unless it says otherwise: commands, events and the audit trail. */
export const DEFAULT_TOPICS: readonly TopicName[] = ["commands", "events", "audit"];

export interface AgentBusProps extends Omit<AgentBusStackProps, "topology"> {
  /**
   * The role modules to deploy, one consumer group each (queues, consumer function, grants,
   * alarms), wired with the infrastructure of the integrations they use (`integrations`).
   */
  readonly roles: readonly RoleModule[];

  /**
   * The topics, one EventBridge bus each; every event type a role subscribes to must be on one.
   * @default ["commands", "events", "audit"]
   */
  readonly topics?: readonly TopicName[];
}

/**
 * What an application's stack is made of, apart from where and how it is deployed: its roles,
 * topics and integrations. The local runtime starts one (`startLocal({ stack })`).
 */
export type AgentBusApp = Pick<AgentBusProps, "roles" | "topics" | "integrations" | "workflows">;

/**
 * The topology of a set of role modules: the topics, and one group per module. An orchestrating
 * group also takes the answers of the step roles that spell their own, and emits their commands
 * (the table of step roles: functions/core/steps.ts).
 */
export function topologyOf(
  roles: readonly RoleModule[],
  topics: readonly TopicName[] = DEFAULT_TOPICS,
): Topology {
  const table = stepRolesOf(roles);
  const groups = roles.map((module) =>
    module.deployment.needs?.orchestrates ? orchestrating(groupOf(module), table) : groupOf(module),
  );
  return defineTopology({ topics, groups });
}

function orchestrating(group: GroupDeclaration, table: StepRoleTable): GroupDeclaration {
  return { ...group, role: orchestratingDescriptor(group.role, table) };
}

/**
 * AgentBus for a set of role modules: `new AgentBus(app, id, { roles, integrations })`. The
 * topology is made from the roles (topologyOf), so an application never writes one; everything
 * else is the AgentBusStack it is (the same constructs and logical IDs: the reference stack is one
 * use of it, bin/agentbus.ts).
 *
 * Its `workflows` run on the hub's orchestrator, added to the roles when none of them
 * orchestrates (rolesWith).
 */
export class AgentBus extends AgentBusStack {
  constructor(scope: Construct, id: string, props: AgentBusProps) {
    const { roles, topics, ...stackProps } = props;
    const deployed = rolesWith(roles, props.workflows ?? []);
    super(scope, id, { ...stackProps, topology: topologyOf(deployed, topics) });
  }
}
