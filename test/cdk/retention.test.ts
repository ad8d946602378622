import type { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { RETENTION } from "../../functions/core/retention";
import { retentionContextKey } from "../../lib/infra/retention";
import { FRONT_DOOR_CONTEXT, functionsOfKind, refersTo, resources, synthesizeStack } from "./synth";

/**
 * Every retention the stack deploys is the declaration's (functions/core/retention.ts), and a
 * deployer's `-c agentbus:retention:<place>=<days>` reaches every resource of that place.
 */

const DAY = 24 * 3600;

/** The queues some queue's redrive policy names: the dead-letter queues. */
function deadLetterQueueIds(template: Template): Set<string> {
  const ids = new Set<string>();
  for (const queue of resources(template, "AWS::SQS::Queue")) {
    const redrive = queue.Properties.RedrivePolicy as { deadLetterTargetArn?: unknown } | undefined;
    const target = refersTo(redrive?.deadLetterTargetArn);
    if (target) ids.add(target);
  }
  // The relay's failure queue is a dead-letter destination too: the stream source's OnFailure.
  for (const mapping of resources(template, "AWS::Lambda::EventSourceMapping")) {
    const onFailure = (
      mapping.Properties.DestinationConfig as { OnFailure?: { Destination?: unknown } }
    )?.OnFailure?.Destination;
    const target = refersTo(onFailure);
    if (target) ids.add(target);
  }
  return ids;
}

/** `KEPT_MESSAGE_DAYS` of each consumer function, by group (absent where unset). */
function keptMessageDays(template: Template): Record<string, unknown> {
  return Object.fromEntries(
    functionsOfKind(template, "consumer").map((fn) => [
      fn.Metadata["agentbus:group"],
      (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables
        .KEPT_MESSAGE_DAYS,
    ]),
  );
}

/** Each kind of resource's retention, as the template has it. */
function retentions(template: Template) {
  const dlqs = deadLetterQueueIds(template);
  const queues = resources(template, "AWS::SQS::Queue");
  return {
    archives: resources(template, "AWS::Events::Archive").map((a) => a.Properties.RetentionDays),
    deadLetterQueues: queues
      .filter((q) => dlqs.has(q.id))
      .map((q) => q.Properties.MessageRetentionPeriod),
    queues: queues.filter((q) => !dlqs.has(q.id)).map((q) => q.Properties.MessageRetentionPeriod),
    logGroups: resources(template, "AWS::Logs::LogGroup").map((l) => l.Properties.RetentionInDays),
    // Every table but the customer keys', which keeps no backup: a restore would undo erasures.
    backups: resources(template, "AWS::DynamoDB::Table")
      .filter((t) => !t.id.startsWith("CustomerKeysTable"))
      .map(
        (t) =>
          (t.Properties.PointInTimeRecoverySpecification as { RecoveryPeriodInDays?: number })
            ?.RecoveryPeriodInDays,
      ),
  };
}

const everyOne = (values: readonly unknown[], expected: unknown) => {
  expect(values.length).toBeGreaterThan(0);
  expect(new Set(values)).toEqual(new Set([expected]));
};

describe("the stack's retentions", () => {
  it("are the declaration's: archives, queues, dead-letter queues, log groups, backups", () => {
    const { template } = synthesizeStack({}, "AgentBus-test", FRONT_DOOR_CONTEXT);
    const found = retentions(template);
    everyOne(found.archives, RETENTION.archive.days);
    everyOne(found.deadLetterQueues, RETENTION.deadLetterQueues.days * DAY);
    everyOne(found.queues, RETENTION.queues.days * DAY);
    // The functions' log groups and the front door's access log.
    everyOne(found.logGroups, RETENTION.functionLogs.days);
    expect(RETENTION.accessLog.days).toBe(RETENTION.functionLogs.days);
    everyOne(found.backups, RETENTION.backups.days);
    // The group that keeps messages whole (audit) is told how long; no other group keeps any.
    const kept = keptMessageDays(template);
    expect(Object.keys(kept).length).toBeGreaterThan(2);
    expect(Object.entries(kept).filter(([, days]) => days !== undefined)).toEqual([
      ["audit", String(RETENTION.auditMessages.days)],
    ]);
  });

  it("follow the context's agentbus:retention:<place> to every resource of the place", () => {
    const { template } = synthesizeStack({}, "AgentBus-test", {
      ...FRONT_DOOR_CONTEXT,
      [retentionContextKey("archive")]: "7",
      [retentionContextKey("deadLetterQueues")]: 10,
      [retentionContextKey("queues")]: "2",
      [retentionContextKey("functionLogs")]: "14",
      [retentionContextKey("accessLog")]: "90",
      [retentionContextKey("backups")]: "7",
      [retentionContextKey("auditMessages")]: "7",
    });
    const found = retentions(template);
    everyOne(found.archives, 7);
    everyOne(found.deadLetterQueues, 10 * DAY);
    everyOne(found.queues, 2 * DAY);
    expect(new Set(found.logGroups)).toEqual(new Set([14, 90]));
    everyOne(found.backups, 7);
    expect(keptMessageDays(template).audit).toBe("7");
  });

  it("refuse a context value the place cannot keep, naming the key", () => {
    const synth = (key: string, value: unknown) => () =>
      synthesizeStack({}, "AgentBus-test", { ...FRONT_DOOR_CONTEXT, [key]: value });
    expect(synth(retentionContextKey("deadLetterQueues"), "15")).toThrow(
      /context agentbus:retention:deadLetterQueues: .*from 1 to 14, not 15/,
    );
    expect(synth(retentionContextKey("archive"), "a month")).toThrow(
      /context agentbus:retention:archive: "a month" is not a number of days/,
    );
    expect(synth(retentionContextKey("functionLogs"), "31")).toThrow(
      /context agentbus:retention:functionLogs: CloudWatch Logs keeps .* days, not 31/,
    );
  });
});
