import { createHash } from "node:crypto";
import { replayDeduplicationId } from "../../functions/core/replay";
import type { ReplayWindow } from "./replay-plan";

/**
 * `agentbus replay` for a group delivered by a subscriber of its topic's new EventBridge bus
 * (`delivery: "subscriber"`): such a bus has no archive and no replay API. Replay is a subscriber
 * created with `StartingPosition: POINT_IN_TIME` over what the bus retains (AWS's reference,
 * aws/agent-toolkit-for-aws amazon-eventbridge-event-bus/SKILL.md chapter 17 and
 * references/code-samples.md "Create a subscriber that reads history"; the EventBridge user
 * guide's "Replaying retained events to a subscriber"). Pure: the `CreateSubscriber` request a
 * replay of one live subscriber is, built from that subscriber's description; nothing is called.
 */

/** A subscriber as `DescribeSubscriber` describes it (the members a replay copies). */
export interface SubscriberDescription {
  readonly Name: string;
  readonly EventBusArn: string;
  readonly Type?: string;
  readonly FilterConfiguration?: {
    readonly Filters: readonly { Scope: string; Pattern: string }[];
  };
  readonly InvokeConfiguration: {
    readonly TargetArn: string;
    readonly RoleArn: string;
    readonly SqsParameters?: { readonly MessageGroupId?: string };
  };
  readonly OnFailureConfiguration?: { readonly Arn?: string };
  readonly RetryPolicy?: {
    readonly MaxRetryAttempts?: number;
    readonly MaxEventAgeInSeconds?: number;
  };
}

/** The `CreateSubscriber` request of a point-in-time replay (API member names). */
export interface PointInTimeSubscriberRequest extends SubscriberDescription {
  readonly ClientToken: string;
  readonly Type: "FIFO";
  readonly StartingPosition: "POINT_IN_TIME";
  /** Seconds since the Unix epoch, as the CLI and CloudFormation take them. */
  readonly PointInTimeConfiguration: {
    readonly PointType: "TIMESTAMP";
    readonly StartingPoint: number;
    readonly EndPoint: number;
  };
  readonly InvokeConfiguration: SubscriberDescription["InvokeConfiguration"] & {
    readonly SqsParameters: {
      readonly MessageGroupId?: string;
      readonly MessageDeduplicationId: string;
    };
  };
  readonly Transformer: {
    readonly Type: "JSONATA";
    readonly JsonataConfiguration: { readonly Expression: string };
  };
}

/**
 * A replay of `live` over `window`, named `name` (replayName: stage, topic, window, group), so a
 * repeated command sends the same request with the same `ClientToken` and creates nothing new
 * (eventbridge-event-bus/references/provisioning-and-state.md, "Create idempotency"). What it
 * delivers carries the marks the consumer reads (functions/core/replay.ts): the event with a
 * `replay-name` beside its envelope, under a FIFO deduplication id of the replay's own (the event
 * id and a digest of the name, `replayDeduplicationId`) so the live delivery's five-minute window
 * does not swallow it.
 */
export function pointInTimeReplay(
  live: SubscriberDescription,
  name: string,
  window: ReplayWindow,
): PointInTimeSubscriberRequest {
  if (!/^[A-Za-z0-9][.\-_A-Za-z0-9]{0,255}$/.test(name))
    throw new Error(`subscriber name ${JSON.stringify(name)} is not one EventBridge takes`);
  const suffix = replayDeduplicationId("", name); // "-<digest>"
  return {
    ...live,
    Name: name,
    ClientToken: createHash("sha256").update(name).digest("hex").slice(0, 64),
    Type: "FIFO",
    StartingPosition: "POINT_IN_TIME",
    PointInTimeConfiguration: {
      PointType: "TIMESTAMP",
      StartingPoint: Math.floor(window.from.getTime() / 1000),
      EndPoint: Math.ceil(window.to.getTime() / 1000),
    },
    InvokeConfiguration: {
      ...live.InvokeConfiguration,
      SqsParameters: {
        ...live.InvokeConfiguration.SqsParameters,
        MessageDeduplicationId: `{% $events.Data.detail.event_id & '${suffix}' %}`,
      },
    },
    Transformer: {
      Type: "JSONATA",
      JsonataConfiguration: {
        Expression: `{% $merge([$events.Data, {"replay-name": "${name}"}]) %}`,
      },
    },
  };
}
