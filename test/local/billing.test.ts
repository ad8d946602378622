import { describe, expect, it } from "vitest";
import { billedCall, chunksOf } from "../../lib/dev/metering/billing";

/** What one SDK call is billed as (SQS and EventBridge per 64 KB chunk), in memory. */

const url = "http://127.0.0.1:5000/123456789012/group.fifo";
const kb = (n: number) => "x".repeat(n * 1024);

describe("billedCall", () => {
  it("bills a send batch per 64 KB chunk of its summed payloads and counts what it put on the queue", () => {
    const entries = [1, 2, 3].map((i) => ({ Id: String(i), MessageBody: kb(30) }));
    const billed = billedCall(
      "SendMessageBatch",
      { QueueUrl: url, Entries: entries },
      { Failed: [{ Id: "3" }] },
    );
    // 90 KB: two chunks; two of the three messages were accepted.
    expect(billed).toEqual({
      requests: 2,
      queueUrl: url,
      sent: 2,
      firstReceived: 0,
      emptyReceive: false,
    });
    expect(billedCall("SendMessage", { QueueUrl: url, MessageBody: "a" }, {}).requests).toBe(1);
  });

  it("bills an empty receive as one request, and counts first receives apart from redeliveries", () => {
    expect(billedCall("ReceiveMessage", { QueueUrl: url }, {})).toMatchObject({
      requests: 1,
      emptyReceive: true,
      firstReceived: 0,
    });
    const messages = [
      { Body: kb(40), Attributes: { ApproximateReceiveCount: "1" } },
      { Body: kb(40), Attributes: { ApproximateReceiveCount: "2" } },
    ];
    expect(billedCall("ReceiveMessage", { QueueUrl: url }, { Messages: messages })).toMatchObject({
      requests: 2,
      emptyReceive: false,
      firstReceived: 1,
    });
    expect(
      billedCall("DeleteMessageBatch", { QueueUrl: url, Entries: [{}, {}] }, {}).requests,
    ).toBe(1);
  });

  it("bills PutEvents per 64 KB chunk of each entry", () => {
    const entries = [
      { Source: "s", DetailType: "t", Detail: "{}" },
      { Source: "s", DetailType: "t", Detail: kb(70) },
    ];
    expect(billedCall("PutEvents", { Entries: entries }, {}).requests).toBe(1 + 2);
  });

  it("bills any other call once", () => {
    expect(billedCall("GenerateDataKey", { KeyId: "k" }, {}).requests).toBe(1);
    expect(chunksOf(0)).toBe(1);
    expect(chunksOf(64 * 1024)).toBe(1);
    expect(chunksOf(64 * 1024 + 1)).toBe(2);
  });
});
