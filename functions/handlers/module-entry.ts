import { buildRole, type RoleModule } from "../core/role-module";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import { lambdaEntry } from "./lambda-entry";
import { observability } from "./observe";
import { awsRolePorts, type PortBuilders, type PortOverrides } from "./role-ports";

export interface ModuleHandlerOptions extends ConsumerOptions, PortOverrides {}

/**
 * The Lambda side of a role module: its ports from the function's environment for what it needs
 * (./role-ports), its settings from the same environment, and the shared consumer with the role
 * it builds, counting what the module's `attention` rules find in what it emits. Every error
 * names the group and the bad variable.
 */
export function createModuleHandler(
  module: RoleModule,
  options: ModuleHandlerOptions = {},
  builders: PortBuilders = {},
): SqsBatchHandler {
  const group = module.descriptor.group;
  const env = options.env ?? process.env;
  const obs = options.observability ?? observability(group, group);
  const dynamodb = options.dynamodb ?? containerAwsClient();
  const wiring = { group, env, dynamodb, sqs: options.sqs, observability: obs, overrides: options };
  const ports = awsRolePorts(wiring, module.deployment.needs ?? {}, builders);
  const role = buildRole(module, ports, env);
  const attention = module.deployment.attention;
  return createConsumerHandler(role, { ...options, dynamodb, observability: obs, attention });
}

/**
 * `create` and the Lambda `handler` of a role module (what its `handler.ts` exports), with the
 * port builder of each need its module declares (./ports: `{ model: modelPort }`, ...).
 */
export function moduleEntry(module: RoleModule, builders: PortBuilders = {}) {
  return lambdaEntry((options?: ModuleHandlerOptions) =>
    createModuleHandler(module, options, builders),
  );
}

/**
 * `create` and the Lambda `handler` of a family of modules that share one entry file (the content
 * agents): the function's `GROUP_NAME` picks the module.
 */
export function familyEntry(modules: readonly RoleModule[], builders: PortBuilders = {}) {
  return lambdaEntry((options?: ModuleHandlerOptions) => {
    const group = (options?.env ?? process.env).GROUP_NAME;
    const module = modules.find((m) => m.descriptor.group === group);
    if (!module) {
      const known = modules.map((m) => m.descriptor.group).join(", ");
      throw new Error(`GROUP_NAME is ${group ?? "unset"}; this entry serves ${known}`);
    }
    return createModuleHandler(module, options, builders);
  });
}
