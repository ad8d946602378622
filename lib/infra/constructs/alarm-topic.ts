import { Aws, Duration, RemovalPolicy } from "aws-cdk-lib";
import type { Alarm } from "aws-cdk-lib/aws-cloudwatch";
import { SnsAction } from "aws-cdk-lib/aws-cloudwatch-actions";
import { PolicyStatement, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { Topic } from "aws-cdk-lib/aws-sns";
import { EmailSubscription, UrlSubscription } from "aws-cdk-lib/aws-sns-subscriptions";
import { Construct } from "constructs";

/** Context key: e-mail addresses (comma-separated) subscribed to the alarm topic. */
export const ALARM_EMAIL_CONTEXT = "agentbus:alarmEmail";
/** Context key: HTTPS endpoints (comma-separated; a chat tool's webhook) subscribed to it. */
export const ALARM_WEBHOOK_CONTEXT = "agentbus:alarmWebhook";

export interface AlarmTopicProps {
  /** Addresses that get every alarm by e-mail (each confirms its subscription once). */
  readonly emails?: readonly string[];
  /** HTTPS endpoints that get every alarm as SNS's JSON notification (each confirms once). */
  readonly webhooks?: readonly string[];
}

const EMAIL = /^[^\s@,]+@[^\s@,]+\.[^\s@,]+$/;

/**
 * Where every alarm goes: an SNS topic, encrypted with a key of its own (CloudWatch cannot
 * publish to a topic under the AWS managed `alias/aws/sns` key, whose policy it is not in),
 * publishable over TLS only, with the e-mail and HTTPS subscriptions given. The key and the topic
 * policy let CloudWatch alarms of this account, and nothing else from outside it, publish.
 */
export class AlarmTopic extends Construct {
  readonly topic: Topic;
  readonly key: Key;

  constructor(scope: Construct, id: string, props: AlarmTopicProps = {}) {
    super(scope, id);
    const emails = props.emails ?? [];
    const webhooks = props.webhooks ?? [];
    checkEndpoints(emails, webhooks);
    this.key = new Key(this, "Key", {
      description: "AgentBus: encrypts the alarm topic",
      enableKeyRotation: true,
      pendingWindow: Duration.days(7),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const cloudwatch = new ServicePrincipal("cloudwatch.amazonaws.com");
    const fromThisAccount = { StringEquals: { "aws:SourceAccount": Aws.ACCOUNT_ID } };
    this.key.addToResourcePolicy(
      new PolicyStatement({
        sid: "CloudWatchAlarmsEncryptForTheTopic",
        principals: [cloudwatch],
        actions: ["kms:Decrypt", "kms:GenerateDataKey*"],
        resources: ["*"],
        conditions: fromThisAccount,
      }),
    );
    this.topic = new Topic(this, "Resource", {
      displayName: "AgentBus alarms",
      masterKey: this.key,
      enforceSSL: true,
    });
    this.topic.addToResourcePolicy(
      new PolicyStatement({
        sid: "CloudWatchAlarmsPublish",
        principals: [cloudwatch],
        actions: ["sns:Publish"],
        resources: [this.topic.topicArn],
        conditions: {
          ...fromThisAccount,
          ArnLike: {
            "aws:SourceArn": `arn:${Aws.PARTITION}:cloudwatch:${Aws.REGION}:${Aws.ACCOUNT_ID}:alarm:*`,
          },
        },
      }),
    );
    for (const email of emails) this.topic.addSubscription(new EmailSubscription(email));
    for (const url of webhooks) this.topic.addSubscription(new UrlSubscription(url));
  }

  /**
   * Send each alarm's ALARM state to the topic, and with `resolved` its OK state too: for alarms
   * whose OK means the problem is gone (a queue emptied), not for those that count occurrences,
   * whose OK only means five quiet minutes while the item still waits for a person.
   */
  notify(alarms: Iterable<Alarm>, { resolved }: { readonly resolved: boolean }): void {
    const action = new SnsAction(this.topic);
    for (const alarm of alarms) {
      alarm.addAlarmAction(action);
      if (resolved) alarm.addOkAction(action);
    }
  }
}

/** The comma-separated values of a context key, trimmed; none when it is unset or empty. */
export function listFromContext(value: unknown, key: string): string[] {
  if (value === undefined || value === null || value === "") return [];
  if (typeof value !== "string")
    throw new Error(`context ${key} must be a string (comma-separated), not ${typeof value}`);
  return value
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);
}

function checkEndpoints(emails: readonly string[], webhooks: readonly string[]): void {
  const problems: string[] = [];
  for (const email of emails)
    if (!EMAIL.test(email))
      problems.push(`${ALARM_EMAIL_CONTEXT}: ${JSON.stringify(email)} is not an e-mail address`);
  for (const url of webhooks) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      parsed = undefined;
    }
    if (parsed?.protocol !== "https:")
      problems.push(`${ALARM_WEBHOOK_CONTEXT}: ${JSON.stringify(url)} is not an https:// URL`);
  }
  if (problems.length > 0)
    throw new Error(`invalid alarm subscriptions:\n  - ${problems.join("\n  - ")}`);
}
