import type { AwsClient } from "../adapters/aws/client";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import type { ModelPort } from "../core/model";
import { parseEnv } from "../core/parse-env";
import type { PaymentsPort } from "../core/payments";
import type { GroupNeeds, OrdersPort, RolePorts } from "../core/role-module";
import type { ChannelPort } from "../core/side-effects";
import { ConsumerEnv } from "./env";
import type { Observability } from "./observe";

/**
 * A role's ports on AWS. `store` (the consumer's tables, read) is always built; every other port
 * comes from a builder in ./ports, one per need (`model`, `orders`, `replyChannel`,
 * `orchestrates`), which a module's entry passes for what its module declares. The entry names
 * them instead of this file importing them all so that a function's bundle holds only the adapters
 * its role uses (a consumer that calls no model carries no Bedrock client and no scripted model:
 * `npm run bench -- bundles`); `awsRolePorts` refuses an entry whose builders and needs differ,
 * naming the need.
 *
 * Tests and the local runtime may inject `model`, `channel`, `orders` or `payments`, which win.
 */

export interface PortOverrides {
  readonly model?: ModelPort;
  readonly channel?: ChannelPort;
  readonly orders?: OrdersPort;
  readonly payments?: PaymentsPort;
  /** Client for the reply channel's SNS topic (default: the container's). */
  readonly sns?: AwsClient;
  /** Client for `MODEL_PROVIDER=bedrock` (default: the container's). */
  readonly bedrock?: AwsClient;
}

export interface PortWiring {
  readonly group: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly dynamodb: AwsClient;
  readonly sqs?: AwsClient;
  readonly observability: Observability;
  readonly overrides: PortOverrides;
}

/** The builder of each need's ports (./ports). */
export interface PortBuilders {
  readonly model?: (wiring: PortWiring) => ModelPort;
  readonly orders?: (wiring: PortWiring) => OrdersPort;
  readonly replyChannel?: (wiring: PortWiring) => Pick<RolePorts, "channel" | "sideEffects">;
  readonly orchestrates?: (wiring: PortWiring) => RolePorts["queueDepth"];
  readonly tools?: (wiring: PortWiring) => Pick<RolePorts, "content" | "sideEffects">;
  readonly payments?: (wiring: PortWiring) => PaymentsPort;
}

const PORT_NEEDS = [
  "model",
  "orders",
  "replyChannel",
  "orchestrates",
  "tools",
  "payments",
] as const;

/** Every mismatch between a module's needs and the builders its entry passes, by need. */
export function portBuilderProblems(needs: GroupNeeds, builders: PortBuilders): string[] {
  return PORT_NEEDS.flatMap((need) => {
    if (Boolean(needs[need]) === (builders[need] !== undefined)) return [];
    return needs[need]
      ? [`it declares needs.${need} but its entry passes no ${need} port builder (./ports)`]
      : [`its entry passes the ${need} port builder but it does not declare needs.${need}`];
  });
}

/** The ports of a role whose module needs `needs`, each built by its need's builder. */
export function awsRolePorts(
  wiring: PortWiring,
  needs: GroupNeeds,
  builders: PortBuilders,
): RolePorts {
  const problems = portBuilderProblems(needs, builders);
  if (problems.length > 0) throw new Error(`${wiring.group}: ${problems.join("; ")}`);
  return {
    store: consumerStore(wiring),
    model: builders.model?.(wiring),
    orders: builders.orders?.(wiring),
    ...builders.replyChannel?.(wiring),
    ...builders.tools?.(wiring),
    queueDepth: builders.orchestrates?.(wiring),
    payments: builders.payments?.(wiring),
  };
}

function consumerStore({ env, group, dynamodb }: PortWiring): DynamoConsumerStore {
  const tables = parseEnv(ConsumerEnv, env, group);
  return new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: tables.STATE_TABLE, events: tables.EVENTS_TABLE, inbox: tables.INBOX_TABLE },
  });
}
