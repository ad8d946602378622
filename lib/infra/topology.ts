import { Duration } from "aws-cdk-lib";
import type { RoleDescriptor } from "../../functions/core/role";
import type { AttentionSignal } from "../../functions/handlers/consumer-metrics";
import { audit } from "../../functions/roles/audit/audit";
import { contentAgentDescriptor } from "../../functions/roles/content-agents/content-agent";
import { conversation } from "../../functions/roles/customer-support/conversation/conversation";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { ORDER_LOOKUP } from "../../functions/roles/customer-support/order-lookup/order-lookup";
import { REPLY_GENERATION } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import { ROUTER } from "../../functions/roles/customer-support/router/router";
import { SENDER } from "../../functions/roles/customer-support/sender/sender";
import { ORCHESTRATOR } from "../../functions/roles/orchestrator/orchestrator";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { registry, TOPICS, type Topic as TopicName } from "../../schemas";
import { CONTENT_ROLES } from "../../schemas/events/workflow";
import {
  type Delivery,
  GROUP_NAME_MAX_LENGTH,
  type GroupSettings,
  groupSettingsProblems,
  kebabCaseProblem,
  type Ordering,
  type OrderKey,
  pickGroupSettings,
  withGroupDefaults,
} from "./constructs/consumer-group-rules";
import { handlerEntryProblem } from "./constructs/function";

/**
 * The messaging topology of AgentBus in one place: which topics exist and which consumer groups
 * (agent roles) subscribe to what. The stack builds every bus, archive, schema, rule, queue,
 * dead-letter queue, function, alarm and permission from it.
 */

export type { Delivery, Ordering, OrderKey, TopicName };

/** What the topology needs of a role: its descriptor (functions/core/pipeline RoleDescriptor). */
export type TopologyRole = RoleDescriptor;

/** One consumer group: an agent role, its handler, and how its queue and consumer behave. */
/**
 * What a group needs besides its queues, its function and the tables; the stack wires and grants
 * each need it finds declared, whatever the group's name.
 */
export interface GroupNeeds {
  /**
   * Its consumer extends a message's visibility during a long model call (`HEARTBEAT_SECONDS`,
   * `VISIBILITY_TIMEOUT_SECONDS`); `"events"`: it also publishes its role's heartbeats on the
   * events bus (`EVENTS_BUS_NAME`, PutEvents on that bus).
   */
  readonly heartbeat?: "visibility" | "events";
  /**
   * Its decision calls a language model: the stack gives its consumer the model setting and the
   * grant (lib/infra/constructs/model-access.ts), and, its state not being a fold of its streams, the
   * operator's rebuild and check refuse it.
   */
  readonly model?: true;
  /** A DAG agent: the orchestrator reads its queue's depth (backpressure). */
  readonly dagAgent?: boolean;
  /**
   * It orchestrates DAG runs: it reads the DAG agents' queue depths (`AGENT_QUEUE_URLS`,
   * `QUEUE_DEPTH_THRESHOLD`, GetQueueAttributes on those queues), and the lease sweeper serves
   * its runs.
   */
  readonly orchestrates?: boolean;
  /** It reads the orders table (`ORDERS_TABLE`, GetItem). */
  readonly orders?: boolean;
  /** It sends replies through the reply channel (SNS FIFO topic: `CHANNEL_*`, Publish). */
  readonly replyChannel?: boolean;
}

export interface GroupDeclaration {
  /** Kebab-case, at most 40 characters; must equal the role's `group`. */
  readonly name: string;

  /**
   * The agent role (from `functions/roles`); its `subscriptions` are the event types the group
   * receives, each from the topic the registry puts it on.
   */
  readonly role: TopologyRole;

  /** Handler file relative to the repository root, e.g. `functions/handlers/audit.ts`. */
  readonly handler: string;

  /**
   * What the group's consumer can emit that a person must act on: each signal is watched by an
   * alarm whose description names the command to run (ATTENTION_METRICS in
   * functions/handlers/consumer-metrics.ts).
   * @default none
   */
  readonly attention?: readonly AttentionSignal[];

  /**
   * `fifo`: in order per order key (FIFO queue, buffer and delivery hop). `none`: no order needed
   * (standard queue and DLQ, the rule targets the queue directly).
   * @default "fifo"
   */
  readonly ordering?: Ordering;

  /**
   * Envelope field used as the FIFO message group; only `order_key` is supported.
   * @default "order_key"
   */
  readonly orderKey?: OrderKey;

  /**
   * Messages per consumer invocation: 1..10 for FIFO, 1..10000 for standard queues.
   * @default 10
   */
  readonly batchSize?: number;

  /**
   * Most concurrent consumer invocations (2..1000).
   * @default 2
   */
  readonly maxConcurrency?: number;

  /**
   * Receives before a message moves to its dead-letter queue.
   * @default 5
   */
  readonly maxReceiveCount?: number;

  /**
   * Consumer function timeout.
   * @default Duration.seconds(30)
   */
  readonly functionTimeout?: Duration;

  /**
   * Visibility timeout of the group's queue; at least 6x `functionTimeout`.
   * @default - 6x `functionTimeout`
   */
  readonly visibilityTimeout?: Duration;

  /**
   * How a FIFO group's buffer reaches its FIFO queue: a dispatch function or an EventBridge Pipe.
   * @default "dispatch-function"
   */
  readonly delivery?: Delivery;

  /** What the stack wires for it besides its queues (model calls' heartbeats, orders, ...). */
  readonly needs?: GroupNeeds;

  /**
   * How long a FIFO group's delivery hop waits to gather full batches of 10 (whole seconds,
   * 0..300): fuller SendMessageBatch calls, up to this much latency per message under light load.
   * @default - none
   */
  readonly deliveryBatchingWindow?: Duration;
}

export interface TopologyDeclaration {
  /** The topics (one EventBridge bus each). */
  readonly topics: readonly TopicName[];
  /** The consumer groups. */
  readonly groups: readonly GroupDeclaration[];
}

/** The event types a group receives from one topic. */
export interface TopicSubscription {
  readonly topic: TopicName;
  readonly eventTypes: readonly string[];
}

/** A group declaration with its defaults applied and its subscriptions split by topic. */
export type GroupSpec = Omit<GroupDeclaration, keyof GroupSettings> &
  GroupSettings & {
    readonly subscriptions: readonly TopicSubscription[];
  };

/** A validated topology: every group with its defaults applied. */
export interface Topology {
  readonly topics: readonly TopicName[];
  readonly groups: readonly GroupSpec[];
}

/** What validation looks up; the defaults are the project's registry and the file system. */
export interface TopologyContext {
  /** Registered event types and the topic each is published on. */
  readonly eventTypes: readonly { readonly type: string; readonly topic: string }[];
  /** Whether a handler file (absolute path) exists. */
  readonly handlerExists?: (absolutePath: string) => boolean;
}

/** The project's registry as a validation context. */
export function registryContext(): TopologyContext {
  return { eventTypes: registry.definitions().map((d) => ({ type: d.type, topic: d.topic })) };
}

/**
 * Everything wrong with a topology declaration, each problem naming the bad value: unknown
 * topics, duplicate or badly named groups, a name that differs from the role's group, event
 * types that are not registered or whose topic is not declared, settings out of range (batch
 * size per queue type, concurrency, visibility timeout vs function timeout, order key,
 * delivery), and handler files that do not exist. Empty when the declaration is sound.
 */
export function topologyProblems(
  declaration: TopologyDeclaration,
  context: TopologyContext = registryContext(),
): string[] {
  const problems: string[] = [];
  const topics = declaration.topics ?? [];
  if (topics.length === 0) problems.push("topics must not be empty");
  const seenTopics = new Set<string>();
  for (const topic of topics) {
    if (!(TOPICS as readonly string[]).includes(topic)) {
      problems.push(
        `topic ${JSON.stringify(topic)} is not one of ${TOPICS.map((t) => JSON.stringify(t)).join(", ")}`,
      );
    }
    if (seenTopics.has(topic)) problems.push(`topic ${JSON.stringify(topic)} is declared twice`);
    seenTopics.add(topic);
  }
  const seenGroups = new Set<string>();
  for (const group of declaration.groups ?? []) {
    if (seenGroups.has(group.name)) {
      problems.push(`group name ${JSON.stringify(group.name)} is declared twice`);
    }
    seenGroups.add(group.name);
    problems.push(
      ...groupProblems(group, seenTopics, context).map(
        (p) => `group ${JSON.stringify(group.name)}: ${p}`,
      ),
    );
  }
  return problems;
}

/** Everything wrong with one group declaration, given the declared topics. */
export function groupProblems(
  group: GroupDeclaration,
  declaredTopics: ReadonlySet<string>,
  context: TopologyContext = registryContext(),
): string[] {
  const problems: (string | undefined)[] = [
    kebabCaseProblem("group name", group.name, GROUP_NAME_MAX_LENGTH),
  ];
  if (group.role?.group !== group.name) {
    problems.push(
      `role group ${JSON.stringify(group.role?.group)} differs from the group name ${JSON.stringify(group.name)} (the consumer refuses to start when they differ)`,
    );
  }
  const subscriptions = group.role?.subscriptions ?? [];
  if (subscriptions.length === 0) problems.push("the role subscribes to no event types");
  const seen = new Set<string>();
  for (const type of subscriptions) {
    if (seen.has(type)) problems.push(`event type ${JSON.stringify(type)} is subscribed twice`);
    seen.add(type);
    const onTopics = [
      ...new Set(context.eventTypes.filter((e) => e.type === type).map((e) => e.topic)),
    ];
    if (onTopics.length === 0) {
      problems.push(`event type ${JSON.stringify(type)} is not in the registry`);
      continue;
    }
    for (const topic of onTopics) {
      if (!declaredTopics.has(topic)) {
        problems.push(
          `event type ${JSON.stringify(type)} is published on topic ${JSON.stringify(topic)}, which is not declared`,
        );
      }
    }
  }
  problems.push(...groupSettingsProblems(settingsOf(group)));
  problems.push(handlerEntryProblem(group.handler, context.handlerExists));
  return problems.filter((p): p is string => p !== undefined);
}

/**
 * Validate a declaration up front (every problem at once, each naming the bad value) and return
 * it typed, with every default applied and each group's subscriptions split by topic.
 */
export function defineTopology(
  declaration: TopologyDeclaration,
  context: TopologyContext = registryContext(),
): Topology {
  const problems = topologyProblems(declaration, context);
  if (problems.length > 0) {
    throw new Error(`invalid topology:\n  - ${problems.join("\n  - ")}`);
  }
  return {
    topics: [...declaration.topics],
    groups: declaration.groups.map((group) => ({
      ...group,
      ...settingsOf(group),
      subscriptions: subscriptionsByTopic(group.role.subscriptions, declaration.topics, context),
    })),
  };
}

function settingsOf(group: GroupDeclaration): GroupSettings {
  return withGroupDefaults(pickGroupSettings(group));
}

/** The subscribed types per declared topic, in the topics' declared order. */
function subscriptionsByTopic(
  eventTypes: readonly string[],
  topics: readonly TopicName[],
  context: TopologyContext,
): TopicSubscription[] {
  return topics
    .map((topic) => ({
      topic,
      eventTypes: eventTypes.filter((type) =>
        context.eventTypes.some((e) => e.type === type && e.topic === topic),
      ),
    }))
    .filter((subscription) => subscription.eventTypes.length > 0);
}

/**
 * The content agents: group = role, subscribed to `<role>.requested` and `<role>.cancel.requested`.
 * Their decision calls a model (`needs.model`), built by the handler at run time.
 */
export const contentAgentGroups: readonly GroupDeclaration[] = CONTENT_ROLES.map((role) => ({
  name: role,
  role: contentAgentDescriptor(role),
  handler: `functions/handlers/${role}.ts`,
  // One model call per invocation: a batch of them could outlast the function timeout.
  batchSize: 1,
  functionTimeout: Duration.minutes(2),
  needs: { model: true, heartbeat: "events", dagAgent: true },
  // An agent run that gave up waits for a person (reset or resolve the node).
  attention: ["needs-human"],
}));

/**
 * The customer-support conversation (seed 000 §10): ingress, router, order lookup, reply
 * generation, sender and the conversation read model. Every command and fact of a conversation
 * carries `order_key = conversation_id`, so each group handles one conversation's work in order.
 * Roles whose decision needs a port (orders, model, channel) are declared by their descriptors
 * here; their handlers build the decision, which spreads the same descriptor, with the port.
 */
export const supportGroups: readonly GroupDeclaration[] = [
  { name: "conversation", role: conversation, handler: "functions/handlers/conversation.ts" },
  { name: "router", role: ROUTER, handler: "functions/handlers/router.ts" },
  {
    name: "order-lookup",
    role: ORDER_LOOKUP,
    handler: "functions/handlers/order-lookup.ts",
    needs: { orders: true },
  },
  {
    name: "reply-generation",
    role: REPLY_GENERATION,
    handler: "functions/handlers/reply-generation.ts",
    // One model call per invocation, as for the content agents.
    batchSize: 1,
    functionTimeout: Duration.minutes(2),
    needs: { model: true, heartbeat: "visibility" },
    attention: ["held-replies"],
  },
  {
    name: "sender",
    role: SENDER,
    handler: "functions/handlers/sender.ts",
    batchSize: 1,
    // The sender escalates an outcome it cannot learn after 5 attempts (MAX_UNKNOWN_ATTEMPTS);
    // the queue must hand the message out at least that often before dead-lettering it.
    maxReceiveCount: 8,
    // It reads the order a reply rests on again before sending it.
    needs: { replyChannel: true, orders: true },
    attention: ["unknown-side-effects"],
  },
  {
    name: "conversation-projection",
    role: conversationProjection,
    handler: "functions/handlers/conversation-projection.ts",
  },
];

/**
 * AgentBus's own topology. To add an agent role: write its decision in `functions/roles/`, its
 * handler (wiring only) in `functions/handlers/`, and declare the group here.
 */
export const topology = defineTopology({
  topics: ["commands", "events", "audit"],
  groups: [
    {
      name: "task-projection",
      role: taskProjection,
      handler: "functions/handlers/task-projection.ts",
    },
    {
      name: "audit",
      role: audit,
      handler: "functions/handlers/audit.ts",
      ordering: "none",
    },
    {
      // Every event of a run carries order_key = run_id: one run's events are handled in order.
      name: "orchestrator",
      role: ORCHESTRATOR,
      handler: "functions/handlers/orchestrator.ts",
      needs: { orchestrates: true },
      attention: ["failed-runs"],
    },
    ...contentAgentGroups,
    ...supportGroups,
  ],
});
