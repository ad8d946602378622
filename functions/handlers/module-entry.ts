import { buildRole, type RoleModule } from "../core/role-module";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import type { AnyIntegrationAdapter } from "./integration-adapter";
import { lambdaEntry } from "./lambda-entry";
import { observability } from "./observe";
import { awsRolePorts, type PortOptions } from "./role-ports";

export interface ModuleHandlerOptions extends ConsumerOptions, PortOptions {}

/**
 * The Lambda side of a role module: its ports from the function's environment, one per
 * integration it uses (./role-ports), its settings from the same environment, and the shared
 * consumer with the role it builds, counting what the module's `attention` rules find in what it
 * emits. Every error names the group and the bad variable.
 */
export function createModuleHandler(
  module: RoleModule,
  options: ModuleHandlerOptions = {},
  adapters: readonly AnyIntegrationAdapter[] = [],
): SqsBatchHandler {
  const group = module.descriptor.group;
  const env = options.env ?? process.env;
  const obs = options.observability ?? observability(group, group);
  const dynamodb = options.dynamodb ?? containerAwsClient();
  const wiring = { group, env, dynamodb, sqs: options.sqs, observability: obs, options };
  const ports = awsRolePorts(wiring, module.uses, adapters);
  const role = buildRole(module, ports, env);
  const attention = module.deployment.attention;
  return createConsumerHandler(role, { ...options, dynamodb, observability: obs, attention });
}

/**
 * `create` and the Lambda `handler` of a role module (what its `handler.ts` exports), with the
 * AWS adapter of each integration its module uses (`[ordersAdapter, modelAdapter]`, from each
 * integration's `aws.ts`).
 */
export function moduleEntry(module: RoleModule, adapters: readonly AnyIntegrationAdapter[] = []) {
  return lambdaEntry((options?: ModuleHandlerOptions) =>
    createModuleHandler(module, options, adapters),
  );
}

/**
 * `create` and the Lambda `handler` of a family of modules that share one entry file (the content
 * agents): the function's `GROUP_NAME` picks the module.
 */
export function familyEntry(
  modules: readonly RoleModule[],
  adapters: readonly AnyIntegrationAdapter[] = [],
) {
  return lambdaEntry((options?: ModuleHandlerOptions) => {
    const group = (options?.env ?? process.env).GROUP_NAME;
    const module = modules.find((m) => m.descriptor.group === group);
    if (!module) {
      const known = modules.map((m) => m.descriptor.group).join(", ");
      throw new Error(`GROUP_NAME is ${group ?? "unset"}; this entry serves ${known}`);
    }
    return createModuleHandler(module, options, adapters);
  });
}
