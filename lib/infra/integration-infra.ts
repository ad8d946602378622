import type { RemovalPolicy, Stack } from "aws-cdk-lib";
import type { Integration } from "../../functions/core/integration";
import type { GroupNeeds } from "../../functions/core/role-module";
import type { ConsumerGroup } from "./constructs/consumer-group";

/**
 * The stack side of an integration (its folder's `infra.ts`): what the stack provisions or
 * references for it, once, and the environment and grants of each consumer group whose module
 * uses it (least privilege: a group gets what its use's options need, nothing more). The stack
 * calls `wire` once with every group that uses the integration; an integration no group uses is
 * not wired at all.
 */

/** A consumer group that uses the integration, with the options of its use. */
export interface IntegrationUser<Options> {
  readonly group: ConsumerGroup;
  readonly options: Options;
}

/** What an integration's infrastructure is built in and may read. */
export interface IntegrationScope {
  /** Where its resources go (a construct of its own under the stack). */
  readonly stack: Stack;
  /** The deployment stage (part of physical names). */
  readonly stage: string;
  /** What happens to its stateful resources when they leave the stack. @default RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** Every consumer group of the stack, with what it declares of the hub. */
  readonly groups: readonly { readonly group: ConsumerGroup; readonly needs: GroupNeeds }[];
  /** Stack-wide settings an integration may read. */
  readonly settings: IntegrationSettings;
  /** Adds a stack output (the operator's tools and the local runtime read outputs by id). */
  output(id: string, value: string, description: string): void;
}

/** Stack-wide settings an integration may read. */
export interface IntegrationSettings {
  /** Depth of a DAG agent's queue at which the orchestrator stops releasing work to it. */
  readonly queueDepthThreshold?: number;
}

export interface IntegrationInfra<Port, Options = undefined> {
  readonly integration: Integration<Port, Options>;
  /** Provision or reference what it needs, and wire each user. */
  wire(scope: IntegrationScope, users: readonly IntegrationUser<Options>[]): void;
}

/** An integration's infrastructure, its types checked against its declaration. */
export function defineInfra<Port, Options>(
  integration: Integration<Port, Options>,
  wire: (scope: IntegrationScope, users: readonly IntegrationUser<Options>[]) => void,
): IntegrationInfra<Port, Options> {
  return { integration, wire };
}

// biome-ignore lint/suspicious/noExplicitAny: the infrastructure of any integration
export type AnyIntegrationInfra = IntegrationInfra<any, any>;
