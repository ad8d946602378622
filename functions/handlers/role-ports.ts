import type { AwsClient, AwsService } from "../adapters/aws/client";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoModelControls } from "../adapters/dynamodb/model-controls";
import { type IntegrationUses, type PortOverrides, portsOf, usesOf } from "../core/integration";
import { parseEnv } from "../core/parse-env";
import type { RolePorts } from "../core/role-module";
import { containerAwsClient } from "./aws";
import { budgetsOf, ConsumerEnv, ModelBudgetEnv } from "./env";
import type { AnyIntegrationAdapter } from "./integration-adapter";
import type { Observability } from "./observe";

/**
 * A role's ports on AWS. `store` (the consumer's tables, read) is always built; every other port
 * is built by the adapter of the integration the module uses (its folder's `aws.ts`), which the
 * module's entry passes. The entry names them instead of this file importing them all so that a
 * function's bundle holds only the adapters its role uses (a consumer that calls no model
 * carries no Bedrock client: `npm run bench -- bundles`); `awsRolePorts` refuses an entry whose
 * adapters and integrations differ, naming each.
 *
 * Tests and the local runtime may give stand-ins by integration name (`integrations`), which win.
 */

export interface PortOptions {
  /** Stand-ins by integration name (`{ model, replyChannel }`), used instead of the adapters. */
  readonly integrations?: PortOverrides;
  /** AWS clients by service (a test's fake Bedrock), instead of the container's. */
  readonly clients?: Partial<Readonly<Record<AwsService, AwsClient>>>;
}

export interface PortWiring {
  readonly group: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly dynamodb: AwsClient;
  readonly sqs?: AwsClient;
  readonly observability: Observability;
  readonly options: PortOptions;
}

/** Every mismatch between a module's integrations and the adapters its entry passes. */
export function adapterProblems(
  uses: IntegrationUses | undefined,
  adapters: readonly AnyIntegrationAdapter[],
): string[] {
  const used = new Set(usesOf(uses).map(([, use]) => use.integration.name));
  const given = new Set(adapters.map((a) => a.integration.name));
  return [
    ...[...used]
      .filter((name) => !given.has(name))
      .map((name) => `it uses the ${name} integration but its entry passes no ${name} adapter`),
    ...[...given]
      .filter((name) => !used.has(name))
      .map((name) => `its entry passes the ${name} adapter but its module does not use ${name}`),
  ];
}

/** The ports of a role whose module uses `uses`, each built by its integration's adapter. */
export function awsRolePorts(
  wiring: PortWiring,
  uses: IntegrationUses | undefined,
  adapters: readonly AnyIntegrationAdapter[],
): RolePorts {
  const problems = adapterProblems(uses, adapters);
  if (problems.length > 0) throw new Error(`${wiring.group}: ${problems.join("; ")}`);
  const byName = new Map(adapters.map((a) => [a.integration.name, a]));
  const { options, observability } = wiring;
  const adapterWiring = {
    group: wiring.group,
    env: wiring.env,
    client: (service: AwsService) => clientFor(wiring, service),
    warn: (message: string, details?: Readonly<Record<string, unknown>>) =>
      observability.logger.warn(message, details ?? {}),
  };
  return portsOf(
    { store: consumerStore(wiring), controls: modelControls(wiring) },
    uses,
    (use) => byName.get(use.integration.name)?.build(adapterWiring, use.options),
    options.integrations,
  );
}

/** The client for a service: the options', the wiring's, else the container's. */
function clientFor(wiring: PortWiring, service: AwsService): AwsClient {
  const given = wiring.options.clients?.[service];
  if (given) return given;
  if (service === "dynamodb") return wiring.dynamodb;
  if (service === "sqs" && wiring.sqs) return wiring.sqs;
  return containerAwsClient();
}

/** The stops and model spend on the state table, with the budgets the environment sets. */
function modelControls({ env, group, dynamodb }: PortWiring): DynamoModelControls {
  const { STATE_TABLE } = parseEnv(ConsumerEnv, env, group);
  const budgets = budgetsOf(parseEnv(ModelBudgetEnv, env, group));
  return new DynamoModelControls({ client: dynamodb, tableName: STATE_TABLE, budgets });
}

function consumerStore({ env, group, dynamodb }: PortWiring): DynamoConsumerStore {
  const tables = parseEnv(ConsumerEnv, env, group);
  return new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: tables.STATE_TABLE, events: tables.EVENTS_TABLE, inbox: tables.INBOX_TABLE },
  });
}
