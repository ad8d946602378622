import { describe, expect, it } from "vitest";
import { failureOf } from "../../lib/operator/republish";

describe("relay failure records", () => {
  it("reads the relay's record of keys, the stream event source's of positions, nothing else", () => {
    const keys = [{ pk: "task#t1", version: 2, eventId: "01KB0Q3V9X7T2M4N6P8R0S1W3Y" }];
    const relayed = { relayFailure: { error: { code: "x", message: "y" }, events: keys } };
    expect(failureOf({ Body: JSON.stringify(relayed) })).toEqual({ keys });
    const info = {
      shardId: "shardId-1",
      startSequenceNumber: "100",
      endSequenceNumber: "200",
      streamArn: "arn:aws:dynamodb:us-east-1:1:table/e/stream/x",
      approximateArrivalOfFirstRecord: "2026-11-30T10:00:00.000Z",
    };
    expect(failureOf({ Body: JSON.stringify({ DDBStreamBatchInfo: info }) })).toEqual({
      positions: {
        shardId: "shardId-1",
        startSequenceNumber: "100",
        endSequenceNumber: "200",
        streamArn: info.streamArn,
      },
    });
    const { streamArn: _, ...noArn } = info;
    expect(failureOf({ Body: JSON.stringify({ DDBStreamBatchInfo: noArn }) })).toMatchObject({
      positions: { shardId: "shardId-1" },
    });
    expect(failureOf({ Body: "{}" })).toBeUndefined();
    expect(
      failureOf({ Body: JSON.stringify({ DDBStreamBatchInfo: { shardId: "s" } }) }),
    ).toBeUndefined();
    expect(failureOf({ Body: "not json" })).toBeUndefined();
  });
});
