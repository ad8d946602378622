import {
  ChangeMessageVisibilityBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { type Activity, sleep } from "./activity";

/**
 * Long-poll wait of the emulated SQS pollers. The emulator answers as soon as a message arrives,
 * so a longer wait costs no latency and saves an idle request per poller and second.
 */
export const RECEIVE_WAIT_SECONDS = 5;

/** How often a paused poller looks whether it may receive again. */
const PAUSED_POLL_MS = 100;

export interface ReceiveOptions {
  readonly url: string;
  readonly batchSize: number;
  /** Who failures are reported for (function or pipe). */
  readonly name: string;
  /** While true, nothing is received (fault injection). */
  readonly paused?: () => boolean;
}

/**
 * Receive from a queue until stopped and hand each non-empty batch to `handle`, counting it as
 * in flight meanwhile (what `idle()` waits for). A failed receive is reported and tried again
 * after a pause; what a failed batch left undone comes back after its visibility timeout.
 */
export async function receiveLoop(
  activity: Activity,
  sqs: SQSClient,
  options: ReceiveOptions,
  handle: (messages: Message[]) => Promise<void>,
): Promise<void> {
  const paused = options.paused ?? (() => false);
  while (!activity.stopped) {
    if (paused()) {
      await sleep(PAUSED_POLL_MS);
      continue;
    }
    let messages: Message[] = [];
    try {
      messages = await receive(activity, sqs, options);
    } catch (error) {
      if (activity.stopped) return;
      await activity.failed(options.name, "receive", error);
      continue;
    }
    if (messages.length === 0) continue;
    if (paused()) {
      // Received by a long poll that began before the pause: hand them back untouched.
      await handBack(activity, sqs, options, messages);
      continue;
    }
    await activity.track(async () => {
      try {
        await handle(messages);
      } catch (error) {
        if (!activity.stopped)
          activity.report({
            kind: "invocation-failed",
            function: options.name,
            error: String(error),
          });
      }
    });
  }
}

async function receive(
  activity: Activity,
  sqs: SQSClient,
  { url, batchSize }: ReceiveOptions,
): Promise<Message[]> {
  const received = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: Math.min(batchSize, 10),
      WaitTimeSeconds: RECEIVE_WAIT_SECONDS,
      MessageSystemAttributeNames: ["All"],
      MessageAttributeNames: ["All"],
    }),
    { abortSignal: activity.signal },
  );
  return received.Messages ?? [];
}

/** Make messages visible again at once; should that fail, they come back after their timeout. */
async function handBack(
  activity: Activity,
  sqs: SQSClient,
  { url, name }: ReceiveOptions,
  messages: Message[],
): Promise<void> {
  await sqs
    .send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: url,
        Entries: messages.map((m, i) => ({
          Id: String(i),
          ReceiptHandle: m.ReceiptHandle ?? "",
          VisibilityTimeout: 0,
        })),
      }),
    )
    .catch((error: unknown) =>
      activity.report({
        kind: "invocation-failed",
        function: name,
        error: `ChangeMessageVisibilityBatch: ${String(error)}`,
      }),
    );
}
