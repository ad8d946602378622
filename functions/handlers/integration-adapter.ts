import type { AwsClient, AwsService } from "../adapters/aws/client";
import type { Integration } from "../core/integration";

/**
 * The AWS side of an integration (its folder's `aws.ts`): how a deployed function builds the
 * integration's port from its environment. A role's Lambda entry passes the adapters of the
 * integrations its module uses (functions/handlers/module-entry.ts), so that a function's bundle
 * holds only those.
 */

/** What an adapter is built from. */
export interface AdapterWiring {
  /** The consumer group, for error messages. */
  readonly group: string;
  /** The function's environment (what the integration's infrastructure set). */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The container's AWS client for a service (a test's, where it gives one). */
  client(service: AwsService): AwsClient;
  /** Logs a warning with the record's ids. */
  warn(message: string, details?: Readonly<Record<string, unknown>>): void;
}

export interface IntegrationAdapter<Port, Options = undefined> {
  readonly integration: Integration<Port, Options>;
  /** The port, from the function's environment; errors name the group and every bad variable. */
  build(wiring: AdapterWiring, options: Options): Port;
}

/** An adapter with its types checked against its integration. */
export function defineAdapter<Port, Options>(
  integration: Integration<Port, Options>,
  build: (wiring: AdapterWiring, options: Options) => Port,
): IntegrationAdapter<Port, Options> {
  return { integration, build };
}

// biome-ignore lint/suspicious/noExplicitAny: an adapter of any port with any options
export type AnyIntegrationAdapter = IntegrationAdapter<any, any>;
