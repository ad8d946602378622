import { Duration } from "aws-cdk-lib";
import type { AttentionRule } from "../../functions/core/attention";
import { type AnyIntegrationUse, usesOf } from "../../functions/core/integration";
import type { RoleDescriptor } from "../../functions/core/role";
import type { GroupNeeds, RoleModule } from "../../functions/core/role-module";
import { isTopic, registry, TOPICS, type Topic as TopicName } from "../../schemas";
import { signalProblems } from "./constructs/attention-signals";
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
import type { PersonalDataAccess } from "./constructs/customer-keys";
import { handlerEntryProblem } from "./constructs/function";

/**
 * The messaging topology of AgentBus in one place: which topics exist and which consumer groups
 * (agent roles) subscribe to what. The stack builds every bus, archive, schema, rule, queue,
 * dead-letter queue, function, alarm and permission from it.
 */

export type { Delivery, Ordering, OrderKey, PersonalDataAccess, TopicName };

/** What the topology needs of a role: its descriptor (functions/core/pipeline RoleDescriptor). */
export type TopologyRole = RoleDescriptor;

export type { AttentionRule, GroupNeeds };

/** One consumer group: an agent role, its handler, and how its queue and consumer behave. */
export interface GroupDeclaration {
  /** Kebab-case, at most 40 characters; must equal the role's `group`. */
  readonly name: string;

  /**
   * The agent role (from `functions/roles`); its `subscriptions` are the event types the group
   * receives, each from the topic the registry puts it on.
   */
  readonly role: TopologyRole;

  /** Handler file relative to the repository root, e.g. `functions/roles/audit/handler.ts`. */
  readonly handler: string;

  /**
   * What the group's consumer can emit that a person must act on: rules naming the signal each
   * event raises (functions/core/attention.ts). Each signal named is watched by an alarm whose
   * description names the command to run; a name stands for one signal across the topology.
   * @default none
   */
  readonly attention?: readonly AttentionRule[];

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
   * Most consumer invocations one tenant's events may hold at once, 1 to `maxConcurrency - 1`
   * (FIFO groups delivered by the dispatch function): each tenant's events travel in that many
   * message groups (lanes, an order key always in the same one), so another tenant's message
   * never waits behind one tenant's backlog for an invocation. A tenant alone gets no more than
   * that many; conversations sharing a lane wait for each other.
   * @default - none: one message group per order key
   */
  readonly tenantConcurrency?: number;

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
   * How a FIFO group's buffer reaches its FIFO queue: a dispatch function or an EventBridge Pipe;
   * or how the group's events reach it without the bus: `stream`, from the events table's stream
   * (groups that emit nothing and receive only sequenced types).
   * @default "dispatch-function"
   */
  readonly delivery?: Delivery;

  /** What the stack wires for it besides its queues (model calls' heartbeats, DAG agents). */
  readonly needs?: GroupNeeds;

  /**
   * The integrations its consumer calls (its module's `uses`): the stack wires each with the
   * infrastructure it is given for that integration (lib/infra/integration-infra.ts).
   * @default none
   */
  readonly uses?: readonly AnyIntegrationUse[];

  /**
   * How long a FIFO group's delivery hop waits to gather full batches of 10 (whole seconds,
   * 0..300): fuller SendMessageBatch calls, up to this much latency per message under light load.
   * @default - none
   */
  readonly deliveryBatchingWindow?: Duration;

  /**
   * How long the consumer's event source gathers a batch (whole seconds, 0..300): standard queues
   * and `delivery: "stream"` (a read model then writes each aggregate once per batch).
   * @default - none (1 s for a standard queue's batches over 10)
   */
  readonly maxBatchingWindow?: Duration;
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
    /** What it does with the customers' data keys (personalDataAccess); empty: nothing. */
    readonly personalData: readonly PersonalDataAccess[];
  };

/** A validated topology: every group with its defaults applied. */
export interface Topology {
  readonly topics: readonly TopicName[];
  readonly groups: readonly GroupSpec[];
}

/** What validation looks up; the defaults are the project's registry and the file system. */
export interface TopologyContext {
  /**
   * Registered event types, the topic each is published on, and whether it declares personal
   * fields (in any of its versions).
   */
  readonly eventTypes: readonly {
    readonly type: string;
    readonly topic: string;
    readonly personal?: boolean;
    /** Stored in an aggregate's stream (version >= 1), so on the events table's stream too. */
    readonly sequenced?: boolean;
  }[];
  /** Whether a handler file (absolute path) exists. */
  readonly handlerExists?: (absolutePath: string) => boolean;
}

/** The project's registry as a validation context. */
export function registryContext(): TopologyContext {
  return {
    eventTypes: registry.definitions().map((d) => ({
      type: d.type,
      topic: d.topic,
      personal: (d.personal?.length ?? 0) > 0,
      sequenced: d.sequenced,
    })),
  };
}

/**
 * What a role's group does with the customers' data keys, from the event types it emits and
 * receives: `seal` when it emits a type that declares personal fields (the event store keeps them
 * sealed) or keeps such messages whole (Role.keepsMessages), `open` when its role reads the
 * personal fields of a type it receives (Role.readsPersonal): a group that only receives them
 * passes them on sealed and never opens one. Empty for a group that touches no personal field:
 * it gets no key and no grant.
 * The one place the stack's KMS and customer-keys grants come from (CustomerKeys.wire).
 */
export function personalDataAccess(
  role: Pick<TopologyRole, "subscriptions" | "emits" | "keepsMessages" | "readsPersonal">,
  context: TopologyContext = registryContext(),
): PersonalDataAccess[] {
  const personal = new Set(context.eventTypes.filter((e) => e.personal).map((e) => e.type));
  const access: PersonalDataAccess[] = [];
  // A group that keeps the messages it receives whole (the audit group) stores them sealed too.
  const stored = [...(role.emits ?? []), ...(role.keepsMessages ? role.subscriptions : [])];
  if (stored.some((type) => personal.has(type))) access.push("seal");
  if ((role.readsPersonal ?? []).some((type) => personal.has(type))) access.push("open");
  return access;
}

/**
 * Everything wrong with a topology declaration, each problem naming the bad value: unknown
 * topics, duplicate or badly named groups, a name that differs from the role's group, event
 * types that are not registered or whose topic is not declared, settings out of range (batch
 * size per queue type, concurrency, visibility timeout vs function timeout, order key,
 * delivery), handler files that do not exist, and attention signals that are badly named or
 * clash (./constructs/attention-signals.ts). Empty when the declaration is sound.
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
    if (!isTopic(topic)) {
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
  // Across the groups: a signal's name, metric and alarm id each stand for one signal.
  const rules = (declaration.groups ?? []).flatMap((group) => group.attention ?? []);
  problems.push(...signalProblems(rules.map((rule) => rule.signal)));
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
  for (const type of group.role?.emits ?? [])
    if (!context.eventTypes.some((e) => e.type === type))
      problems.push(`the role emits ${JSON.stringify(type)}, which is not in the registry`);
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
  problems.push(...readsPersonalProblems(group.role, context));
  if (group.delivery === "stream") problems.push(...streamDeliveryProblems(group, context));
  problems.push(...groupSettingsProblems(settingsOf(group)));
  problems.push(handlerEntryProblem(group.handler, context.handlerExists));
  return problems.filter((p): p is string => p !== undefined);
}

/**
 * A group read from the events table's stream receives only what the event store holds (sequenced
 * types: a client's unsequenced message goes to the bus alone) and must emit nothing (its consumer
 * commits no events, so it needs no ordering of its own output and no queue to retry through),
 * nor extend a message's visibility (a stream record has none).
 */
function streamDeliveryProblems(group: GroupDeclaration, context: TopologyContext): string[] {
  const problems: string[] = [];
  const emits = group.role?.emits ?? [];
  if (emits.length > 0)
    problems.push(
      `delivery "stream" is for groups that emit nothing, and the role emits ${emits.map((t) => JSON.stringify(t)).join(", ")}`,
    );
  const unstored = (group.role?.subscriptions ?? []).filter((type) =>
    context.eventTypes.some((e) => e.type === type && e.sequenced === false),
  );
  if (unstored.length > 0)
    problems.push(
      `delivery "stream" reads the event store, which does not hold the unsequenced ${unstored.map((t) => JSON.stringify(t)).join(", ")} the role subscribes to (they reach groups through the bus only)`,
    );
  if (group.needs?.heartbeat === "visibility")
    problems.push(
      `delivery "stream" has no message visibility to extend (needs.heartbeat "visibility")`,
    );
  return problems;
}

/** A type whose personal fields a role reads must be one it receives and that declares some. */
function readsPersonalProblems(
  role: Pick<TopologyRole, "subscriptions" | "readsPersonal"> | undefined,
  context: TopologyContext,
): string[] {
  return (role?.readsPersonal ?? []).flatMap((type) => {
    if (!role?.subscriptions.includes(type))
      return [
        `the role reads the personal fields of ${JSON.stringify(type)}, which it does not subscribe to`,
      ];
    const declares = context.eventTypes.some((e) => e.type === type && e.personal);
    return declares
      ? []
      : [`the role reads the personal fields of ${JSON.stringify(type)}, which declares none`];
  });
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
      personalData: personalDataAccess(group.role, context),
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
 * A role module as a group declaration: its descriptor, entry and deployment settings (seconds
 * become durations). Grants, alarms and wiring come from what the module declares, never from its
 * file's name.
 */
export function groupOf(module: RoleModule): GroupDeclaration {
  const { functionTimeoutSeconds, batchingWindowSeconds, ...deployment } = module.deployment;
  return {
    name: module.descriptor.group,
    role: module.descriptor,
    handler: module.entry,
    ...deployment,
    uses: usesOf(module.uses).map(([, use]) => use),
    ...(functionTimeoutSeconds === undefined
      ? {}
      : { functionTimeout: Duration.seconds(functionTimeoutSeconds) }),
    ...(batchingWindowSeconds === undefined
      ? {}
      : { maxBatchingWindow: Duration.seconds(batchingWindowSeconds) }),
  };
}
