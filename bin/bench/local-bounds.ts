import { PutItemCommand, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from "@aws-sdk/client-dynamodb-streams";
import {
  CreateEventBusCommand,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { type AwsClients, emulatorClients } from "../../lib/dev/local/deploy";
import { createStreamTable } from "../../test/support/tables";
import { percentiles } from "./local-probe";

/**
 * The emulator's own bound for each hop of the local path, measured with fresh clients (their own
 * sockets) on an emulator endpoint: what one hop would cost if the runtime added nothing.
 */
export interface Bounds {
  /** From a FIFO SendMessage's response until a long poll already waiting returns the message. */
  readonly fifo: Latency;
  /** PutEvents until a long poll on the rule's SQS target returns the event. */
  readonly putEvents: Latency;
  /** PutItem on a streamed table until GetRecords (polled back to back) returns the record. */
  readonly stream: Latency;
  /** One TransactWriteItems of three items (a consumer's commit). */
  readonly transact: Latency;
  /** One SendMessage call to a FIFO queue. */
  readonly send: Latency;
  /** From a FIFO SendMessage's call until a long poll already waiting returns the message. */
  readonly sendToReceive: Latency;
}

export type Latency = ReturnType<typeof percentiles>;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function measureBounds(endpoint: string, samples: number): Promise<Bounds> {
  const clients = emulatorClients(endpoint);
  const streams = new DynamoDBStreamsClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  });
  try {
    const tag = ulid().toLowerCase().slice(-8);
    const queue = await createQueue(clients, `bench-bound-${tag}.fifo`, true);
    const target = await createQueue(clients, `bench-bound-${tag}`, false);
    const bus = await ruleToQueue(clients, `bench-bound-${tag}`, target);
    const name = `bench-bound-${tag}`;
    const table = { name, streamArn: await createStreamTable(clients.dynamodb, name) };
    const fifo: number[] = [];
    const send: number[] = [];
    const sendToReceive: number[] = [];
    const putEvents: number[] = [];
    const stream: number[] = [];
    const transact: number[] = [];
    for (let i = 0; i < samples; i++) {
      const [wake, call] = await parkedReceive(clients, queue.url, () =>
        clients.sqs.send(
          new SendMessageCommand({
            QueueUrl: queue.url,
            MessageBody: `m${i}`,
            MessageGroupId: `g${i % 5}`,
          }),
        ),
      );
      fifo.push(wake - call);
      send.push(call);
      sendToReceive.push(wake);
      putEvents.push(
        (await parkedReceive(clients, target.url, () => putBound(clients, bus, i)))[0],
      );
      stream.push(await putUntilStreamed(clients, streams, table, i));
      transact.push(await transactThree(clients, table.name, i));
    }
    return {
      fifo: percentiles(fifo),
      send: percentiles(send),
      sendToReceive: percentiles(sendToReceive),
      putEvents: percentiles(putEvents),
      stream: percentiles(stream),
      transact: percentiles(transact),
    };
  } finally {
    streams.destroy();
    for (const c of [clients.dynamodb, clients.sqs, clients.eventbridge, clients.sns]) c?.destroy();
  }
}

/** GetQueueAttributes on one queue, `samples` times in a row, through the given client. */
export async function pingQueue(sqs: SQSClient, url: string, samples: number): Promise<Latency> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ["ApproximateNumberOfMessages"],
      }),
    );
    times.push(performance.now() - started);
  }
  return percentiles(times);
}

async function createQueue(clients: AwsClients, name: string, fifo: boolean) {
  const { QueueUrl = "" } = await clients.sqs.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: fifo ? { FifoQueue: "true", ContentBasedDeduplication: "true" } : {},
    }),
  );
  const { Attributes = {} } = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }),
  );
  return { url: QueueUrl, arn: Attributes.QueueArn ?? "" };
}

async function ruleToQueue(clients: AwsClients, name: string, target: { arn: string }) {
  await clients.eventbridge.send(new CreateEventBusCommand({ Name: name }));
  await clients.eventbridge.send(
    new PutRuleCommand({
      Name: name,
      EventBusName: name,
      EventPattern: JSON.stringify({ source: ["bench.bound"] }),
    }),
  );
  await clients.eventbridge.send(
    new PutTargetsCommand({
      Rule: name,
      EventBusName: name,
      Targets: [{ Id: "q", Arn: target.arn }],
    }),
  );
  return name;
}

function putBound(clients: AwsClients, bus: string, i: number) {
  return clients.eventbridge.send(
    new PutEventsCommand({
      Entries: [
        { EventBusName: bus, Source: "bench.bound", DetailType: "bound", Detail: `{"i":${i}}` },
      ],
    }),
  );
}

/**
 * Start a long poll, give it time to park in the emulator, then `act`: returns how long after
 * `act` began the poll returned with a message, and how long `act` itself took.
 */
async function parkedReceive(
  clients: AwsClients,
  url: string,
  act: () => Promise<unknown>,
): Promise<[number, number]> {
  const poll = clients.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5, MaxNumberOfMessages: 1 }),
  );
  await sleep(60);
  const started = performance.now();
  await act();
  const acted = performance.now() - started;
  let { Messages = [] } = await poll;
  // A slow emulator may answer after the parked poll has ended: poll on (the sample counts it).
  for (let polls = 1; Messages.length === 0 && polls < 6; polls++)
    ({ Messages = [] } = await clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5, MaxNumberOfMessages: 1 }),
    ));
  const woke = performance.now() - started;
  for (const m of Messages)
    await clients.sqs.send(
      new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }),
    );
  if (Messages.length === 0) throw new Error(`no message arrived on ${url} within 30 s`);
  return [woke, acted];
}

async function putUntilStreamed(
  clients: AwsClients,
  streams: DynamoDBStreamsClient,
  table: { name: string; streamArn: string },
  i: number,
): Promise<number> {
  const { StreamDescription } = await streams.send(
    new DescribeStreamCommand({ StreamArn: table.streamArn }),
  );
  const shardId = StreamDescription?.Shards?.at(-1)?.ShardId;
  let { ShardIterator: iterator } = await streams.send(
    new GetShardIteratorCommand({
      StreamArn: table.streamArn,
      ShardId: shardId,
      ShardIteratorType: "LATEST",
    }),
  );
  const started = performance.now();
  await clients.dynamodb.send(
    new PutItemCommand({ TableName: table.name, Item: { pk: { S: `put-${i}` } } }),
  );
  for (let tries = 0; tries < 1000 && iterator; tries++) {
    const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
    if (page.Records?.length) return performance.now() - started;
    iterator = page.NextShardIterator;
  }
  throw new Error("the stream never showed the put");
}

async function transactThree(clients: AwsClients, table: string, i: number): Promise<number> {
  const started = performance.now();
  await clients.dynamodb.send(
    new TransactWriteItemsCommand({
      TransactItems: ["a", "b", "c"].map((k) => ({
        Put: {
          TableName: table,
          Item: { pk: { S: `tx-${i}-${k}` } },
          ConditionExpression: "attribute_not_exists(pk)",
        },
      })),
    }),
  );
  return performance.now() - started;
}
