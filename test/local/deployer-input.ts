import type { Placement, ResourceInput } from "../../lib/dev/local/deploy/model";

/** Where the deployer tests' stack is deployed. */
export const placement: Placement = {
  stackName: "AgentBus-t",
  region: "us-east-1",
  accountId: "1",
};

/** A resource whose properties are already resolved (what a deployer reads through its proxy). */
export function input(
  logicalId: string,
  Type: string,
  Properties: Record<string, unknown>,
  Metadata?: Record<string, unknown>,
): ResourceInput {
  return {
    logicalId,
    resource: { Type, Properties, Metadata },
    props: Properties,
    resolve: (value) => value,
  };
}
