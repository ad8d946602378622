import {
  Annotations,
  CfnOutput,
  Duration,
  type Environment,
  NestedStack,
  type RemovalPolicy,
  Stack,
  type StackProps,
} from "aws-cdk-lib";
import type { CfnQueue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { HEARTBEAT_TARGETS_ENV } from "../../functions/core/heartbeat-routes";
import { packJson } from "../../functions/core/packed-json";
import {
  stackWorkflowProblems,
  WORKFLOWS_ENV,
  workflowsEnvValue,
} from "../../functions/core/stack-workflows";
import { STEP_ROLES_ENV, type StepRoleEntry, stepRolesEnvValue } from "../../functions/core/steps";
import { ENTRY_FEATURES } from "../../functions/front-door/backlog";
import type { Feature } from "../../functions/roles/features";
import { featuresOf, groupsDoing } from "../../functions/roles/stack-features";
import { placeApplicationTypes } from "./application-types";
import {
  ALARM_EMAIL_CONTEXT,
  ALARM_WEBHOOK_CONTEXT,
  AlarmTopic,
  listFromContext,
} from "./constructs/alarm-topic";
import { ConsumerGroup } from "./constructs/consumer-group";
import { pickGroupSettings, stageProblem } from "./constructs/consumer-group-rules";
import { CustomerKeys } from "./constructs/customer-keys";
import { Dashboard } from "./constructs/dashboard";
import {
  capabilitiesOf,
  EMULATOR_CONTEXT_KEY,
  type Emulator,
  parseEmulator,
  type TargetCapabilities,
} from "./constructs/emulator";
import {
  FRONT_DOOR_AUDIENCE_CONTEXT,
  FRONT_DOOR_ISSUER_CONTEXT,
  FRONT_DOOR_SERVICE_SCOPE_CONTEXT,
  FRONT_DOOR_TENANT_CLAIM_CONTEXT,
  FrontDoor,
  type FrontDoorIssuer,
  type FrontDoorLimits,
} from "./constructs/front-door";
import { OperatorReadAccess } from "./constructs/operator-access";
import { Relay } from "./constructs/relay";
import { LeaseSweeper } from "./constructs/sweeper";
import type { TablesCapacity } from "./constructs/table-capacity";
import {
  AgentBusTables,
  LIST_INDEX_UPGRADE_STAGES,
  type ListIndexUpgrade,
  TRACE_INDEX_UPGRADE_STAGES,
  type TraceIndexUpgrade,
} from "./constructs/tables";
import { Topic, type TopicName } from "./constructs/topic";
import { type HeartbeatRoutes, heartbeatRoutesOf } from "./heartbeat-targets";
import { HUB_INTEGRATIONS } from "./hub-integrations";
import type { AnyIntegrationInfra, IntegrationUser } from "./integration-infra";
import { outputId } from "./output-ids";
import { leaveUnpublished, type Publish } from "./published-types";
import { queueNameClashes } from "./queue-names";
import { replayNamePrefix } from "./replay-names";
import { retentionDaysAt } from "./retention";
import { addStackOutputs } from "./stack-outputs";
import type { GroupNeeds, Topology } from "./topology";

export interface AgentBusStackProps extends StackProps {
  /**
   * Deployment stage, part of the bus and queue names (`agentbus-<stage>-...`).
   * @default "dev"
   */
  readonly stage?: string;

  /**
   * Topics and consumer groups to deploy: `defineTopology({ topics, groups: modules.map(groupOf) })`
   * (AgentBus, ./agentbus.ts, makes it from a list of role modules).
   */
  readonly topology: Topology;

  /**
   * The infrastructure of the integrations the groups use besides the hub's own (the model, the
   * side-effect ledger, the content store, queue depth): each integration folder's `infra.ts`.
   * A group that uses an integration with no infrastructure here fails the synth, naming both.
   * @default - none besides the hub's own
   */
  readonly integrations?: readonly AnyIntegrationInfra[];

  /**
   * Workflow definitions the stack runs (`defineWorkflow(...)`) besides the content workflows,
   * each version a run may be on: checked at synth against the stack's step roles (every problem
   * named), and given to its orchestrator (functions/core/stack-workflows.ts). A topology with
   * workflows needs an orchestrating group (`new AgentBus` adds the hub's orchestrator).
   * @default none
   */
  readonly workflows?: readonly WorkflowDefinition[];

  /**
   * What happens to the tables (the only stateful resources) when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly tablesRemovalPolicy?: RemovalPolicy;

  /**
   * How the four tables are billed for reads and writes: on demand, or provisioned with auto
   * scaling, cheaper under a sustained load (lib/infra/constructs/table-capacity.ts).
   * @default "on-demand"
   */
  readonly tablesCapacity?: TablesCapacity;

  /**
   * How long each topic's archive keeps events for replay.
   * @default - the declared retention of `archive` (functions/core/retention.ts, 30 days), or the
   * context's `agentbus:retention:archive`
   */
  readonly archiveRetention?: Duration;

  /**
   * The stored event types the relay puts on the topics' buses besides those a rule of the stack
   * takes (each PutEvents entry is billed, matched or not): the types your own rules on a bus
   * take, or `"all"`. The others stay in the event store and its stream (lib/infra/README.md).
   * @default - the context's `agentbus:publish` (`all` or a comma list); without it, none besides
   * the stack's own
   */
  readonly publish?: Publish;

  /**
   * The AWS emulator the template is for; `localstack-free` leaves out what LocalStack's free
   * image cannot run (Pipes, archives, schema registries, the dashboard) and delivers groups
   * declared with `delivery: "pipe"` through the dispatch function, with a warning.
   * @default - the CDK context `agentbus:emulator`; without it, real AWS (everything)
   */
  readonly emulator?: Emulator;

  /**
   * How often the content agents' consumers' heartbeat ticks during a record: a tick extends the
   * message's visibility once half of it has passed since the receive or the last extension, and
   * sends `node.heartbeat` once half of the agent's lease has passed since the last beat
   * (functions/handlers/heartbeat.ts); `Duration.seconds(0)` turns it off.
   * @default Duration.seconds(20)
   */
  readonly agentHeartbeat?: Duration;

  /**
   * Queue depth (waiting + in flight) of an agent group at which the orchestrator holds new work
   * for it.
   * @default 100
   */
  readonly queueDepthThreshold?: number;
  /**
   * The HTTP API's token issuer. @default from the context `agentbus:jwtIssuer` and
   * `agentbus:jwtAudience`; without one, no HTTP API
   */
  readonly frontDoor?: FrontDoorIssuer;
  /**
   * What the HTTP API lets in: each tenant's requests per minute and runs in flight, tenants' own
   * limits, and the backlog of the groups new work enters over which it refuses it
   * (functions/front-door/README.md#limits).
   * @default 600 requests a minute, 20 runs in flight, no tenant's own, a backlog of 300
   */
  readonly frontDoorLimits?: FrontDoorLimits;
}

/** Default heartbeat interval of the content agents' consumers. */
export const DEFAULT_AGENT_HEARTBEAT = Duration.seconds(20);

/** Warning id of a group whose pipe the emulator cannot run (acknowledgeable). */
export const PIPE_FALLBACK_WARNING = "agentbus:emulator:pipe-fallback";
/** Warning id of a group whose subscriber the emulator cannot run (acknowledgeable). */
export const SUBSCRIBER_FALLBACK_WARNING = "agentbus:emulator:subscriber-fallback";
/** Warning id of a group delivered by a subscriber in AWS, whose bus the relay cannot publish to yet. */
export const SUBSCRIBER_PREVIEW_WARNING = "agentbus:subscriber:unverified";
/**
 * Context key: `true` while a stack deployed before checkpoints moved onto the state items
 * upgrades; its consumers read the old checkpoint and inbox rows too (see lib/infra/README.md).
 */
export const LEGACY_CHECKPOINTS_KEY = "agentbus:legacyCheckpoints";
/**
 * Context key: the stage (`1`, `2`, `3`) of a stack deployed with the legacy list indexes
 * (`by-kind`, `by-waiting`) that upgrades to the current ones, one index per deploy
 * (stateIndexLayouts; see lib/infra/README.md). Without it, the current indexes only.
 */
export const LIST_INDEX_UPGRADE_KEY = "agentbus:listIndexUpgrade";
/**
 * Context key: the stage (`1` to `7`) of a stack deployed with the legacy trace indexes
 * (`by-correlation`, `by-task` of the events and inbox tables, the events table's `by-hour`) that
 * upgrades to the current ones, one index of a table per deploy at most (traceIndexLayouts; see
 * lib/infra/README.md).
 */
export const TRACE_INDEX_UPGRADE_KEY = "agentbus:traceIndexUpgrade";

/**
 * The list-index upgrade stage a context value names: `1`, `2` or `3`, as a string (`-c`) or a
 * number (cdk.json); `undefined` when absent. Throws on any other value.
 */
export function parseListIndexUpgrade(value: unknown): ListIndexUpgrade | undefined {
  return parseUpgradeStage(LIST_INDEX_UPGRADE_KEY, LIST_INDEX_UPGRADE_STAGES, value);
}

/** The trace-index upgrade stage a context value names, as parseListIndexUpgrade reads its own. */
export function parseTraceIndexUpgrade(value: unknown): TraceIndexUpgrade | undefined {
  return parseUpgradeStage(TRACE_INDEX_UPGRADE_KEY, TRACE_INDEX_UPGRADE_STAGES, value);
}

/** The stage of an index upgrade a context value names (`key`'s), or undefined when absent. */
function parseUpgradeStage<S extends number>(
  key: string,
  stages: readonly S[],
  value: unknown,
): S | undefined {
  if (value === undefined) return undefined;
  const stage = stages.find((s) => value === s || value === String(s));
  if (stage === undefined)
    throw new Error(
      `context ${key}=${JSON.stringify(value)} is not an upgrade stage: use ${stages.join(", ")}, or leave ${key} out once the upgrade is done`,
    );
  return stage;
}

/**
 * AgentBus: the tables (stateful, in their own construct), and from the topology one topic per
 * declared topic, the outbox relay, one consumer group per declared group, and a dashboard.
 */
export class AgentBusStack extends Stack {
  /** The topics and consumer groups it was built from. */
  readonly topology: Topology;
  readonly tables: AgentBusTables;
  /** The customers' data keys: their table and the KMS key that wraps them. */
  readonly customerKeys: CustomerKeys;
  readonly topics: ReadonlyMap<TopicName, Topic>;
  readonly relay: Relay;
  readonly groups: readonly ConsumerGroup[];
  /** The HTTP API, when an issuer is configured (`agentbus:jwtIssuer`, `agentbus:jwtAudience`). */
  readonly frontDoor?: FrontDoor;
  /** The stack's step roles by group (what the orchestrator and the front door get as `STEP_ROLES`). */
  private stepRoleTable: Record<string, StepRoleEntry> = {};
  /**
   * The stack's workflows as JSON (functions/core/stack-workflows.ts): the orchestrator's and the
   * front door's `WORKFLOWS`, and the output `StackWorkflows`; undefined when it was given none.
   */
  readonly stackWorkflows?: string;
  /**
   * The scheduled lease sweeper (present when the topology has the orchestrator and the commands
   * and events topics).
   */
  readonly sweeper?: LeaseSweeper;
  /**
   * Where every alarm goes (output `AlarmTopicArn`), with the subscriptions the context names:
   * `agentbus:alarmEmail`, `agentbus:alarmWebhook`.
   */
  readonly alarmTopic: AlarmTopic;
  /** The dashboard (absent for an emulator without dashboards). */
  readonly dashboard?: Dashboard;
  /** The managed policy an operator's role needs for trace, status, dlq and the console. */
  readonly operatorAccess: OperatorReadAccess;
  /** The emulator the template is for; `undefined` for AWS. */
  readonly emulator: Emulator | undefined;
  /** What the target runs, and so what the stack deploys. */
  readonly capabilities: TargetCapabilities;
  /**
   * The nested stack that holds the topics' schema registries and schemas (absent without them):
   * 80 resources and some 370 KB that would otherwise take a main template near CloudFormation's
   * limits of 500 resources and 1,000,000 bytes.
   */
  readonly eventSchemas?: NestedStack;

  constructor(scope: Construct, id: string, props: AgentBusStackProps) {
    super(scope, id, props);
    const stage = props.stage ?? "dev";
    const topology = props.topology;
    this.topology = topology;
    this.emulator = parseEmulator(props.emulator ?? this.node.tryGetContext(EMULATOR_CONTEXT_KEY));
    this.capabilities = capabilitiesOf(this.emulator);

    this.tables = this.createTables(props);

    if (this.capabilities.schemaRegistry && schemaRegistryWanted(this))
      this.eventSchemas = new NestedStack(this, "EventSchemas", {
        description: `AgentBus ${stage}: the topics' EventBridge schema registries`,
      });
    this.topics = this.createTopics(stage, topology, props);
    this.relay = new Relay(this, "Relay", {
      topics: [...this.topics.values()],
      tables: this.tables,
    });
    placeApplicationTypes(this.relay.function, topology);
    leaveUnpublished(this.relay.function, topology, props.publish);

    this.groups = this.consumerGroups(topology, stage);
    this.relay.publishToSubscriberBuses([...this.topics.values()]);
    this.relay.deliverTo(this.groups);
    this.customerKeys = this.createCustomerKeys(topology, props);
    const needs = (group: ConsumerGroup): GroupNeeds =>
      topology.groups.find((g) => g.name === group.groupName)?.needs ?? {};
    this.wireHeartbeats(props, needs);
    this.wireStepRoles(needs);
    this.stackWorkflows = this.wireWorkflows(props.workflows ?? [], needs);
    this.wireIntegrations(stage, topology, props, needs);
    // The sweeper serves the orchestrator's runs: leases and held-back work live in dag_run state.
    const orchestrates = this.groups.some((g) => needs(g).orchestrates);
    if (orchestrates && this.topics.has("commands") && this.topics.has("events")) {
      this.sweeper = new LeaseSweeper(this, "LeaseSweeper", {
        tables: this.tables,
        topics: [this.topic("commands"), this.topic("events")],
      });
    }

    this.frontDoor = this.createFrontDoor(stage, props);
    // The A2A tasks' push queue is fed by the relay too, not by a third reader of the stream.
    if (this.frontDoor?.a2aPush) this.relay.deliverTo([this.frontDoor.a2aPush]);
    this.operatorAccess = this.createOperatorAccess(stage);
    this.alarmTopic = this.createAlarmTopic();

    if (this.capabilities.dashboard) {
      this.dashboard = new Dashboard(this, "Dashboard", {
        stage,
        groups: this.groups,
        relay: this.relay,
      });
    }
    addStackOutputs(this);
  }

  /**
   * The four tables, billed as `tablesCapacity` says, with the indexes of the upgrade stages the
   * context names.
   */
  private createTables(props: AgentBusStackProps): AgentBusTables {
    return new AgentBusTables(this, "Tables", {
      removalPolicy: props.tablesRemovalPolicy,
      capacity: props.tablesCapacity,
      listIndexUpgrade: parseListIndexUpgrade(this.node.tryGetContext(LIST_INDEX_UPGRADE_KEY)),
      traceIndexUpgrade: parseTraceIndexUpgrade(this.node.tryGetContext(TRACE_INDEX_UPGRADE_KEY)),
    });
  }

  /** A topic per topic of the topology, its schema registry in the nested stack when there is one. */
  private createTopics(
    stage: string,
    topology: Topology,
    props: AgentBusStackProps,
  ): Map<TopicName, Topic> {
    return new Map(
      topology.topics.map((topicName) => [
        topicName,
        new Topic(this, `${outputId(topicName)}Topic`, {
          topicName,
          stage,
          archiveRetention: props.archiveRetention,
          archive: this.capabilities.archives,
          schemaRegistry: this.eventSchemas !== undefined,
          ...(this.eventSchemas ? { schemaScope: this.eventSchemas } : {}),
        }),
      ]),
    );
  }

  /**
   * The customers' data keys, and who may use them: each group as its topology spec derives
   * (`personalData`: seal, open, or nothing); the relay none (it publishes the event store's
   * events as stored, their personal fields sealed). The operator's policies get theirs in
   * createOperatorAccess.
   */
  private createCustomerKeys(topology: Topology, props: AgentBusStackProps): CustomerKeys {
    const keys = new CustomerKeys(this, "CustomerKeys", {
      removalPolicy: props.tablesRemovalPolicy,
    });
    for (const group of this.groups) {
      const spec = topology.groups.find((g) => g.name === group.groupName);
      keys.wire(group.consumer, spec?.personalData ?? []);
    }
    return keys;
  }

  /**
   * The front door (./constructs/front-door.ts), when the tokens' issuer is known: from
   * `props.frontDoor`, or the context `agentbus:jwtIssuer` with `agentbus:jwtAudience` (a comma
   * list), if the tenant is not in `tenant_id`, `agentbus:tenantClaim`, and the scope of the tokens
   * that are services', `agentbus:serviceScope`. Without an issuer there is no HTTP API (clients
   * put events on the buses with IAM, as before), and the synth warns so.
   */
  private createFrontDoor(stage: string, props: AgentBusStackProps): FrontDoor | undefined {
    const context = (key: string) => this.node.tryGetContext(key) as string | undefined;
    const issuer = props.frontDoor ?? issuerFromContext(context);
    if (!issuer)
      return this.withoutFrontDoor(
        `no token issuer is set: add -c ${FRONT_DOOR_ISSUER_CONTEXT}=<issuer URL> -c ${FRONT_DOOR_AUDIENCE_CONTEXT}=<client id> to deploy it`,
      );
    if (!this.topics.has("events"))
      return this.withoutFrontDoor("the topology has no events topic to put its messages on");
    return new FrontDoor(this, "FrontDoor", {
      stage,
      tables: this.tables,
      topics: [...this.topics.values()].filter((t) =>
        ["events", "commands", "audit"].includes(t.topicName),
      ),
      issuer,
      customerKeys: this.customerKeys,
      features: featuresOf(this.topology.groups.map((group) => group.role)),
      stepRoles: this.stepRoleTable,
      ...(this.stackWorkflows === undefined ? {} : { workflows: this.stackWorkflows }),
      entryGroups: this.entryGroups(),
      ...props.frontDoorLimits,
    });
  }

  /** The groups whose queues a message or a run's start enters (the front door's backlog). */
  private entryGroups(): Partial<Record<Feature, ConsumerGroup[]>> {
    const roles = this.topology.groups.map((group) => group.role);
    return Object.fromEntries(
      ENTRY_FEATURES.map((feature) => {
        const names = groupsDoing(feature, roles);
        return [feature, this.groups.filter((g) => names.includes(g.groupName))];
      }),
    );
  }

  /** No front door: a synth warning says why, so that leaving the HTTP API out is never silent. */
  private withoutFrontDoor(reason: string): undefined {
    Annotations.of(this).addWarningV2(
      "agentbus:front-door:absent",
      `no HTTP API (the front door): ${reason} (lib/infra/README.md)`,
    );
    return undefined;
  }

  /**
   * The alarm topic, subscribed from the context, and every alarm's action: ALARM for each, OK
   * too where OK means the problem is gone (a queue drained, the relay caught up, the sweeper
   * sweeping, no deadline near), not where an alarm counts what happened within five minutes.
   */
  private createAlarmTopic(): AlarmTopic {
    const context = (key: string) => listFromContext(this.node.tryGetContext(key), key);
    const alarmTopic = new AlarmTopic(this, "AlarmTopic", {
      emails: context(ALARM_EMAIL_CONTEXT),
      webhooks: context(ALARM_WEBHOOK_CONTEXT),
    });
    const groupCounts = this.groups.flatMap((g) => Object.values(g.attentionAlarms));
    const groupStates = this.groups
      .flatMap((g) => g.alarms)
      .filter((a) => !groupCounts.includes(a));
    const push = this.frontDoor?.a2aPush;
    alarmTopic.notify(
      [
        ...groupStates,
        ...this.relay.alarms,
        ...(this.sweeper?.alarms ?? []),
        ...(push ? [push.deadLetterAlarm] : []),
      ],
      { resolved: true },
    );
    alarmTopic.notify(groupCounts, { resolved: false });
    return alarmTopic;
  }

  /** The managed policy of the operator's tools: what they read, and the repairs they start. */
  private createOperatorAccess(stage: string): OperatorReadAccess {
    return new OperatorReadAccess(this, "OperatorRead", {
      tables: this.tables,
      customerKeys: this.customerKeys,
      groups: this.groups,
      relay: this.relay,
      auditBus: (this.topics.get("audit") ?? this.topics.get("events"))?.bus,
      buses: [...this.topics.values()].map((topic) => topic.bus),
      commandBus: this.topics.get("commands")?.bus,
      archives: [...this.topics.values()].flatMap((topic) =>
        topic.archive ? [topic.archive] : [],
      ),
      replayNamePrefix: replayNamePrefix(stage),
    });
  }

  /** The topology's consumer groups, once no two of their queues would share a name. */
  private consumerGroups(topology: Topology, stage: string): ConsumerGroup[] {
    const clashes = queueNameClashes(stage, topology.groups);
    if (clashes.length > 0)
      throw new Error(`AgentBus stack ${this.node.id}: rename a group: ${clashes.join("; ")}`);
    return topology.groups.map((group) => this.consumerGroup(group, stage));
  }

  /** One consumer group of the topology (a pipe group falls back to the dispatcher where pipes cannot run). */
  private consumerGroup(group: Topology["groups"][number], stage: string): ConsumerGroup {
    const pipeFallback = group.delivery === "pipe" && !this.capabilities.pipes;
    const subscriberFallback =
      group.delivery === "subscriber" && !this.capabilities.subscriberBuses;
    const consumerGroup = new ConsumerGroup(this, outputId(group.name), {
      groupName: group.name,
      stage,
      subscriptions: group.subscriptions.map(({ topic, eventTypes }) => ({
        topic: this.topic(topic),
        eventTypes,
      })),
      entry: group.handler,
      attention: group.attention?.map((rule) => rule.signal),
      tables: this.tables,
      ...pickGroupSettings(group),
      delivery: pipeFallback || subscriberFallback ? "dispatch-function" : group.delivery,
      deliveryBatchingWindow: group.deliveryBatchingWindow,
      maxBatchingWindow: group.maxBatchingWindow,
      // The group that keeps messages keeps those no stream holds: stored events are never its.
      unsequencedOnly: group.role.keepsMessages === true,
      legacyCheckpoints: [true, "true"].includes(this.node.tryGetContext(LEGACY_CHECKPOINTS_KEY)),
    });
    if (group.role.keepsMessages)
      consumerGroup.consumer.addEnvironment(
        "KEPT_MESSAGE_DAYS",
        String(retentionDaysAt(this, "auditMessages")),
      );
    if (pipeFallback) {
      Annotations.of(consumerGroup).addWarningV2(
        PIPE_FALLBACK_WARNING,
        `consumer group ${JSON.stringify(group.name)} declares delivery "pipe", but ${EMULATOR_CONTEXT_KEY}=${this.emulator} cannot run EventBridge Pipes: its buffer queue is delivered to its FIFO queue by the dispatch function instead (synthesize without ${EMULATOR_CONTEXT_KEY}, or with "localstack" and an auth token, to deploy the pipe)`,
      );
    }
    if (group.delivery === "subscriber" && !subscriberFallback) {
      Annotations.of(consumerGroup).addWarningV2(
        SUBSCRIBER_PREVIEW_WARNING,
        `consumer group ${JSON.stringify(group.name)} declares delivery "subscriber", not yet verified in an account: the relay publishes to the topic's new bus with AgentBus's own eventbridgev2 client (the AWS SDK for JavaScript has none), checked against the protocol's models and a local endpoint only (lib/infra/README.md)`,
      );
    }
    if (subscriberFallback) {
      Annotations.of(consumerGroup).addWarningV2(
        SUBSCRIBER_FALLBACK_WARNING,
        `consumer group ${JSON.stringify(group.name)} declares delivery "subscriber", but no emulator (${EMULATOR_CONTEXT_KEY}=${this.emulator}) has EventBridge's new buses: it is delivered by the dispatch function instead (synthesize without ${EMULATOR_CONTEXT_KEY} to deploy the subscriber)`,
      );
    }
    return consumerGroup;
  }

  /**
   * The heartbeats the groups declare: `heartbeat: "visibility"` extends a message's visibility
   * during a long model call; `"events"` also publishes the role's heartbeats on the events bus
   * (PutEvents on it).
   */
  /**
   * Each orchestrating group gets the table of the stack's step roles (`STEP_ROLES`, JSON,
   * compressed when long): the
   * groups whose modules declare `steps`, with the commands to send each (functions/core/steps.ts).
   */
  private wireStepRoles(needs: (g: ConsumerGroup) => GroupNeeds): void {
    const table: Record<string, StepRoleEntry> = {};
    for (const group of this.groups) {
      const entry = needs(group).steps;
      if (entry) table[group.groupName] = entry;
    }
    for (const group of this.groups)
      if (needs(group).orchestrates)
        group.consumer.addEnvironment(STEP_ROLES_ENV, stepRolesEnvValue(table));
    this.stepRoleTable = table;
  }

  /**
   * The stack's workflows, checked against its step roles (the synth fails naming every problem)
   * and written to each orchestrating group's environment (`WORKFLOWS`: JSON, compressed when
   * large): that value, which the front door and the outputs get too.
   */
  private wireWorkflows(
    workflows: readonly WorkflowDefinition[],
    needs: (g: ConsumerGroup) => GroupNeeds,
  ): string | undefined {
    if (workflows.length === 0) return undefined;
    const orchestrators = this.groups.filter((g) => needs(g).orchestrates);
    const stepRoles = this.groups.filter((g) => needs(g).steps).map((g) => g.groupName);
    const problems = stackWorkflowProblems(workflows, stepRoles);
    if (orchestrators.length === 0)
      problems.unshift("the stack has no orchestrator to run them: add the orchestrator module");
    if (problems.length > 0)
      throw new Error(
        `the stack's workflows cannot run (${workflows.map((w) => `${w.name} v${w.version}`).join(", ")}):\n  - ${problems.join("\n  - ")}`,
      );
    const value = workflowsEnvValue(workflows);
    for (const group of orchestrators) group.consumer.addEnvironment(WORKFLOWS_ENV, value);
    return value;
  }

  private wireHeartbeats(props: AgentBusStackProps, needs: (g: ConsumerGroup) => GroupNeeds): void {
    const events = this.topics.get("events");
    const routes = events && heartbeatRoutesOf(this.groups);
    for (const group of this.groups) {
      const heartbeat = needs(group).heartbeat;
      if (heartbeat === "visibility") this.heartbeat(group, props);
      if (heartbeat === "events" && events && routes)
        this.heartbeat(group, props, { events, routes });
    }
  }

  /**
   * Each integration the groups use, wired once by its infrastructure with every group that uses
   * it (./integration-infra.ts): the hub's own, and `props.integrations`. A use with no infrastructure, or two integrations of one name, fail
   * the synth.
   */
  private wireIntegrations(
    stage: string,
    topology: Topology,
    props: AgentBusStackProps,
    needs: (g: ConsumerGroup) => GroupNeeds,
  ): void {
    const infras = integrationsByName([...HUB_INTEGRATIONS, ...(props.integrations ?? [])]);
    const users = new Map<string, IntegrationUser<unknown>[]>();
    for (const declaration of topology.groups) {
      const group = this.groups.find((g) => g.groupName === declaration.name);
      if (!group) continue;
      for (const use of declaration.uses ?? []) {
        const infra = infras.get(use.integration.name);
        if (!infra || infra.integration !== use.integration)
          throw new Error(
            `consumer group ${JSON.stringify(declaration.name)} uses the ${use.integration.name} integration, but the stack ${infra ? "was given another integration of that name" : "was given no infrastructure for it"}: pass its infra.ts in the stack's integrations`,
          );
        users.set(use.integration.name, [
          ...(users.get(use.integration.name) ?? []),
          { group, options: use.options },
        ]);
      }
    }
    const scope = {
      stack: this,
      stage,
      removalPolicy: props.tablesRemovalPolicy,
      groups: this.groups.map((group) => ({ group, needs: needs(group) })),
      settings: { queueDepthThreshold: props.queueDepthThreshold },
      output: (id: string, value: string, description: string) => {
        new CfnOutput(this, id, { value, description });
      },
    };
    for (const [name, list] of users) infras.get(name)?.wire(scope, list);
  }

  /**
   * Turn on a model-calling group's heartbeat: `HEARTBEAT_SECONDS` and its queue's visibility
   * timeout; with `beats`, also where its role's heartbeat messages go (./heartbeat-targets.ts):
   * the groups' queues they are sent to straight (`HEARTBEAT_TARGETS`, sqs:SendMessage on exactly
   * those queues), and the events bus (PutEvents on it) only when a group fed by the bus takes one.
   */
  private heartbeat(
    group: ConsumerGroup,
    props: AgentBusStackProps,
    beats?: { events: Topic; routes: HeartbeatRoutes },
  ): void {
    const seconds = (props.agentHeartbeat ?? DEFAULT_AGENT_HEARTBEAT).toSeconds();
    const visibility = (group.queue.node.defaultChild as CfnQueue).visibilityTimeout;
    if (seconds <= 0 || visibility === undefined) return;
    group.consumer.addEnvironment("HEARTBEAT_SECONDS", String(seconds));
    group.consumer.addEnvironment("VISIBILITY_TIMEOUT_SECONDS", String(visibility));
    if (!beats) return;
    const { targets, viaBus } = beats.routes;
    if (targets.length > 0)
      group.consumer.addEnvironment(HEARTBEAT_TARGETS_ENV, packJson(targets.map((t) => t.target)));
    for (const target of targets) target.group.queue.grant(group.consumer, "sqs:SendMessage");
    if (!viaBus) return;
    group.consumer.addEnvironment("EVENTS_BUS_NAME", beats.events.busName);
    beats.events.grantPutEvents(group.consumer);
  }

  /** The deployed topic of that name. */
  topic(name: TopicName): Topic {
    const topic = this.topics.get(name);
    if (!topic) throw new Error(`topic ${JSON.stringify(name)} is not declared in the topology`);
    return topic;
  }
}

/** Where `bin/agentbus.ts` deploys: the stage and the stack's environment. */
export interface DeploymentSettings {
  readonly stage: string;
  /** Account and region; `undefined` for an environment-agnostic stack. */
  readonly env: Environment | undefined;
}

const REGION = /^[a-z]{2,}(-[a-z]+)+-\d+$/;
const ACCOUNT = /^\d{12}$/;

/**
 * The stage and environment to deploy to, from the CDK context (`-c stage=...`, `-c region=...`,
 * `-c account=...`), falling back to `defaults` (the CLI's `CDK_DEFAULT_REGION` and
 * `CDK_DEFAULT_ACCOUNT`) for region and account and to `dev` for the stage. Throws naming every
 * bad value.
 */
export function deploymentSettings(
  context: (key: string) => unknown,
  defaults: { readonly region?: string; readonly account?: string } = {},
): DeploymentSettings {
  const problems: string[] = [];
  const setting = (key: "region" | "account", fallback: string | undefined, pattern: RegExp) => {
    const given = context(key);
    const value = given ?? (fallback || undefined);
    if (value === undefined) return undefined;
    if (typeof value !== "string" || !pattern.test(value)) {
      const source = given === undefined ? `CDK_DEFAULT_${key.toUpperCase()}` : `context "${key}"`;
      const what = key === "region" ? "an AWS region such as eu-west-1" : "a 12-digit account id";
      problems.push(`${source} ${JSON.stringify(value)} must be ${what}`);
      return undefined;
    }
    return value;
  };
  const stage = context("stage") ?? "dev";
  const stageIssue = stageProblem(stage, 'context "stage"');
  if (stageIssue) problems.push(stageIssue);
  const region = setting("region", defaults.region, REGION);
  const account = setting("account", defaults.account, ACCOUNT);
  if (problems.length > 0)
    throw new Error(`invalid deployment settings:\n  - ${problems.join("\n  - ")}`);
  return {
    stage: stage as string,
    env: region || account ? { account, region } : undefined,
  };
}

/** Integrations' infrastructure by name; two different integrations of one name are refused. */
function integrationsByName(
  infras: readonly AnyIntegrationInfra[],
): Map<string, AnyIntegrationInfra> {
  const byName = new Map<string, AnyIntegrationInfra>();
  for (const infra of infras) {
    const name = infra.integration.name;
    const known = byName.get(name);
    if (known && known.integration !== infra.integration)
      throw new Error(`two integrations are named ${JSON.stringify(name)}: rename one`);
    byName.set(name, infra);
  }
  return byName;
}

/** The front door's issuer from the CDK context; undefined when no issuer is set. */
function issuerFromContext(
  context: (key: string) => string | undefined,
): FrontDoorIssuer | undefined {
  const issuer = context(FRONT_DOOR_ISSUER_CONTEXT);
  if (!issuer) return undefined;
  const audience = (context(FRONT_DOOR_AUDIENCE_CONTEXT) ?? "")
    .split(",")
    .map((a) => a.trim())
    .filter(Boolean);
  if (audience.length === 0)
    throw new Error(
      `${FRONT_DOOR_ISSUER_CONTEXT} is set: set ${FRONT_DOOR_AUDIENCE_CONTEXT} too (the tokens' aud, comma-separated)`,
    );
  const tenantClaim = context(FRONT_DOOR_TENANT_CLAIM_CONTEXT);
  const serviceScope = context(FRONT_DOOR_SERVICE_SCOPE_CONTEXT);
  return {
    issuer,
    audience,
    ...(tenantClaim ? { tenantClaim } : {}),
    ...(serviceScope ? { serviceScope } : {}),
  };
}

/** `-c agentbus:schemaRegistry=false` leaves the schema registries out (see lib/infra/README.md). */
export const SCHEMA_REGISTRY_CONTEXT = "agentbus:schemaRegistry";

function schemaRegistryWanted(scope: Construct): boolean {
  const value: unknown = scope.node.tryGetContext(SCHEMA_REGISTRY_CONTEXT);
  if (value === undefined || value === true || value === "true") return true;
  if (value === false || value === "false") return false;
  throw new Error(
    `${SCHEMA_REGISTRY_CONTEXT} must be true or false (got ${JSON.stringify(value)})`,
  );
}
