import { setMaxListeners } from "node:events";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type ShardIteratorType,
  type _Record as StreamRecord,
} from "@aws-sdk/client-dynamodb-streams";
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";
import type { DynamoDBRecord, SQSEvent, SQSRecord } from "aws-lambda";
import type { ConsumeResult } from "../../functions/core/pipeline";
import type { ConsumerFailure, ConsumerObserver } from "../../functions/handlers/consumer";
import type {
  AwsClients,
  LocalDeployment,
  LocalFunction,
  LocalMapping,
  LocalPipe,
  LocalSchedule,
} from "./deploy";

/** What the runtime reports while it runs (the local trace is built from these). */
export type RuntimeEvent =
  | { readonly kind: "consumed"; readonly group: string; readonly result: ConsumeResult }
  | { readonly kind: "consume-failed"; readonly group: string; readonly failure: ConsumerFailure }
  | { readonly kind: "dispatched"; readonly group: string; readonly report: unknown }
  | { readonly kind: "relayed"; readonly report: unknown }
  | { readonly kind: "swept"; readonly function: string; readonly report: unknown }
  | { readonly kind: "invocation-failed"; readonly function: string; readonly error: string }
  | { readonly kind: "stream-batch-dropped"; readonly function: string; readonly records: number }
  | { readonly kind: "piped"; readonly pipe: string; readonly messages: number }
  | { readonly kind: "fault"; readonly description: string };

type Invoke = (event: unknown) => Promise<unknown>;

export interface RuntimeOptions {
  readonly deployment: LocalDeployment;
  readonly clients: AwsClients;
  readonly endpoint: string;
  /** Repository root that `agentbus:entry` paths are relative to. */
  readonly root: string;
  /** Environment values that differ locally (e.g. a shorter retry backoff). */
  readonly envOverrides?: Record<string, string>;
  readonly onEvent?: (event: RuntimeEvent) => void;
  /**
   * How often scheduled functions (EventBridge schedule rules) run locally, in milliseconds,
   * whatever their rate in the template. @default 2000
   */
  readonly scheduleIntervalMs?: number;
  /**
   * Stand-ins handed to every handler's `create(options)` (e.g. `model`, `channel`): what the
   * deployed functions build from their environment, the local runtime shares across handlers so
   * it can observe them.
   */
  readonly services?: Readonly<Record<string, unknown>>;
}

/** Default local interval of scheduled functions (the deployed sweeper runs every minute). */
export const DEFAULT_SCHEDULE_INTERVAL_MS = 2000;

/**
 * Long-poll wait of the emulated SQS pollers. The emulator answers as soon as a message arrives,
 * so a longer wait costs no latency and saves an idle request per poller and second.
 */
const RECEIVE_WAIT_SECONDS = 5;

/**
 * Pause of a loop after a failed call to the emulator before it tries again: every loop reports a
 * failure and carries on (one that ended would leave its queue or stream unread for good).
 */
const RETRY_AFTER_FAILURE_MS = 500;

/** One signal for every long poll of the runtime (dozens listen at once). */
function abortOnStop(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Runs the stack's Lambda handlers in-process and emulates their event source mappings:
 * - SQS: receive up to BatchSize messages, invoke, delete what succeeded; with
 *   ReportBatchItemFailures only the reported items stay (an unknown item id fails the whole
 *   batch, as on AWS); a thrown error leaves the whole batch for redelivery after its visibility
 *   timeout; MaximumConcurrency pollers per queue; FIFO group order and DLQ redrive are the
 *   queue's own (the emulator implements them).
 * - DynamoDB stream: read each shard in order from its starting position, apply the mapping's
 *   filter, invoke with BatchSize records; on error retry up to MaximumRetryAttempts, bisecting
 *   the batch when BisectBatchOnFunctionError is set, then send the batch's description to the
 *   on-failure destination and move on.
 * - EventBridge schedule rules: each target function is invoked every `scheduleIntervalMs`
 *   (one invocation at a time), with a scheduled-event payload.
 */
export class LocalRuntime {
  private stopped = false;
  private readonly stopping = abortOnStop();
  private streamPaused = false;
  private inflight = 0;
  private lastActivity = Date.now();
  private streamBehind = new Set<string>();
  private readonly loops: Promise<void>[] = [];
  private readonly lostAcks = new Set<string>();
  private readonly pausedGroups = new Set<string>();
  private readonly invokers = new Map<string, Invoke>();
  private readonly streams: DynamoDBStreamsClient;

  constructor(private readonly options: RuntimeOptions) {
    this.streams = new DynamoDBStreamsClient({
      endpoint: options.endpoint,
      region: options.deployment.region,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
  }

  async start(): Promise<void> {
    for (const fn of this.options.deployment.functions)
      this.invokers.set(fn.logicalId, await this.load(fn));
    for (const mapping of this.options.deployment.mappings) {
      const invoke = this.invokers.get(mapping.functionLogicalId);
      const fn = this.options.deployment.functions.find(
        (f) => f.logicalId === mapping.functionLogicalId,
      );
      if (!invoke || !fn)
        throw new Error(
          `mapping ${mapping.logicalId} points at an unknown function ${mapping.functionLogicalId}`,
        );
      if (mapping.source === "sqs") {
        const pollers = Math.max(1, Math.min(mapping.maximumConcurrency ?? 2, 4));
        for (let i = 0; i < pollers; i++)
          this.loops.push(this.reportEnd(fn.name, this.pollQueue(mapping, fn, invoke)));
      } else {
        this.loops.push(this.reportEnd(fn.name, this.pollStream(mapping, fn, invoke)));
      }
    }
    for (const pipe of this.options.deployment.pipes)
      this.loops.push(this.reportEnd(pipe.logicalId, this.runPipe(pipe)));
    for (const schedule of this.options.deployment.schedules ?? [])
      for (const logicalId of schedule.functionLogicalIds)
        this.loops.push(this.reportEnd(logicalId, this.runSchedule(schedule, logicalId)));
  }

  /**
   * Each loop reports its failures and carries on until stopped; should one still end with an
   * error, that is reported too instead of going unnoticed until `stop()`.
   */
  private reportEnd(name: string, loop: Promise<void>): Promise<void> {
    return loop.catch((error: unknown) => {
      this.report({
        kind: "invocation-failed",
        function: name,
        error: `stopped polling: ${String(error)}`,
      });
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // Long polls in progress end now instead of after their wait time.
    this.stopping.abort();
    await Promise.allSettled(this.loops);
    this.streams.destroy();
  }

  /** Hold the relay (stream reading) back, e.g. to deliver an event ahead of its predecessors. */
  pauseStream(): void {
    this.streamPaused = true;
  }

  resumeStream(): void {
    this.streamPaused = false;
  }

  /**
   * Fault injection: the next time this consumer group's function handles the event successfully,
   * its acknowledgement is lost (the message becomes visible again at once, as after a crash).
   */
  loseAckOnce(eventId: string, group: string): void {
    this.lostAcks.add(`${group}#${eventId}`);
  }

  /**
   * Fault injection: this consumer group's function stops receiving (as if its workers were
   * gone) from its next receive on; its messages wait in the queue until `resumeGroup`.
   */
  pauseGroup(group: string): void {
    this.pausedGroups.add(group);
    this.report({ kind: "fault", description: `paused consumer group ${group}` });
  }

  resumeGroup(group: string): void {
    this.pausedGroups.delete(group);
  }

  /** Wait until nothing is in flight, every mapped queue is empty and the stream is read up. */
  async idle(options: { quietMs?: number; timeoutMs?: number } = {}): Promise<void> {
    const quietMs = options.quietMs ?? 1500;
    const deadline = Date.now() + (options.timeoutMs ?? 120_000);
    const queues = this.options.deployment.mappings
      .filter((m) => m.source === "sqs")
      .map((m) => this.queueUrl(m.eventSourceArn));
    for (;;) {
      if (Date.now() > deadline) throw new Error("the local runtime did not settle in time");
      const quiet =
        this.inflight === 0 &&
        this.streamBehind.size === 0 &&
        Date.now() - this.lastActivity > quietMs;
      if (quiet && (await this.queuesEmpty(queues))) return;
      await sleep(200);
    }
  }

  private async queuesEmpty(urls: string[]): Promise<boolean> {
    for (const url of urls) {
      const { Attributes = {} } = await this.options.clients.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
          ],
        }),
      );
      const total =
        Number(Attributes.ApproximateNumberOfMessages ?? 0) +
        Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0) +
        Number(Attributes.ApproximateNumberOfMessagesDelayed ?? 0);
      if (total > 0) return false;
    }
    return true;
  }

  private async load(fn: LocalFunction): Promise<Invoke> {
    const module = (await import(pathToFileURL(join(this.options.root, fn.entry)).href)) as {
      create?: (options: Record<string, unknown>) => Invoke;
    };
    if (typeof module.create !== "function")
      throw new Error(`${fn.entry} does not export create(options)`);
    const group = fn.group ?? fn.name;
    const report = this.options.onEvent ?? (() => {});
    return module.create({
      ...this.options.services,
      env: { ...fn.environment, ...this.options.envOverrides },
      dynamodb: this.options.clients.dynamodb,
      sqs: this.options.clients.sqs,
      eventbridge: this.options.clients.eventbridge,
      observer: {
        consumed: (result: ConsumeResult) => report({ kind: "consumed", group, result }),
        failed: (failure: ConsumerFailure) => report({ kind: "consume-failed", group, failure }),
      } satisfies ConsumerObserver,
      onReport: (r: unknown) =>
        report(
          fn.kind === "relay"
            ? { kind: "relayed", report: r }
            : fn.kind === "sweeper"
              ? { kind: "swept", function: fn.name, report: r }
              : { kind: "dispatched", group, report: r },
        ),
    });
  }

  private queueUrl(arn: string): string {
    for (const r of this.options.deployment.resources.values())
      if (r.attributes.Arn === arn && r.type === "AWS::SQS::Queue") return r.ref;
    throw new Error(`no queue deployed with ARN ${arn}`);
  }

  /**
   * Receive from a queue until stopped and hand each non-empty batch to `handle`, counting it as
   * in flight meanwhile (what `idle()` waits for).
   */
  private async receiveLoop(
    url: string,
    batchSize: number,
    name: string,
    handle: (messages: Message[]) => Promise<void>,
    paused: () => boolean = () => false,
  ): Promise<void> {
    const { sqs } = this.options.clients;
    while (!this.stopped) {
      if (paused()) {
        await sleep(100);
        continue;
      }
      let messages: Message[] = [];
      try {
        const received = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: url,
            MaxNumberOfMessages: Math.min(batchSize, 10),
            WaitTimeSeconds: RECEIVE_WAIT_SECONDS,
            MessageSystemAttributeNames: ["All"],
            MessageAttributeNames: ["All"],
          }),
          { abortSignal: this.stopping.signal },
        );
        messages = received.Messages ?? [];
      } catch (error) {
        if (this.stopped) return;
        this.report({
          kind: "invocation-failed",
          function: name,
          error: `receive: ${String(error)}`,
        });
        await sleep(RETRY_AFTER_FAILURE_MS);
        continue;
      }
      if (messages.length === 0) continue;
      if (paused()) {
        // Received by a long poll that began before the pause: hand them back untouched.
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
            // They come back after their visibility timeout instead.
            this.report({
              kind: "invocation-failed",
              function: name,
              error: `ChangeMessageVisibilityBatch: ${String(error)}`,
            }),
          );
        continue;
      }
      this.inflight++;
      this.lastActivity = Date.now();
      try {
        await handle(messages);
      } catch (error) {
        // What the batch left undone comes back after its messages' visibility timeout.
        if (!this.stopped)
          this.report({ kind: "invocation-failed", function: name, error: String(error) });
      } finally {
        this.inflight--;
        this.lastActivity = Date.now();
      }
    }
  }

  private pollQueue(mapping: LocalMapping, fn: LocalFunction, invoke: Invoke): Promise<void> {
    const { sqs } = this.options.clients;
    const url = this.queueUrl(mapping.eventSourceArn);
    return this.receiveLoop(
      url,
      mapping.batchSize,
      fn.name,
      async (messages) => {
        const event: SQSEvent = {
          Records: messages.map((m) =>
            toSqsRecord(m, mapping.eventSourceArn, this.options.deployment.region),
          ),
        };
        const ids = new Set(messages.map((m) => m.MessageId ?? ""));
        let failed: Set<string>;
        try {
          const response = (await invoke(event)) as
            | { batchItemFailures?: { itemIdentifier?: string }[] }
            | undefined;
          failed = new Set();
          if (mapping.reportBatchItemFailures && Array.isArray(response?.batchItemFailures)) {
            for (const f of response.batchItemFailures) {
              if (!f.itemIdentifier || !ids.has(f.itemIdentifier)) {
                failed = new Set(ids); // an invalid item id fails the whole batch
                break;
              }
              failed.add(f.itemIdentifier);
            }
          }
        } catch (error) {
          this.report({ kind: "invocation-failed", function: fn.name, error: String(error) });
          failed = new Set(ids);
        }
        const done = messages.filter((m) => !failed.has(m.MessageId ?? ""));
        const acked: Message[] = [];
        for (const m of done) {
          const eventId = eventIdOf(m.Body);
          if (eventId && fn.kind === "consumer" && this.lostAcks.delete(`${fn.group}#${eventId}`)) {
            this.report({
              kind: "fault",
              description: `lost the acknowledgement of ${eventId} (${fn.name}): it will be delivered again`,
            });
            await sqs
              .send(
                new ChangeMessageVisibilityCommand({
                  QueueUrl: url,
                  ReceiptHandle: m.ReceiptHandle,
                  VisibilityTimeout: 0,
                }),
              )
              .catch((error: unknown) =>
                // Delivered again all the same, after its visibility timeout.
                this.report({
                  kind: "invocation-failed",
                  function: fn.name,
                  error: `ChangeMessageVisibility: ${String(error)}`,
                }),
              );
          } else acked.push(m);
        }
        if (acked.length === 0) return;
        // A message not deleted is delivered again after its visibility timeout (a duplicate the
        // consumer recognises): reported, and the poller goes on.
        try {
          const { Failed = [] } = await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: url,
              Entries: acked.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
            }),
          );
          if (Failed.length > 0)
            this.report({
              kind: "invocation-failed",
              function: fn.name,
              error: `DeleteMessageBatch: ${Failed.length} of ${acked.length} not deleted (${Failed[0]?.Code}: ${Failed[0]?.Message})`,
            });
        } catch (error) {
          this.report({
            kind: "invocation-failed",
            function: fn.name,
            error: `DeleteMessageBatch: ${String(error)}`,
          });
        }
      },
      () => fn.kind === "consumer" && this.pausedGroups.has(fn.group ?? fn.name),
    );
  }

  /** Invoke a scheduled function every `scheduleIntervalMs` until stopped. */
  private async runSchedule(schedule: LocalSchedule, logicalId: string): Promise<void> {
    const invoke = this.invokers.get(logicalId);
    const fn = this.options.deployment.functions.find((f) => f.logicalId === logicalId);
    if (!invoke || !fn)
      throw new Error(`schedule ${schedule.logicalId} targets an unknown function ${logicalId}`);
    const interval = this.options.scheduleIntervalMs ?? DEFAULT_SCHEDULE_INTERVAL_MS;
    while (!this.stopped) {
      await sleep(interval);
      if (this.stopped) return;
      try {
        const report = (await invoke({
          version: "0",
          id: `local-${Date.now()}`,
          "detail-type": "Scheduled Event",
          source: "aws.events",
          account: this.options.deployment.accountId,
          time: new Date().toISOString(),
          region: this.options.deployment.region,
          resources: [schedule.logicalId],
          detail: {},
        })) as { published?: number } | undefined;
        if (report?.published) this.lastActivity = Date.now();
      } catch (error) {
        if (this.stopped) return;
        this.report({ kind: "invocation-failed", function: fn.name, error: String(error) });
      }
    }
  }

  /**
   * Read every shard of the mapping's stream until stopped. A failed call is reported and tried
   * again after a pause; a shard whose iterator failed (expired, unknown to a restarted
   * emulator...) is read on from the last record seen (AFTER_SEQUENCE_NUMBER), or from the
   * mapping's starting position if none was.
   */
  private async pollStream(
    mapping: LocalMapping,
    fn: LocalFunction,
    invoke: Invoke,
  ): Promise<void> {
    const streamArn = mapping.eventSourceArn;
    const startingPosition: ShardIteratorType =
      mapping.startingPosition === "LATEST" ? "LATEST" : "TRIM_HORIZON";
    const failed = async (call: string, error: unknown) => {
      this.report({
        kind: "invocation-failed",
        function: fn.name,
        error: `${call}: ${String(error)}`,
      });
      await sleep(RETRY_AFTER_FAILURE_MS);
    };
    const open = async (shardId: string, position: ShardPosition) => {
      const { ShardIterator } = await this.streams.send(
        new GetShardIteratorCommand({
          StreamArn: streamArn,
          ShardId: shardId,
          ...(position.after
            ? { ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: position.after }
            : { ShardIteratorType: startingPosition }),
        }),
      );
      position.iterator = ShardIterator;
    };
    const shards = new Map<string, ShardPosition>();
    while (!this.stopped) {
      try {
        const description = await this.streams.send(
          new DescribeStreamCommand({ StreamArn: streamArn }),
        );
        for (const shard of description.StreamDescription?.Shards ?? [])
          if (shard.ShardId && !shards.has(shard.ShardId)) shards.set(shard.ShardId, {});
        break;
      } catch (error) {
        if (this.stopped) return;
        await failed("DescribeStream", error);
      }
    }
    // Opened at once, so that LATEST means the moment the runtime started (one that cannot be
    // opened now is opened, or its failure reported, in the loop below).
    for (const [shardId, position] of shards) await open(shardId, position).catch(() => undefined);
    while (!this.stopped) {
      if (this.streamPaused) {
        await sleep(100);
        continue;
      }
      let any = false;
      for (const [shardId, position] of shards) {
        if (position.closed) continue;
        let call = "GetShardIterator";
        try {
          if (!position.iterator) await open(shardId, position);
          call = "GetRecords";
          const page = await this.streams.send(
            new GetRecordsCommand({
              ShardIterator: position.iterator,
              Limit: Math.min(mapping.batchSize, 1000),
            }),
          );
          position.iterator = page.NextShardIterator;
          position.closed = !page.NextShardIterator;
          const records = (page.Records ?? []).map((r) =>
            toStreamRecord(r, streamArn, this.options.deployment.region),
          );
          if (records.length === 0) {
            this.streamBehind.delete(shardId);
            continue;
          }
          any = true;
          this.streamBehind.add(shardId);
          const selected = records.filter(
            (r) => mapping.filters.length === 0 || mapping.filters.some((p) => matches(r, p)),
          );
          this.inflight++;
          this.lastActivity = Date.now();
          try {
            if (selected.length > 0)
              await this.invokeStreamBatch(
                mapping,
                fn,
                invoke,
                selected,
                mapping.maximumRetryAttempts ?? 10,
                shardId,
              );
          } finally {
            this.inflight--;
            this.lastActivity = Date.now();
          }
          position.after = records.at(-1)?.dynamodb?.SequenceNumber ?? position.after;
        } catch (error) {
          if (this.stopped) return;
          position.iterator = undefined;
          position.closed = false;
          await failed(call, error);
        }
      }
      if (!any) await sleep(150);
    }
  }

  private async invokeStreamBatch(
    mapping: LocalMapping,
    fn: LocalFunction,
    invoke: Invoke,
    records: DynamoDBRecord[],
    retriesLeft: number,
    shardId: string,
  ): Promise<void> {
    try {
      await invoke({ Records: records });
      return;
    } catch (error) {
      this.report({ kind: "invocation-failed", function: fn.name, error: String(error) });
    }
    if (retriesLeft <= 0) {
      this.report({ kind: "stream-batch-dropped", function: fn.name, records: records.length });
      if (mapping.onFailureArn) {
        try {
          await this.options.clients.sqs.send(
            new SendMessageCommand({
              QueueUrl: this.queueUrl(mapping.onFailureArn),
              MessageBody: JSON.stringify({
                requestContext: { functionArn: fn.name, condition: "RetryAttemptsExhausted" },
                DDBStreamBatchInfo: {
                  shardId,
                  startSequenceNumber: records[0]?.dynamodb?.SequenceNumber,
                  endSequenceNumber: records.at(-1)?.dynamodb?.SequenceNumber,
                  batchSize: records.length,
                  streamArn: mapping.eventSourceArn,
                },
              }),
            }),
          );
        } catch (error) {
          // The batch is given up on all the same; its description is only in this report.
          this.report({
            kind: "invocation-failed",
            function: fn.name,
            error: `on-failure destination: ${String(error)}`,
          });
        }
      }
      return;
    }
    await sleep(200);
    if (mapping.bisectBatchOnFunctionError && records.length > 1) {
      const half = Math.ceil(records.length / 2);
      await this.invokeStreamBatch(
        mapping,
        fn,
        invoke,
        records.slice(0, half),
        retriesLeft - 1,
        shardId,
      );
      await this.invokeStreamBatch(
        mapping,
        fn,
        invoke,
        records.slice(half),
        retriesLeft - 1,
        shardId,
      );
    } else {
      await this.invokeStreamBatch(mapping, fn, invoke, records, retriesLeft - 1, shardId);
    }
  }

  /**
   * An EventBridge Pipe from an SQS queue to a FIFO queue: each message's body is parsed as JSON
   * (as Pipes does), the group and deduplication ids come from the target parameters' JSON paths,
   * the input template shapes the new body; a message is deleted once it has been sent.
   */
  private runPipe(pipe: LocalPipe): Promise<void> {
    const { sqs } = this.options.clients;
    const source = this.queueUrl(pipe.sourceArn);
    const target = this.queueUrl(pipe.targetArn);
    return this.receiveLoop(source, pipe.batchSize, pipe.logicalId, async (messages) => {
      for (const m of messages) {
        const event = pipeEvent(m);
        try {
          await sqs.send(
            new SendMessageCommand({
              QueueUrl: target,
              MessageBody: pipe.inputTemplate
                ? renderTemplate(pipe.inputTemplate, event)
                : JSON.stringify(event),
              ...(pipe.messageGroupId
                ? { MessageGroupId: String(valueAt(pipe.messageGroupId, event)) }
                : {}),
              ...(pipe.messageDeduplicationId
                ? { MessageDeduplicationId: String(valueAt(pipe.messageDeduplicationId, event)) }
                : {}),
            }),
          );
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: source,
              Entries: [{ Id: "0", ReceiptHandle: m.ReceiptHandle }],
            }),
          );
        } catch (error) {
          // Left on the source queue: redelivered after its visibility timeout, then to its DLQ.
          this.report({
            kind: "invocation-failed",
            function: pipe.logicalId,
            error: String(error),
          });
        }
      }
      this.report({ kind: "piped", pipe: pipe.logicalId, messages: messages.length });
    });
  }

  private report(event: RuntimeEvent): void {
    this.options.onEvent?.(event);
  }
}

/** Where the runtime reads a stream shard: its iterator and the last record it has handled. */
interface ShardPosition {
  iterator?: string;
  /** Sequence number of the last record handled (to reopen the shard after it). */
  after?: string;
  /** The shard has ended (GetRecords gave no next iterator). */
  closed?: boolean;
}

function eventIdOf(body: string | undefined): string | undefined {
  try {
    const parsed = JSON.parse(body ?? "") as {
      event_id?: unknown;
      detail?: { event_id?: unknown };
    };
    const id = parsed.event_id ?? parsed.detail?.event_id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}

function toSqsRecord(m: Message, arn: string, region: string): SQSRecord {
  const attributes = (m.Attributes ?? {}) as Record<string, string>;
  return {
    messageId: m.MessageId ?? "",
    receiptHandle: m.ReceiptHandle ?? "",
    body: m.Body ?? "",
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? "1",
      SentTimestamp: attributes.SentTimestamp ?? String(Date.now()),
      SenderId: attributes.SenderId ?? "local",
      ApproximateFirstReceiveTimestamp:
        attributes.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      ...(attributes.MessageGroupId ? { MessageGroupId: attributes.MessageGroupId } : {}),
      ...(attributes.MessageDeduplicationId
        ? { MessageDeduplicationId: attributes.MessageDeduplicationId }
        : {}),
      ...(attributes.SequenceNumber ? { SequenceNumber: attributes.SequenceNumber } : {}),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
        k,
        {
          stringValue: v.StringValue,
          dataType: v.DataType ?? "String",
          stringListValues: [],
          binaryListValues: [],
        },
      ]),
    ),
    md5OfBody: m.MD5OfBody ?? "",
    eventSource: "aws:sqs",
    eventSourceARN: arn,
    awsRegion: region,
  };
}

function toStreamRecord(r: StreamRecord, arn: string, region: string): DynamoDBRecord {
  const d = r.dynamodb;
  return {
    eventID: r.eventID,
    eventName: r.eventName as DynamoDBRecord["eventName"],
    eventVersion: r.eventVersion ?? "1.1",
    eventSource: "aws:dynamodb",
    awsRegion: region,
    eventSourceARN: arn,
    dynamodb: {
      Keys: d?.Keys as never,
      NewImage: d?.NewImage as never,
      OldImage: d?.OldImage as never,
      SequenceNumber: d?.SequenceNumber,
      SizeBytes: d?.SizeBytes,
      StreamViewType: d?.StreamViewType,
      ApproximateCreationDateTime: d?.ApproximateCreationDateTime
        ? Math.floor(new Date(d.ApproximateCreationDateTime).getTime() / 1000)
        : undefined,
    },
  };
}

/** The event a pipe sees for an SQS message: `body` parsed when it is JSON. */
function pipeEvent(m: Message): Record<string, unknown> {
  let body: unknown = m.Body ?? "";
  try {
    body = JSON.parse(m.Body ?? "");
  } catch {
    // not JSON: stays a string
  }
  return {
    messageId: m.MessageId,
    receiptHandle: m.ReceiptHandle,
    body,
    attributes: m.Attributes ?? {},
    eventSource: "aws:sqs",
  };
}

/** A Pipes JSON path (`$.body.detail.order_key`) or a literal. */
export function valueAt(path: string, event: unknown): unknown {
  if (!path.startsWith("$.")) return path;
  let value: unknown = event;
  for (const part of path.slice(2).split("."))
    value = (value as Record<string, unknown> | undefined)?.[part];
  if (value === undefined) throw new Error(`pipe: ${path} is not in the event`);
  return value;
}

/**
 * Pipes input templates: a `<$.path>` placeholder inside quotes takes the raw string value,
 * elsewhere the JSON of the value (so `<$.body.detail>` alone forwards the envelope as JSON).
 */
export function renderTemplate(template: string, event: unknown): string {
  return template.replace(/<(\$[^>]*)>/g, (match, path: string, offset: number) => {
    const value = valueAt(path, event);
    const quoted = template[offset - 1] === '"' && template[offset + match.length] === '"';
    return quoted && typeof value === "string" ? value : JSON.stringify(value);
  });
}

/** Lambda event filtering for the pattern forms the stack uses: literal lists and nesting. */
export function matches(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern)) {
    return pattern.some((p) => {
      if (p && typeof p === "object") {
        const rule = p as { prefix?: string; exists?: boolean };
        if (rule.prefix !== undefined)
          return typeof value === "string" && value.startsWith(rule.prefix);
        if (rule.exists !== undefined) return (value !== undefined) === rule.exists;
        return false;
      }
      return value === p;
    });
  }
  if (pattern && typeof pattern === "object") {
    const obj = (value ?? {}) as Record<string, unknown>;
    return Object.entries(pattern as Record<string, unknown>).every(([k, p]) => matches(obj[k], p));
  }
  return value === pattern;
}
