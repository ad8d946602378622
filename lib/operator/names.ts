import { outputId } from "../infra/output-ids";

/** The queue URLs of one consumer group. */
export interface GroupQueueUrls {
  readonly queue: string;
  readonly deadLetterQueue: string;
  /** The buffer queue the rules deliver to (groups delivered through a dispatcher or pipe). */
  readonly buffer?: string;
  readonly bufferDeadLetterQueue?: string;
}

/**
 * The names the local tools use, read from the stack's outputs as the CLI and deployed users read
 * them (`cdk deploy --outputs-file`), not from what some function's environment happens to hold.
 */
export interface StackNames {
  readonly tables: {
    readonly state: string;
    readonly events: string;
    readonly inbox: string;
    readonly sideEffects: string;
    /** Present when the topology has the support groups. */
    readonly orders?: string;
    /** The payment stand-in's table, when a group pays refunds. */
    readonly payments?: string;
    /** Each customer's data key, wrapped (functions/core/personal-data). */
    readonly customerKeys?: string;
  };
  /** The KMS key that wraps the customers' data keys. */
  readonly customerKeysKey?: string;
  /** Bus name of each topic of the topology. */
  readonly buses: Readonly<Record<string, string>>;
  /** Queue URLs of each consumer group of the topology. */
  readonly groups: Readonly<Record<string, GroupQueueUrls>>;
  /** Where the relay sends stream batches it gave up on. */
  readonly relayFailureQueue: string;
  /** The SNS topic the sender delivers replies to (with the support groups). */
  readonly repliesTopic?: string;
  /** Every dead-letter queue of the groups: each consumer queue's and each buffer's. */
  readonly deadLetterQueues: readonly string[];
}

/** What the names need of a topology: its topics and its groups' names. */
export interface TopologyNames {
  readonly topics: readonly string[];
  readonly groups: readonly { readonly name: string }[];
}

/**
 * The stack's names from its outputs and the topology it was synthesized from. Every output a
 * name needs and the outputs lack is named at once.
 */
export function stackNames(
  outputs: Readonly<Record<string, string>>,
  topology: TopologyNames,
): StackNames {
  const missing: string[] = [];
  const required = (key: string) => {
    const value = outputs[key];
    if (value === undefined) missing.push(key);
    return value ?? "";
  };
  const buses = Object.fromEntries(
    topology.topics.map((topic) => [topic, required(`${outputId(topic)}BusName`)]),
  );
  const groups = Object.fromEntries(
    topology.groups.map(({ name }) => {
      const id = outputId(name);
      const urls: GroupQueueUrls = {
        queue: required(`${id}QueueUrl`),
        deadLetterQueue: required(`${id}DeadLetterQueueUrl`),
        buffer: outputs[`${id}BufferQueueUrl`],
        bufferDeadLetterQueue: outputs[`${id}BufferDeadLetterQueueUrl`],
      };
      return [name, urls];
    }),
  );
  const names: StackNames = {
    tables: {
      state: required("StateTableName"),
      events: required("EventsTableName"),
      inbox: required("InboxTableName"),
      sideEffects: required("SideEffectsTableName"),
      orders: outputs.OrdersTableName,
      payments: outputs.PaymentsTableName,
      customerKeys: outputs.CustomerKeysTableName,
    },
    customerKeysKey: outputs.CustomerKeysKeyArn,
    buses,
    groups,
    relayFailureQueue: required("RelayFailureQueueUrl"),
    repliesTopic: outputs.RepliesTopicArn,
    deadLetterQueues: Object.values(groups).flatMap((g) =>
      g.bufferDeadLetterQueue ? [g.deadLetterQueue, g.bufferDeadLetterQueue] : [g.deadLetterQueue],
    ),
  };
  if (missing.length > 0)
    throw new Error(`the stack's outputs lack ${missing.join(", ")}: the local tools need them`);
  return names;
}
