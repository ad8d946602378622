import type { SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { subscriberBusEntry } from "../../functions/adapters/eventbridge/subscriber-bus";
import type { LocalSubscriber, LocalSubscriberBus } from "../../lib/dev/local/deploy";
import { LocalSubscriberBuses } from "../../lib/dev/local/runtime/subscriber-buses";
import { SUBSCRIBER_SQS_PARAMETERS } from "../../lib/infra/constructs/consumer-group-subscribers";
import { pointInTimeReplay } from "../../lib/operator/replay-subscriber";
import { taskStream } from "../support/factories";

const BUS: LocalSubscriberBus = {
  logicalId: "Bus",
  name: "agentbus-t-events",
  arn: "arn:aws:events:us-east-1:1:event-busv2/agentbus-t-events/local",
  retentionDays: 1,
};
const SUBSCRIBER: LocalSubscriber = {
  logicalId: "Sub",
  name: "agentbus-t-group-events",
  busArn: BUS.arn,
  fifo: true,
  patterns: [
    { source: [{ prefix: "agentbus" }], "detail-type": ["task.accepted", "plan.created"] },
  ],
  targetArn: "arn:aws:sqs:us-east-1:1:group.fifo",
  messageGroupId: SUBSCRIBER_SQS_PARAMETERS.messageGroupId,
  messageDeduplicationId: SUBSCRIBER_SQS_PARAMETERS.messageDeduplicationId,
  onFailureArn: "arn:aws:sqs:us-east-1:1:group-buffer-dlq",
  maxRetryAttempts: 185,
};

/** An SQS that records what is sent, failing every send to the queues in `failing`. */
function recordingSqs(failing: readonly string[] = []) {
  const sent: SendMessageCommand["input"][] = [];
  const sqs = {
    send: async (command: SendMessageCommand) => {
      if (failing.includes(String(command.input.QueueUrl))) throw new Error("queue unavailable");
      sent.push(command.input);
      return {};
    },
  } as unknown as SQSClient;
  return { sqs, sent };
}

function buses(sqs: SQSClient, now: () => number = Date.now) {
  return new LocalSubscriberBuses({
    buses: [BUS],
    subscribers: [SUBSCRIBER],
    sqs,
    queueUrl: (arn) => `url:${arn.split(":").at(-1)}`,
    region: "us-east-1",
    accountId: "1",
    now,
  });
}

describe("the local runtime's new bus and FIFO subscriber", () => {
  it("delivers matching events in order, grouped by order key, de-duplicated by event id", async () => {
    const { sqs, sent } = recordingSqs();
    const events = taskStream(1, 4); // task.accepted, plan.created, then types the filter leaves out
    const answer = await buses(sqs).putEvents({
      EventBusArn: BUS.arn,
      Entries: events.map(subscriberBusEntry),
    });
    expect(answer.Entries?.map((e) => e.SuccessCode)).toEqual(events.map(() => "PUBLISHED"));
    const wanted = events.filter((e) => ["task.accepted", "plan.created"].includes(e.event_type));
    expect(wanted.length).toBeGreaterThan(0);
    expect(wanted.length).toBeLessThan(events.length);
    expect(sent.map((m) => m.MessageDeduplicationId)).toEqual(wanted.map((e) => e.event_id));
    expect(new Set(sent.map((m) => m.MessageGroupId))).toEqual(new Set([events[0]?.order_key]));
    expect(sent.map((m) => JSON.parse(m.MessageBody ?? "").detail)).toEqual(wanted);
    expect(new Set(sent.map((m) => m.QueueUrl))).toEqual(new Set(["url:group.fifo"]));
  });

  it("answers DEDUPLICATED for an event id seen in the last 5 minutes, and delivers it once", async () => {
    const { sqs, sent } = recordingSqs();
    let now = 1_000_000;
    const bus = buses(sqs, () => now);
    const [event] = taskStream(1, 1);
    if (!event) throw new Error("no event");
    const entry = subscriberBusEntry(event);
    const codes = async () =>
      (await bus.putEvents({ EventBusArn: BUS.arn, Entries: [entry] })).Entries?.[0]?.SuccessCode;
    expect(await codes()).toBe("PUBLISHED");
    now += 4 * 60_000;
    expect(await codes()).toBe("DEDUPLICATED");
    now += 2 * 60_000;
    expect(await codes()).toBe("PUBLISHED");
    expect(sent).toHaveLength(2);
  });

  it("dead-letters an event it cannot deliver with a record that names it and carries no payload", async () => {
    const { sqs, sent } = recordingSqs(["url:group.fifo"]);
    const [event] = taskStream(1, 1);
    if (!event) throw new Error("no event");
    await buses(sqs).putEvents({ EventBusArn: BUS.arn, Entries: [subscriberBusEntry(event)] });
    expect(sent.map((m) => m.QueueUrl)).toEqual(["url:group-buffer-dlq"]);
    const record = JSON.parse(sent[0]?.MessageBody ?? "{}") as Record<string, unknown>;
    expect(record).toMatchObject({ subscriber: SUBSCRIBER.name, errorMessage: expect.any(String) });
    expect(JSON.stringify(record)).not.toContain(event.event_id);
    expect(record.detail).toBeUndefined();
  });

  it("keeps events for the bus's retention only", async () => {
    const { sqs } = recordingSqs();
    let now = 0;
    const bus = buses(sqs, () => now);
    const [first, second] = taskStream(1, 2);
    if (!first || !second) throw new Error("no events");
    await bus.putEvents({ EventBusArn: BUS.arn, Entries: [subscriberBusEntry(first)] });
    now = 86_400_000 + 1;
    await bus.putEvents({ EventBusArn: BUS.arn, Entries: [subscriberBusEntry(second)] });
    expect(
      bus.retainedSince(BUS.arn, 0).map((e) => (e.Data.detail as { event_id: string }).event_id),
    ).toEqual([second.event_id]);
  });

  it("reads from its retention window, which starts at its creation while it is young, and refuses a replay that starts earlier", async () => {
    const { sqs } = recordingSqs();
    let now = 1_000_000;
    const bus = buses(sqs, () => now);
    const startOf = () =>
      bus.describeEventBus(BUS.arn).StorageConfiguration.RetentionWindowStartTime.getTime();
    expect(startOf()).toBe(1_000_000);
    now += 2 * 86_400_000;
    expect(startOf()).toBe(now - 86_400_000);
    const live = bus.describeSubscriber(SUBSCRIBER.name);
    const replayFrom = (from: number) =>
      bus.createSubscriber(
        pointInTimeReplay(live, `replay-${from}`, { from: new Date(from), to: new Date(now) }),
      );
    await expect(replayFrom(now - 2 * 86_400_000)).rejects.toThrow(
      /is before the retention window/,
    );
    await expect(replayFrom(now - 3_600_000)).resolves.toEqual({ created: true });
  });
});
