import {
  CreateArchiveCommand,
  CreateEventBusCommand,
  DescribeReplayCommand,
  EventBridgeClient,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
  StartReplayCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulator } from "../support/aws";

/**
 * The local emulator's archive replays (lib/dev/local/moto_launcher.py) behave as AWS's: only the
 * archived events whose time falls in the window, only to the rules the replay names (all of the
 * bus's when it names none), each through the rule's pattern and with `replay-name` set. moto
 * alone sends every archived event to every rule.
 */
describe("the local emulator's archive replay", () => {
  const eventbridge = new EventBridgeClient({ ...emulator(), maxAttempts: 1 });
  const sqs = new SQSClient({ ...emulator(), maxAttempts: 1 });
  const bus = `replay-${ulid().toLowerCase()}`;
  const now = Date.now();
  const hour = 3_600_000;
  let busArn = "";
  let archiveArn = "";
  const rules: Record<"one" | "two", { arn: string; queue: string }> = {
    one: { arn: "", queue: "" },
    two: { arn: "", queue: "" },
  };

  /** A rule for one detail type, delivering to a queue of its own. */
  const ruleFor = async (name: "one" | "two") => {
    const { QueueUrl = "" } = await sqs.send(
      new CreateQueueCommand({ QueueName: `${bus}-${name}` }),
    );
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }),
    );
    const pattern = { source: [{ prefix: "agentbus" }], "detail-type": [`t.${name}`] };
    const { RuleArn = "" } = await eventbridge.send(
      new PutRuleCommand({ Name: name, EventBusName: bus, EventPattern: JSON.stringify(pattern) }),
    );
    await eventbridge.send(
      new PutTargetsCommand({
        Rule: name,
        EventBusName: bus,
        Targets: [{ Id: "q", Arn: Attributes?.QueueArn }],
      }),
    );
    rules[name] = { arn: RuleArn, queue: QueueUrl };
  };

  /** Every message of a queue, parsed and deleted. */
  const drain = async (name: "one" | "two") => {
    const bodies: Record<string, unknown>[] = [];
    for (;;) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: rules[name].queue, MaxNumberOfMessages: 10 }),
      );
      if (Messages.length === 0) return bodies;
      for (const m of Messages) {
        bodies.push(JSON.parse(m.Body ?? "{}"));
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: rules[name].queue, ReceiptHandle: m.ReceiptHandle }),
        );
      }
    }
  };

  const put = (type: string, n: number, at: number) => ({
    EventBusName: bus,
    Source: "agentbus.test",
    DetailType: type,
    Detail: JSON.stringify({ n }),
    Time: new Date(at),
  });

  const replay = async (name: string, from: number, to: number, filter?: string[]) => {
    await eventbridge.send(
      new StartReplayCommand({
        ReplayName: name,
        EventSourceArn: archiveArn,
        EventStartTime: new Date(from),
        EventEndTime: new Date(to),
        Destination: { Arn: busArn, ...(filter ? { FilterArns: filter } : {}) },
      }),
    );
    return { one: await drain("one"), two: await drain("two") };
  };

  const ns = (bodies: Record<string, unknown>[]) =>
    bodies.map((b) => (b.detail as { n: number }).n).sort();

  beforeAll(async () => {
    ({ EventBusArn: busArn = "" } = await eventbridge.send(
      new CreateEventBusCommand({ Name: bus }),
    ));
    ({ ArchiveArn: archiveArn = "" } = await eventbridge.send(
      new CreateArchiveCommand({
        ArchiveName: bus.slice(0, 48),
        EventSourceArn: busArn,
        EventPattern: JSON.stringify({ source: [{ prefix: "agentbus" }] }),
      }),
    ));
    await ruleFor("one");
    await ruleFor("two");
    await eventbridge.send(
      new PutEventsCommand({
        Entries: [
          put("t.one", 1, now - 3 * hour),
          put("t.one", 2, now - 2 * hour),
          put("t.two", 3, now - 2 * hour),
          put("t.one", 4, now - hour),
        ],
      }),
    );
    await drain("one");
    await drain("two");
  });

  afterAll(() => {
    eventbridge.destroy();
    sqs.destroy();
  });

  it("replays only the window [start, end), to the rules in FilterArns, marked with replay-name", async () => {
    const got = await replay(`${bus}-a`, now - 2 * hour, now - hour, [rules.one.arn]);
    expect(ns(got.one)).toEqual([2]);
    expect(got.two).toEqual([]);
    const [event] = got.one;
    expect(event).toMatchObject({
      "replay-name": `${bus}-a`,
      "detail-type": "t.one",
      source: "agentbus.test",
    });
    expect(event).not.toHaveProperty("ingestion-time");
    expect(Date.parse(String(event?.time))).toBeGreaterThanOrEqual(now - 2 * hour - 1000);
  });

  it("without FilterArns, to every rule of the bus whose pattern matches (never the archive's)", async () => {
    const got = await replay(`${bus}-b`, now - 4 * hour, now);
    expect(ns(got.one)).toEqual([1, 2, 4]);
    expect(ns(got.two)).toEqual([3]);
    for (const e of [...got.one, ...got.two]) expect(e["replay-name"]).toBe(`${bus}-b`);
  });

  it("is COMPLETED when StartReplay returns, with the time of the last event replayed", async () => {
    await replay(`${bus}-c`, now - 4 * hour, now - 90 * 60_000, [rules.two.arn]);
    const described = await eventbridge.send(new DescribeReplayCommand({ ReplayName: `${bus}-c` }));
    expect(described.State).toBe("COMPLETED");
    expect(described.EventLastReplayedTime?.getTime()).toBeCloseTo(now - 2 * hour, -4);
  });
});
