import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from "@aws-sdk/client-dynamodb-streams";
import { GetQueueAttributesCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayFailureRecords } from "../../functions/adapters/dynamodb/relay-failure";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { taskStream } from "../support/factories";

const STAGE = `rp-${Date.now().toString(36)}`;

/**
 * `agentbus republish` on the local stack: events committed while the relay is held back are put
 * on their buses again from the events table (a time window, then a failure record's stream
 * positions); the projection applies each once, and the late live delivery finds them applied.
 */
describe("agentbus republish", () => {
  let env: LocalEnvironment;

  const cli = localCli(() => env, STAGE);

  const versionOf = async (events: Envelope[]) => {
    const id = events[0]?.aggregate.id ?? "";
    const { state } = await env.store.load({ state: { type: "task_view", id } });
    return (state?.data as { version?: number } | undefined)?.version;
  };

  /** Where the events' records sit in the events table's stream (shard and sequence numbers). */
  const positionsOf = async (events: readonly Envelope[]) => {
    const streams = new DynamoDBStreamsClient(emulator());
    try {
      const { Table } = await env.clients.dynamodb.send(
        new DescribeTableCommand({ TableName: env.names.tables.events }),
      );
      const streamArn = Table?.LatestStreamArn ?? "";
      const { StreamDescription } = await streams.send(
        new DescribeStreamCommand({ StreamArn: streamArn }),
      );
      const shardId = StreamDescription?.Shards?.[0]?.ShardId ?? "";
      const { ShardIterator } = await streams.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ShardIteratorType: "TRIM_HORIZON",
        }),
      );
      const { Records = [] } = await streams.send(
        new GetRecordsCommand({ ShardIterator, Limit: 1000 }),
      );
      const ids = new Set(events.map((e) => e.event_id));
      const sequences = Records.filter((r) => ids.has(r.dynamodb?.NewImage?.event_id?.S ?? "")).map(
        (r) => r.dynamodb?.SequenceNumber ?? "",
      );
      expect(sequences).toHaveLength(events.length);
      return {
        streamArn,
        shardId,
        startSequenceNumber: sequences[0],
        endSequenceNumber: sequences.at(-1),
      };
    } finally {
      streams.destroy();
    }
  };

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
    env.runtime.pauseStream();
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("refuses bad input with exit code 2", async () => {
    expect((await cli("republish")).code).toBe(2);
    expect((await cli("republish", "--from", "yesterday", "--to", "today")).code).toBe(2);
    expect((await cli("republish", "--failures", "--from", new Date().toISOString())).code).toBe(2);
    const tooLong = await cli(
      "republish",
      "--from",
      "2026-01-01T00:00:00Z",
      "--to",
      "2026-02-01T00:00:00Z",
    );
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toContain("split it");
  }, 240_000);

  it("republishes a time window from the events table; the live delivery later is a duplicate", async () => {
    const from = new Date(Date.now() - 1000);
    const events = taskStream(1, 3);
    await env.store.commit({ append: events });
    const to = new Date(Date.now() + 1000);
    const dry = await cli(
      "republish",
      "--from",
      from.toISOString(),
      "--to",
      to.toISOString(),
      "--dry-run",
    );
    expect(dry.stdout).toContain("3 event(s) would be republished");
    expect(await versionOf(events)).toBeUndefined();
    const result = await cli(
      "republish",
      "--from",
      from.toISOString(),
      "--to",
      to.toISOString(),
      "--reason",
      "relay outage",
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("3 of 3 event(s) republished");
    await waitUntil("the projection at version 3", async () =>
      (await versionOf(events)) === 3 ? true : undefined,
    );
    // Let the consumer report what it committed before counting (the state is visible first).
    await env.runtime.idle();
    const applied = env.observations.count("task-projection", "applied");
    env.runtime.resumeStream();
    await env.runtime.idle();
    expect(env.observations.count("task-projection", "applied")).toBe(applied);
    expect(env.observations.count("task-projection", "duplicate")).toBeGreaterThanOrEqual(3);
    expect(await versionOf(events)).toBe(3);
  }, 240_000);

  it("republishes the window of a relay failure record and deletes the record", async () => {
    env.runtime.pauseStream();
    const events = taskStream(1, 2);
    await env.store.commit({ append: events });
    const url = env.names.relayFailureQueue;
    // What the stream event source's on-failure destination records: the batch's stream
    // positions (here, those of the two events' records), no keys.
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: JSON.stringify({
          requestContext: { condition: "RetryAttemptsExhausted" },
          DDBStreamBatchInfo: { ...(await positionsOf(events)), batchSize: 2 },
        }),
      }),
    );
    const result = await cli("republish", "--failures");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/\d+ of \d+ event\(s\) republished/);
    await waitUntil("the projection at version 2", async () =>
      (await versionOf(events)) === 2 ? true : undefined,
    );
    const { Attributes } = await env.clients.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
      }),
    );
    expect(
      Number(Attributes?.ApproximateNumberOfMessages) +
        Number(Attributes?.ApproximateNumberOfMessagesNotVisible),
    ).toBe(0);
    env.runtime.resumeStream();
    await env.runtime.idle();
    expect(await versionOf(events)).toBe(2);
    const again = await cli("republish", "--failures");
    expect(again.stdout).toContain("nothing to republish");
  }, 240_000);

  it("republishes the events the relay's own failure record names by their keys", async () => {
    env.runtime.pauseStream();
    const events = taskStream(1, 2);
    await env.store.commit({ append: events });
    const [record] = relayFailureRecords(events, { code: "relay.publish_failed", message: "x" });
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.names.relayFailureQueue,
        MessageBody: JSON.stringify(record),
      }),
    );
    const result = await cli("republish", "--failures");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      "relay failure record (2 event(s)): 2 of 2 event(s) republished",
    );
    await waitUntil("the projection at version 2", async () =>
      (await versionOf(events)) === 2 ? true : undefined,
    );
    env.runtime.resumeStream();
    await env.runtime.idle();
    expect((await cli("republish", "--failures")).stdout).toContain("nothing to republish");
  }, 240_000);
});
