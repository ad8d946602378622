import { Stack } from "aws-cdk-lib";
import { CfnSubscriber } from "aws-cdk-lib/aws-eventsv2";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import type { ConsumerGroupSubscription } from "./consumer-group-props";
import type { ConsumerGroupSettings } from "./consumer-group-settings";
import { SOURCE_PREFIX } from "./topic";

/**
 * `delivery: "subscriber"`: one FIFO subscriber per subscribed topic, on the topic's new
 * EventBridge bus, sending straight to the group's FIFO queue. No rule, buffer or dispatch
 * function. Facts from AWS's reference for this service (aws/agent-toolkit-for-aws,
 * skills/specialized-skills/serverless-skills/amazon-eventbridge-event-bus, cited below as
 * `eventbridge-event-bus/<file>`).
 */

/**
 * The FIFO queue's message group and deduplication id: the envelope's order key and event id, read
 * from the event (`$events.Data.detail`, the envelope of an event published with `PutEvents`:
 * eventbridge-event-bus/SKILL.md chapter 6). For what the relay publishes they equal the event's
 * `SystemMetadata.EventGroupId` and `DeduplicationId`, the subscriber's FIFO order; an event
 * forwarded from the classic bus (Topic.subscriberBus) carries no event group, so the envelope is
 * the one source both paths share. Per-message fields must be expressions, never literals
 * (references/target-contract.md, "Per-message fields belong in an expression").
 */
export const SUBSCRIBER_SQS_PARAMETERS = {
  messageGroupId: "{% $events.Data.detail.order_key %}",
  messageDeduplicationId: "{% $events.Data.detail.event_id %}",
} as const;

/**
 * The filter of a group's subscriber on one topic: the classic rule's pattern, as a `DATA` filter.
 * It holds for events published with `PutEvents`, whose payload is the classic envelope
 * (eventbridge-event-bus/SKILL.md chapters 6 and 7; references/migrating-from-classic.md).
 */
export function subscriberFilterPattern(
  eventTypes: readonly string[],
  unsequencedOnly = false,
): string {
  return JSON.stringify({
    source: [{ prefix: SOURCE_PREFIX }],
    "detail-type": [...new Set(eventTypes)],
    ...(unsequencedOnly ? { detail: UNSEQUENCED_DETAIL } : {}),
  });
}

/**
 * The `detail` pattern of a group that receives only unsequenced messages
 * (ConsumerGroupProps.unsequencedOnly): an envelope at version 0 of its aggregate, a message no
 * stream holds (schemas/envelope.ts AggregatePosition).
 */
export const UNSEQUENCED_DETAIL = { aggregate: { version: [0] } } as const;

export interface GroupSubscribers {
  readonly subscribers: readonly CfnSubscriber[];
  /** Assumed by EventBridge: sqs:SendMessage on the group's FIFO queue and dead-letter queue only. */
  readonly role: Role;
}

/**
 * The subscribers of a group (`<Topic>Subscriber`) and their delivery role (`SubscriberRole`).
 * Each is `FIFO` (order within an event group), delivers the default `RAW` payload (for
 * `PutEvents` the classic envelope, so the consumer reads the envelope from `detail` as on every
 * other path), retries like the group's rules, and dead-letters to `deadLetters` (a standard
 * queue; its records carry event ids, not payloads: SKILL.md chapter 12).
 */
export function createSubscribers(
  scope: Construct,
  subscriptions: readonly ConsumerGroupSubscription[],
  settings: ConsumerGroupSettings,
  target: IQueue,
  deadLetters: IQueue,
): GroupSubscribers {
  const role = createDeliveryRole(scope, settings, target, deadLetters);
  const subscribers = subscriptions.map((subscription) => {
    const bus = subscription.topic.subscriberBus();
    const subscriber = new CfnSubscriber(
      scope,
      `${pascal(subscription.topic.topicName)}Subscriber`,
      {
        name: `${settings.prefix}-${subscription.topic.topicName}`,
        description: `${settings.groupName}: ${subscription.eventTypes.join(", ")}`.slice(0, 512),
        eventBusArn: bus.attrEventBusArn,
        type: "FIFO",
        filterConfiguration: {
          filters: [
            {
              scope: "DATA",
              pattern: subscriberFilterPattern(subscription.eventTypes, settings.unsequencedOnly),
            },
          ],
        },
        invokeConfiguration: {
          targetArn: target.queueArn,
          roleArn: role.roleArn,
          sqsParameters: { ...SUBSCRIBER_SQS_PARAMETERS },
        },
        onFailureConfiguration: { arn: deadLetters.queueArn },
        retryPolicy: {
          maxRetryAttempts: settings.ruleRetryAttempts,
          maxEventAgeInSeconds: settings.ruleMaxEventAge.toSeconds(),
        },
      },
    );
    // The role's policy must exist before the first delivery.
    subscriber.node.addDependency(role);
    return subscriber;
  });
  return { subscribers, role };
}

/**
 * The role EventBridge assumes to deliver: trusted by `events.amazonaws.com` from this account,
 * allowed `sqs:SendMessage` on the target and on the dead-letter queue, which it needs too or a
 * failure leaves no record (SKILL.md chapter 13). The queues use SQS managed keys: no KMS grant.
 */
function createDeliveryRole(
  scope: Construct,
  { groupName }: ConsumerGroupSettings,
  target: IQueue,
  deadLetters: IQueue,
): Role {
  const role = new Role(scope, "SubscriberRole", {
    description: `EventBridge subscribers of ${groupName}: deliver to its FIFO queue`,
    assumedBy: new ServicePrincipal("events.amazonaws.com", {
      conditions: { StringEquals: { "aws:SourceAccount": Stack.of(scope).account } },
    }),
  });
  target.grant(role, "sqs:SendMessage");
  deadLetters.grant(role, "sqs:SendMessage");
  return role;
}

function pascal(kebab: string): string {
  return kebab
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
