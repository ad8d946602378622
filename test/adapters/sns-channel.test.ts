import {
  AuthorizationErrorException,
  CreateTopicCommand,
  DeleteTopicCommand,
  InternalErrorException,
  InvalidParameterException,
  NotFoundException,
  SNSClient,
  SubscribeCommand,
  ThrottledException,
} from "@aws-sdk/client-sns";
import { GetQueueAttributesCommand, SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { TransientError } from "../../functions/core/errors";
import {
  ChannelRejectedError,
  type ChannelSendRequest,
  ChannelTimeoutError,
} from "../../functions/roles/customer-support/integrations/reply-channel/port";
import {
  deduplicationId,
  SNS_DEDUP_WINDOW_SECONDS,
  SnsChannel,
} from "../../functions/roles/customer-support/integrations/reply-channel/sns";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newTaskId, newUlid } from "../support/factories";
import { createQueue, drainQueue } from "../support/queues";

const suffix = newUlid().toLowerCase();
let sns: SNSClient;
let sqs: SQSClient;
let topicArn: string;
let queueUrl: string;

beforeAll(async () => {
  sns = new SNSClient(emulator());
  sqs = new SQSClient(emulator());
  const topic = await sns.send(
    new CreateTopicCommand({
      Name: `agentbus-replies-${suffix}.fifo`,
      Attributes: { FifoTopic: "true" },
    }),
  );
  if (!topic.TopicArn) throw new Error("no topic ARN");
  topicArn = topic.TopicArn;
  queueUrl = await createQueue(sqs, `agentbus-replies-${suffix}`, true);
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  await sns.send(
    new SubscribeCommand({
      TopicArn: topicArn,
      Protocol: "sqs",
      Endpoint: Attributes?.QueueArn,
      Attributes: { RawMessageDelivery: "true" },
    }),
  );
});

afterAll(async () => {
  await sns.send(new DeleteTopicCommand({ TopicArn: topicArn })).catch(() => undefined);
  sns.destroy();
  sqs.destroy();
});

function request(overrides: Partial<ChannelSendRequest> = {}): ChannelSendRequest {
  return {
    key: `${newTaskId()}:reply:1`,
    recipient: "cust_alice",
    conversationId: `conv_${newUlid()}`,
    text: "Your order has shipped.",
    ...overrides,
  };
}

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

/** A client whose every call fails with `error`. */
function failing(error: unknown) {
  return new SnsChannel({
    topicArn: "arn:aws:sns:us-east-1:000000000000:t.fifo",
    client: {
      send: async () => {
        throw error;
      },
    } as unknown as AwsClient,
  });
}

const meta = { $metadata: {} };

describe("SnsChannel", () => {
  it("publishes with the key's hash as deduplication id and the conversation as group", async () => {
    const channel = new SnsChannel({ client: fromSdk(sns), topicArn });
    const sent = request();
    const { deliveryId } = await channel.send(sent);
    expect(deliveryId).toMatch(/\S+/);

    const messages = await drainQueue(sqs, queueUrl);
    expect(messages).toHaveLength(1);
    const [message] = messages;
    expect(message?.Attributes?.MessageGroupId).toBe(sent.conversationId);
    expect(message?.Attributes?.MessageDeduplicationId).toBe(deduplicationId(sent.key));
    expect(message?.MessageAttributes?.idempotency_key?.StringValue).toBe(sent.key);
    expect(message?.MessageAttributes?.recipient?.StringValue).toBe("cust_alice");
    expect(JSON.parse(message?.Body ?? "{}")).toEqual({
      idempotency_key: sent.key,
      recipient: "cust_alice",
      conversation_id: sent.conversationId,
      text: "Your order has shipped.",
    });
  });

  it("sends a resend of the same key with the same deduplication id, so it is dropped", async () => {
    const channel = new SnsChannel({ client: fromSdk(sns), topicArn });
    const sent = request();
    await channel.send(sent);
    await channel.send(sent);
    await channel.send(request({ conversationId: sent.conversationId }));
    const messages = await drainQueue(sqs, queueUrl);
    expect(
      messages.filter((m) => m.MessageAttributes?.idempotency_key?.StringValue === sent.key),
    ).toHaveLength(1);
    expect(messages).toHaveLength(2);
  });

  it("keeps deduplication ids within SNS limits for long keys", () => {
    const id = deduplicationId(`${"task_".padEnd(70, "A")}:reply:12`);
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    expect(deduplicationId("task_a:reply:1")).not.toBe(deduplicationId("task_a:reply:2"));
  });

  it("cannot look a message up, and says how long a resend is deduplicated", async () => {
    const channel = new SnsChannel({ client: fromSdk(sns), topicArn });
    expect(await channel.query("task_a:reply:1")).toEqual({ status: "unknown" });
    expect(channel.dedupWindowSeconds).toBe(SNS_DEDUP_WINDOW_SECONDS);
    expect(channel.resendSafeWithinSeconds).toBeLessThan(SNS_DEDUP_WINDOW_SECONDS);
    expect(channel.resendSafeWithinSeconds).toBeGreaterThan(0);
  });

  it("maps publishing to a topic that does not exist to ChannelRejectedError", async () => {
    const channel = new SnsChannel({
      client: fromSdk(sns),
      topicArn: topicArn.replace(suffix, `${suffix}-absent`),
    });
    const error = await failureOf(channel.send(request()));
    expect(error).toBeInstanceOf(ChannelRejectedError);
    expect((error as ChannelRejectedError).errorClass).toBe("permanent");
  });

  it.each([
    ["an SDK timeout", Object.assign(new Error("timed out"), { name: "TimeoutError" })],
    ["an abort", Object.assign(new Error("aborted"), { name: "AbortError" })],
    ["a socket timeout", Object.assign(new Error("socket"), { code: "ETIMEDOUT" })],
    ["a dropped connection", Object.assign(new Error("reset"), { code: "ECONNRESET" })],
  ])("maps %s to ChannelTimeoutError (outcome unknown)", async (_, thrown) => {
    const error = await failureOf(failing(thrown).send(request()));
    expect(error).toBeInstanceOf(ChannelTimeoutError);
    expect((error as ChannelTimeoutError).errorClass).toBe("unknown_outcome");
  });

  it.each([
    ["InvalidParameter", new InvalidParameterException({ message: "bad", ...meta })],
    ["NotFound", new NotFoundException({ message: "no topic", ...meta })],
    ["AuthorizationError", new AuthorizationErrorException({ message: "denied", ...meta })],
  ])("maps %s to ChannelRejectedError", async (_, thrown) => {
    const error = await failureOf(failing(thrown).send(request()));
    expect(error).toBeInstanceOf(ChannelRejectedError);
    expect((error as ChannelRejectedError).reason).toMatch(/^[a-z_]+$/);
  });

  it.each([
    ["throttling", new ThrottledException({ message: "slow", ...meta }), "channel.throttled"],
    [
      "a server error",
      new InternalErrorException({ message: "oops", ...meta }),
      "channel.unavailable",
    ],
    [
      "a refused connection",
      Object.assign(new Error("refused"), { code: "ECONNREFUSED" }),
      "channel.unavailable",
    ],
  ])("maps %s to TransientError", async (_, thrown, code) => {
    const error = await failureOf(failing(thrown).send(request()));
    expect(error).toBeInstanceOf(TransientError);
    expect(error).not.toBeInstanceOf(ChannelTimeoutError);
    expect((error as TransientError).code).toBe(code);
  });
});
