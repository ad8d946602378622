import { DeleteMessageBatchCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { LocalPipe } from "../deploy";
import type { Activity } from "./activity";
import { pipeEvent, pipeTargetMessage } from "./pipe-input";
import { receiveLoop } from "./receive";

/**
 * An EventBridge Pipe from an SQS queue to a FIFO queue: each message's body is parsed as JSON
 * (as Pipes does), the group and deduplication ids come from the target parameters' JSON paths,
 * the input template shapes the new body; a message is deleted once it has been sent.
 */
export function runPipe(
  activity: Activity,
  sqs: SQSClient,
  pipe: LocalPipe,
  urls: { readonly source: string; readonly target: string },
): Promise<void> {
  const options = { url: urls.source, batchSize: pipe.batchSize, name: pipe.logicalId };
  return receiveLoop(activity, sqs, options, async (messages) => {
    for (const m of messages) {
      const event = pipeEvent(m);
      try {
        await sqs.send(new SendMessageCommand(pipeTargetMessage(pipe, event, urls.target)));
        await sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: urls.source,
            Entries: [{ Id: "0", ReceiptHandle: m.ReceiptHandle }],
          }),
        );
      } catch (error) {
        // Left on the source queue: redelivered after its visibility timeout, then to its DLQ.
        activity.report({
          kind: "invocation-failed",
          function: pipe.logicalId,
          error: String(error),
        });
      }
    }
    activity.report({ kind: "piped", pipe: pipe.logicalId, messages: messages.length });
  });
}
