import { describe, expect, it } from "vitest";
import { ALARM_EMAIL_CONTEXT, ALARM_WEBHOOK_CONTEXT } from "../../lib/infra/constructs/alarm-topic";
import { functionsOfKind, type Resource, resources, single, synthesizeStack } from "./synth";

/**
 * Alarms that reach a person: the alarm topic (its own rotated key that CloudWatch may use, TLS
 * only), its subscriptions from the context, and every alarm of the stack with the topic as its
 * action; the cases that had no alarm before (PARTIAL runs and hand-offs are in
 * monitoring.test.ts) — a sweeper that keeps failing and a wait for a person near its deadline.
 */

const ALARM = "AWS::CloudWatch::Alarm";
const { template } = synthesizeStack();
const topicOf = (t: typeof template) =>
  single(t, "AWS::SNS::Topic", (r) => r.Properties.DisplayName === "AgentBus alarms");
const topic = topicOf(template);
const topicRef = { Ref: topic.id };
const alarms = resources(template, ALARM);
const alarmNamed = (id: string) => {
  const found = alarms.filter((a) => a.id.includes(id));
  expect(found, id).toHaveLength(1);
  return found[0] as Resource;
};
/** The alarms whose OK is not sent: those that count what a consumer emitted. */
const countsOccurrences = (a: Resource) =>
  a.Properties.Namespace === "AgentBus" &&
  (a.Properties.Dimensions as { Name: string }[]).some((d) => d.Name === "consumer_group");

describe("the alarm topic", () => {
  it("is encrypted with a key of its own, rotated, that CloudWatch of this account may use", () => {
    const keyId = (topic.Properties.KmsMasterKeyId as { "Fn::GetAtt": string[] })["Fn::GetAtt"][0];
    const key = single(template, "AWS::KMS::Key", (k) => k.id === keyId);
    expect(key.Properties.EnableKeyRotation).toBe(true);
    const statements = (key.Properties.KeyPolicy as { Statement: Record<string, unknown>[] })
      .Statement;
    const cloudwatch = statements.find((s) => s.Sid === "CloudWatchAlarmsEncryptForTheTopic");
    expect(cloudwatch).toMatchObject({
      Effect: "Allow",
      Principal: { Service: "cloudwatch.amazonaws.com" },
      Action: ["kms:Decrypt", "kms:GenerateDataKey*"],
      Condition: { StringEquals: { "aws:SourceAccount": { Ref: "AWS::AccountId" } } },
    });
  });

  it("takes publishes over TLS only, and CloudWatch alarms of this account may publish", () => {
    const policy = single(template, "AWS::SNS::TopicPolicy", (p) =>
      JSON.stringify(p.Properties.Topics).includes(topic.id),
    );
    const statements = (
      policy.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }
    ).Statement;
    expect(statements).toContainEqual(
      expect.objectContaining({
        Effect: "Deny",
        Action: "sns:Publish",
        Condition: { Bool: { "aws:SecureTransport": "false" } },
      }),
    );
    const publish = statements.find((s) => s.Sid === "CloudWatchAlarmsPublish");
    expect(publish).toMatchObject({
      Effect: "Allow",
      Principal: { Service: "cloudwatch.amazonaws.com" },
      Action: "sns:Publish",
      Resource: topicRef,
    });
    expect(JSON.stringify(publish?.Condition)).toContain(":alarm:*");
  });

  it("is a stack output, AlarmTopicArn", () => {
    expect(template.toJSON().Outputs.AlarmTopicArn.Value).toEqual(topicRef);
  });

  it("has no subscription unless the context names one", () => {
    expect(resources(template, "AWS::SNS::Subscription")).toEqual([]);
  });

  it("subscribes the e-mail addresses and HTTPS endpoints the context names", () => {
    const { template: subscribed } = synthesizeStack({}, "AgentBus-test", {
      [ALARM_EMAIL_CONTEXT]: "ops@example.com, oncall@example.com",
      [ALARM_WEBHOOK_CONTEXT]: "https://hooks.example.com/services/T0/B0/x",
    });
    const ref = { Ref: topicOf(subscribed).id };
    const subscriptions = resources(subscribed, "AWS::SNS::Subscription").map((s) => s.Properties);
    expect(subscriptions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ Protocol: "email", Endpoint: "ops@example.com", TopicArn: ref }),
        expect.objectContaining({
          Protocol: "email",
          Endpoint: "oncall@example.com",
          TopicArn: ref,
        }),
        expect.objectContaining({
          Protocol: "https",
          Endpoint: "https://hooks.example.com/services/T0/B0/x",
          TopicArn: ref,
        }),
      ]),
    );
    expect(subscriptions).toHaveLength(3);
  });

  it("refuses an address that is not one and a webhook that is not HTTPS, naming each", () => {
    expect(() =>
      synthesizeStack({}, "AgentBus-test", {
        [ALARM_EMAIL_CONTEXT]: "ops-at-example.com",
        [ALARM_WEBHOOK_CONTEXT]: "http://hooks.example.com/x",
      }),
    ).toThrow(
      /agentbus:alarmEmail: "ops-at-example.com" is not an e-mail address[\s\S]*agentbus:alarmWebhook: "http:\/\/hooks.example.com\/x" is not an https:\/\/ URL/,
    );
  });
});

describe("every alarm reaches the topic", () => {
  it("each alarm of the stack sends its ALARM state to the topic", () => {
    expect(alarms.length).toBeGreaterThan(40);
    for (const alarm of alarms) expect(alarm.Properties.AlarmActions, alarm.id).toEqual([topicRef]);
  });

  it("an alarm whose OK means the problem is gone sends OK too; one that counts occurrences does not", () => {
    const counting = alarms.filter(countsOccurrences);
    expect(counting.length).toBeGreaterThan(10);
    for (const alarm of counting) expect(alarm.Properties.OKActions, alarm.id).toBeUndefined();
    for (const alarm of alarms.filter((a) => !countsOccurrences(a)))
      expect(alarm.Properties.OKActions, alarm.id).toEqual([topicRef]);
  });

  it("dead letters, the relay's failures and the relay falling behind are among them", () => {
    const deadLetters = alarms.filter((a) => a.id.includes("DeadLetterAlarm"));
    expect(deadLetters.length).toBeGreaterThan(10);
    for (const alarm of [
      ...deadLetters,
      alarmNamed("RelayFailureAlarm"),
      alarmNamed("RelayIteratorAgeAlarm"),
    ])
      expect(alarm.Properties.AlarmActions).toEqual([topicRef]);
  });
});

describe("the sweeper's alarms", () => {
  const [sweeper] = functionsOfKind(template, "sweeper");

  it("a sweeper failing every minute for 5 minutes", () => {
    expect(alarmNamed("LeaseSweeperFailureAlarm").Properties).toMatchObject({
      Namespace: "AWS/Lambda",
      MetricName: "Errors",
      Dimensions: [{ Name: "FunctionName", Value: { Ref: sweeper?.id } }],
      Statistic: "Sum",
      Period: 60,
      EvaluationPeriods: 5,
      DatapointsToAlarm: 5,
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
      AlarmActions: [topicRef],
    });
    expect(alarmNamed("LeaseSweeperFailureAlarm").Properties.AlarmDescription).toMatch(
      /`npx agentbus status`/,
    );
  });

  it("a BLOCKED run's approval or confirmation less than 10 minutes from its deadline", () => {
    const alarm = alarmNamed("LeaseSweeperDeadlineNearAlarm").Properties;
    expect(alarm).toMatchObject({
      Namespace: "AgentBus",
      MetricName: "ApprovalDeadlineNear",
      Dimensions: [{ Name: "service", Value: "lease-sweeper" }],
      Statistic: "Maximum",
      Period: 60,
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
      AlarmActions: [topicRef],
      OKActions: [topicRef],
    });
    expect(alarm.AlarmDescription).toMatch(/10 minutes.*`npx agentbus approvals`/);
    expect(sweeper).toBeDefined();
    const env = (
      (sweeper as Resource).Properties.Environment as {
        Variables: Record<string, unknown>;
      }
    ).Variables;
    expect(env.APPROVAL_WARNING_SECONDS).toBe("600");
  });
});
