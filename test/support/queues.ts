import {
  CreateEventBusCommand,
  DeleteEventBusCommand,
  DeleteRuleCommand,
  type EventBridgeClient,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";

/** Create a queue (`.fifo` appended for FIFO) and return its URL. */
export async function createQueue(sqs: SQSClient, name: string, fifo = false): Promise<string> {
  const { QueueUrl } = await sqs.send(
    new CreateQueueCommand({
      QueueName: fifo ? `${name}.fifo` : name,
      ...(fifo ? { Attributes: { FifoQueue: "true" } } : {}),
    }),
  );
  if (!QueueUrl) throw new Error(`no URL for queue ${name}`);
  return QueueUrl;
}

/**
 * Receive until two rounds come back empty; with `remove`, delete what was received (on FIFO a
 * group's next message only shows once the one before it is deleted).
 */
export async function drainQueue(sqs: SQSClient, url: string, remove = true): Promise<Message[]> {
  const out: Message[] = [];
  for (let empty = 0; empty < 2; ) {
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["MessageGroupId", "MessageDeduplicationId"],
      }),
    );
    if (!Messages || Messages.length === 0) {
      empty++;
      continue;
    }
    for (const m of Messages) {
      out.push(m);
      if (remove)
        await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
    }
  }
  return out;
}

/** A bus whose rule (matching `pattern`) delivers to a standard queue; `remove` deletes all three. */
export async function busToQueue(
  eventbridge: EventBridgeClient,
  sqs: SQSClient,
  names: { bus: string; rule: string; queue: string },
  pattern: object,
): Promise<{ queueUrl: string; remove: () => Promise<void> }> {
  await eventbridge.send(new CreateEventBusCommand({ Name: names.bus }));
  const queueUrl = await createQueue(sqs, names.queue);
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  await eventbridge.send(
    new PutRuleCommand({
      Name: names.rule,
      EventBusName: names.bus,
      EventPattern: JSON.stringify(pattern),
    }),
  );
  await eventbridge.send(
    new PutTargetsCommand({
      Rule: names.rule,
      EventBusName: names.bus,
      Targets: [{ Id: "target", Arn: Attributes?.QueueArn }],
    }),
  );
  return {
    queueUrl,
    remove: async () => {
      await eventbridge.send(
        new RemoveTargetsCommand({ Rule: names.rule, EventBusName: names.bus, Ids: ["target"] }),
      );
      await eventbridge.send(new DeleteRuleCommand({ Name: names.rule, EventBusName: names.bus }));
      await eventbridge.send(new DeleteEventBusCommand({ Name: names.bus }));
      await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
    },
  };
}
