import { CfnResource, type Duration, Stack } from "aws-cdk-lib";
import {
  Archive,
  type CfnArchive,
  type CfnEventBus,
  type CfnRule,
  EventBus,
  type IEventBus,
  Match,
  Rule,
} from "aws-cdk-lib/aws-events";
import { CfnRegistry, CfnSchema } from "aws-cdk-lib/aws-eventschemas";
import { CfnEventBus as CfnSubscriberBus } from "aws-cdk-lib/aws-eventsv2";
import {
  AccountRootPrincipal,
  Grant,
  type IGrantable,
  PolicyStatement,
  Role,
  ServicePrincipal,
} from "aws-cdk-lib/aws-iam";
import { Construct } from "constructs";
import { RELAY_EVENT_SOURCE } from "../../../functions/adapters/eventbridge/publisher";
import {
  registry as defaultRegistry,
  type EventRegistry,
  isTopic,
  TOPICS,
  type Topic as TopicName,
} from "../../../schemas";
import { jsonSchemas } from "../../../schemas/json-schema";
import { retentionAt, retentionDaysAt } from "../retention";
import { stageProblem } from "./consumer-group-rules";
import { eventBridgeSchema, SCHEMA_TYPE } from "./event-schemas";

export type { TopicName };

/** Every AgentBus producer's EventBridge `source` starts with this. */
export const SOURCE_PREFIX = "agentbus";

/** CloudFormation metadata key naming the topic of each of its resources. */
export const TOPIC_METADATA = "agentbus:topic";

export interface TopicProps {
  /** Which topic of the registry (`commands`, `events` or `audit`) this bus carries. */
  readonly topicName: TopicName;

  /**
   * Deployment stage; part of the bus, archive and schema registry names `agentbus-<stage>-<topic>`.
   * @default "dev"
   */
  readonly stage?: string;

  /**
   * How long the bus's archive keeps every `agentbus*` event for replay; whole days, at least one.
   * @default - the declared retention of `archive` (functions/core/retention.ts, 30 days), or the
   * context's `agentbus:retention:archive`
   */
  readonly archiveRetention?: Duration;

  /**
   * The event registry whose types (those of this topic) are published to the schema registry.
   * @default - the project's registry (`schemas/index.ts`)
   */
  readonly registry?: EventRegistry;

  /**
   * Whether the bus gets an archive. Off only for an emulator without archives
   * (LocalStack's free image).
   * @default true
   */
  readonly archive?: boolean;

  /**
   * Whether the topic gets its EventBridge schema registry and schemas. Off only for an emulator
   * without the schemas service (LocalStack's free image).
   * @default true
   */
  readonly schemaRegistry?: boolean;

  /**
   * Where the schema registry and its schemas go (the stack puts every topic's in one nested
   * stack, which keeps the main template small).
   * @default - the topic itself
   */
  readonly schemaScope?: Construct;
}

/**
 * One topic of AgentBus: an EventBridge bus named `agentbus-<stage>-<topic>` that the relay
 * publishes to and consumer groups subscribe to with rules, with
 * - an archive of every event from an `agentbus*` source (replay after a consumer bug);
 * - a resource policy that lets principals of this account (the account root; IAM decides who)
 *   put events, and nobody else: no wildcard principal, no other account;
 * - an EventBridge schema registry of its own, `agentbus-<stage>-<topic>`, with one schema per
 *   registered event type (and schema version) of this topic, named `<type>.v<version>`. One
 *   registry per topic keeps the topic's contract next to its bus and lets a team grant access to
 *   the contract of one topic; registries cost nothing.
 */
export class Topic extends Construct {
  readonly topicName: TopicName;
  readonly bus: IEventBus;
  /**
   * The bus name as `Fn::GetAtt Name`: rules and environment variables use this rather than the
   * bus's `Ref`, which moto's CloudFormation does not resolve to the name.
   */
  readonly busName: string;
  readonly busArn: string;
  /** The bus's archive (absent with `archive: false`). */
  readonly archive?: Archive;
  /** The topic's schema registry (absent with `schemaRegistry: false`). */
  readonly schemaRegistry?: CfnRegistry;
  /** The registry's schemas, keyed by schema name `<type>.v<version>`; empty without a registry. */
  readonly schemas: ReadonlyMap<string, CfnSchema>;
  private readonly stage: string;
  private subscriberBusResource?: CfnSubscriberBus;

  constructor(scope: Construct, id: string, props: TopicProps) {
    super(scope, id);
    const { stage, archiveRetention } = topicSettings(this, props);
    this.topicName = props.topicName;
    this.stage = stage;
    const name = `agentbus-${stage}-${props.topicName}`;

    const bus = new EventBus(this, "Resource", {
      eventBusName: name,
      description: `AgentBus ${props.topicName} topic (${stage})`,
    });
    this.bus = bus;
    this.busName = (bus.node.defaultChild as CfnEventBus).attrName;
    this.busArn = bus.eventBusArn;

    bus.addToResourcePolicy(
      new PolicyStatement({
        sid: "PutEventsFromThisAccount",
        principals: [new AccountRootPrincipal()],
        actions: ["events:PutEvents"],
        resources: [bus.eventBusArn],
      }),
    );

    if (props.archive ?? true) this.archive = this.createArchive(name, stage, archiveRetention);

    if (props.schemaRegistry ?? true) {
      const home = props.schemaScope
        ? new Construct(props.schemaScope, pascal(props.topicName))
        : this;
      const schemaRegistry = new CfnRegistry(home, "SchemaRegistry", {
        registryName: name,
        description: `AgentBus ${props.topicName} topic (${stage}): one schema per event type and version`,
      });
      this.schemaRegistry = schemaRegistry;
      this.schemas = this.createSchemas(home, schemaRegistry, props.registry ?? defaultRegistry);
    } else {
      this.schemas = new Map();
    }

    for (const child of this.node.findAll()) {
      if (child instanceof CfnResource) child.addMetadata(TOPIC_METADATA, props.topicName);
    }
  }

  /** The bus's archive of every AgentBus event, kept `retention` for replays. */
  private createArchive(name: string, stage: string, retention: Duration): Archive {
    const archive = new Archive(this, "Archive", {
      sourceEventBus: this.bus,
      archiveName: name,
      description: `Every agentbus* event of the ${this.topicName} topic (${stage}), for replay`,
      eventPattern: { source: Match.prefix(SOURCE_PREFIX) },
      retention,
    });
    // aws-cdk-lib renders `KmsKeyIdentifier: ""` without a key, which some regions refuse
    // (aws/aws-cdk#37847): omit it, so the archive uses the AWS-owned key.
    (archive.node.findChild("Archive") as CfnArchive).addPropertyDeletionOverride(
      "KmsKeyIdentifier",
    );
    return archive;
  }

  /** The topic's new EventBridge bus, if a group reads it (`subscriberBus()` made it). */
  get subscriberBusIfAny(): CfnSubscriberBus | undefined {
    return this.subscriberBusResource;
  }

  /**
   * The topic's new EventBridge bus (`AWS::EventsV2::EventBus`, `agentbus-<stage>-<topic>`),
   * made on first use by a group with `delivery: "subscriber"`. It keeps every event for the
   * declared retention (`subscriberBus`, functions/core/retention.ts): what a point-in-time
   * subscriber replays. Encrypted with an AWS owned key (no `EncryptionConfiguration`).
   */
  subscriberBus(): CfnSubscriberBus {
    if (this.subscriberBusResource) return this.subscriberBusResource;
    const bus = new CfnSubscriberBus(this, "SubscriberBus", {
      name: `agentbus-${this.stage}-${this.topicName}`,
      description: `AgentBus ${this.topicName} topic (${this.stage}) for FIFO subscribers`,
      storageConfiguration: { retentionPeriodInDays: retentionDaysAt(this, "subscriberBus") },
    });
    this.subscriberBusResource = bus;
    this.bridgeToSubscriberBus(bus);
    for (const child of this.node.findAll()) {
      if (child instanceof CfnResource && !child.getMetadata(TOPIC_METADATA))
        child.addMetadata(TOPIC_METADATA, this.topicName);
    }
    return bus;
  }

  /**
   * What is put on the classic bus directly (a client's or the CLI's `put-events`, the front door,
   * the sweeper, heartbeats, republish) must reach the new bus too: a classic rule forwards it,
   * with a role allowed `events:PutEvents` and `events:PutRawEvents` on it (AWS's reference,
   * eventbridge-event-bus/references/migrating-from-classic.md step 1 and authorization.md
   * "Forwarding into a bus"). Every source but the relay's: the relay publishes its events to the
   * new bus itself, with their event group, and forwarded they would be ingested, billed and
   * delivered a second time. A pattern cannot both match a prefix and leave one value out, so
   * events of sources other than `agentbus*` are forwarded too; the subscribers' filters
   * (consumer-group-subscribers.ts) drop them.
   */
  private bridgeToSubscriberBus(bus: CfnSubscriberBus): void {
    const role = new Role(this, "SubscriberBridgeRole", {
      description: `Forwards the ${this.topicName} topic's events to its new bus`,
      assumedBy: new ServicePrincipal("events.amazonaws.com", {
        conditions: { StringEquals: { "aws:SourceAccount": Stack.of(this).account } },
      }),
    });
    role.addToPolicy(
      new PolicyStatement({
        actions: ["events:PutEvents", "events:PutRawEvents"],
        resources: [bus.attrEventBusArn],
      }),
    );
    const rule = new Rule(this, "SubscriberBridge", {
      eventBus: this.bus,
      description: `AgentBus ${this.topicName}: the events not from the relay to the topic's new bus`,
      eventPattern: { source: Match.anythingBut(RELAY_EVENT_SOURCE) },
    });
    const cfnRule = rule.node.defaultChild as CfnRule;
    cfnRule.eventBusName = this.busName;
    cfnRule.addPropertyOverride("Targets", [
      { Id: "SubscriberBus", Arn: bus.attrEventBusArn, RoleArn: role.roleArn },
    ]);
  }

  /**
   * Allow `grantee` to publish to this topic's new bus: `events:PutEvents` on that bus's ARN. The
   * IAM namespace is `events` for both kinds of bus (aws/agent-toolkit-for-aws,
   * amazon-eventbridge-event-bus/references/authorization.md, "Publishing").
   */
  grantPutEventsToSubscriberBus(grantee: IGrantable): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ["events:PutEvents"],
      resourceArns: [this.subscriberBus().attrEventBusArn],
    });
  }

  /** Allow `grantee` to publish to this topic (`events:PutEvents` on this bus only). */
  grantPutEvents(grantee: IGrantable): Grant {
    return this.bus.grantPutEventsTo(grantee);
  }

  private createSchemas(
    home: Construct,
    schemaRegistry: CfnRegistry,
    registry: EventRegistry,
  ): Map<string, CfnSchema> {
    const documents = jsonSchemas(registry, "draft-04");
    const schemas = new Map<string, CfnSchema>();
    for (const definition of registry.definitions()) {
      if (definition.topic !== this.topicName) continue;
      const schemaName = `${definition.type}.v${definition.schemaVersion}`;
      const envelopeSchema = documents[`${schemaName}.json`];
      if (!envelopeSchema) throw new Error(`no JSON Schema exported for ${schemaName}`);
      const content = JSON.stringify(
        eventBridgeSchema({
          type: definition.type,
          description: definition.description,
          envelopeSchema,
          sourcePrefix: SOURCE_PREFIX,
        }),
      );
      const schema = new CfnSchema(home, `Schema${pascal(schemaName)}`, {
        registryName: schemaRegistry.attrRegistryName,
        schemaName,
        type: SCHEMA_TYPE,
        description: definition.description.slice(0, 256),
        content,
      });
      schemas.set(schemaName, schema);
    }
    return schemas;
  }
}

function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}

/** A topic's props checked, with their defaults: its stage and how long its archive keeps events. */
function topicSettings(
  scope: Construct,
  props: TopicProps,
): { stage: string; archiveRetention: Duration } {
  if (!isTopic(props.topicName)) {
    throw new Error(
      `topic ${JSON.stringify(props.topicName)} is not one of ${TOPICS.map((t) => JSON.stringify(t)).join(", ")}`,
    );
  }
  const stage = props.stage ?? "dev";
  const problem = stageProblem(stage);
  if (problem) throw new Error(`topic ${props.topicName}: ${problem}`);
  const archiveRetention = props.archiveRetention ?? retentionAt(scope, "archive");
  const retentionDays = archiveRetention.toHours() / 24;
  if (!Number.isInteger(retentionDays) || retentionDays < 1) {
    throw new Error(
      `topic ${props.topicName}: archiveRetention ${archiveRetention.toHumanString()} must be a whole number of days, at least 1`,
    );
  }
  return { stage, archiveRetention };
}
