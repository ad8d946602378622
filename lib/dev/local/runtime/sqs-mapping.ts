import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import type { LocalFunction, LocalMapping } from "../deploy";
import type { Activity } from "./activity";
import type { Invoke } from "./events";
import { type Faults, InvocationCrash } from "./faults";
import { receiveLoop } from "./receive";
import { eventIdOf, toSqsRecord } from "./records";

/** What one SQS mapping poller works with. */
export interface SqsMappingContext {
  readonly activity: Activity;
  readonly faults: Faults;
  readonly sqs: SQSClient;
  readonly region: string;
}

/**
 * An SQS event source mapping poller: receive up to BatchSize messages, invoke, delete what
 * succeeded. With ReportBatchItemFailures only the reported items stay (an unknown item id fails
 * the whole batch, as on AWS); a thrown error leaves the whole batch for redelivery after its
 * visibility timeout. FIFO group order and DLQ redrive are the queue's own (the emulator
 * implements them). A paused consumer group receives nothing; a lost acknowledgement makes its
 * message visible again at once.
 */
export function runSqsMapping(
  ctx: SqsMappingContext,
  mapping: LocalMapping,
  fn: LocalFunction,
  invoke: Invoke,
  url: string,
): Promise<void> {
  const paused = () => fn.kind === "consumer" && ctx.faults.groupPaused(fn.group ?? fn.name);
  const options = { url, batchSize: mapping.batchSize, name: fn.name, paused };
  return receiveLoop(ctx.activity, ctx.sqs, options, async (messages) => {
    ctx.faults.received(messages.map((m) => m.MessageId ?? ""));
    const failed = await invokeBatch(ctx, { mapping, fn, invoke, url }, messages);
    const done = messages.filter((m) => !failed.has(m.MessageId ?? ""));
    const acked = await loseAcks(ctx, url, fn, done);
    if (acked.length > 0) await deleteAcked(ctx, url, fn.name, acked);
  });
}

export function sqsEvent(messages: readonly Message[], arn: string, region: string): SQSEvent {
  return { Records: messages.map((m) => toSqsRecord(m, arn, region)) };
}

/**
 * The message ids a handler's response leaves on the queue (partial batch response): none
 * without ReportBatchItemFailures or a `batchItemFailures` list, every one if an item id is
 * missing or not in the batch.
 */
export function failedItems(
  response: unknown,
  ids: ReadonlySet<string>,
  reportBatchItemFailures: boolean,
): Set<string> {
  const failures = (response as { batchItemFailures?: { itemIdentifier?: string }[] } | undefined)
    ?.batchItemFailures;
  const failed = new Set<string>();
  if (!reportBatchItemFailures || !Array.isArray(failures)) return failed;
  for (const f of failures) {
    if (!f.itemIdentifier || !ids.has(f.itemIdentifier)) return new Set(ids);
    failed.add(f.itemIdentifier);
  }
  return failed;
}

/** What one batch is handed to. */
interface BatchTarget {
  readonly mapping: LocalMapping;
  readonly fn: LocalFunction;
  readonly invoke: Invoke;
  readonly url: string;
}

/**
 * Invoke with the batch in its invocation scope; the ids that failed (all of them if the handler
 * threw). A crashed invocation's messages (under fault injection, any failed invocation's) are
 * made visible again at once: on AWS they would come back after the visibility timeout, which
 * only costs time here.
 */
async function invokeBatch(
  ctx: SqsMappingContext,
  { mapping, fn, invoke, url }: BatchTarget,
  messages: readonly Message[],
): Promise<Set<string>> {
  const event = sqsEvent(messages, mapping.eventSourceArn, ctx.region);
  const ids = new Set(messages.map((m) => m.MessageId ?? ""));
  const invocation = {
    function: fn.name,
    kind: fn.kind,
    group: fn.group ?? fn.name,
    attempt: Math.max(...messages.map((m) => Number(m.Attributes?.ApproximateReceiveCount ?? 1))),
    messageIds: [...ids],
    release: () => releaseMessages(ctx, url, fn.name, messages),
  };
  try {
    const response = await ctx.faults.invoke(invocation, () => invoke(event));
    return failedItems(response, ids, mapping.reportBatchItemFailures);
  } catch (error) {
    ctx.activity.report({ kind: "invocation-failed", function: fn.name, error: String(error) });
    if (error instanceof InvocationCrash || ctx.faults.releasesFailedBatches)
      await releaseMessages(ctx, url, fn.name, messages);
    return new Set(ids);
  }
}

/** Make messages visible again at once; should that fail, they come back after their timeout. */
async function releaseMessages(
  ctx: SqsMappingContext,
  url: string,
  name: string,
  messages: readonly Message[],
): Promise<void> {
  for (const m of messages)
    await ctx.sqs
      .send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: m.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      )
      .catch((error: unknown) =>
        ctx.activity.report({
          kind: "invocation-failed",
          function: name,
          error: `ChangeMessageVisibility: ${String(error)}`,
        }),
      );
}

/**
 * Fault injection: a consumer's handled message whose acknowledgement is to be lost is made
 * visible again at once (as after a crash) instead of deleted. The messages to delete.
 */
async function loseAcks(
  ctx: SqsMappingContext,
  url: string,
  fn: LocalFunction,
  done: readonly Message[],
): Promise<Message[]> {
  const acked: Message[] = [];
  for (const m of done) {
    const eventId = eventIdOf(m.Body);
    if (eventId && fn.kind === "consumer" && ctx.faults.takeLostAck(fn.group, eventId)) {
      ctx.activity.report({
        kind: "fault",
        description: `lost the acknowledgement of ${eventId} (${fn.name}): it will be delivered again`,
      });
      await releaseMessages(ctx, url, fn.name, [m]);
    } else acked.push(m);
  }
  return acked;
}

/**
 * Delete what was handled. A message not deleted is delivered again after its visibility timeout
 * (a duplicate the consumer recognises): reported, and the poller goes on.
 */
async function deleteAcked(
  ctx: SqsMappingContext,
  url: string,
  name: string,
  acked: readonly Message[],
): Promise<void> {
  const report = (error: string) =>
    ctx.activity.report({ kind: "invocation-failed", function: name, error });
  try {
    const { Failed = [] } = await ctx.sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: acked.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    if (Failed.length > 0)
      report(
        `DeleteMessageBatch: ${Failed.length} of ${acked.length} not deleted (${Failed[0]?.Code}: ${Failed[0]?.Message})`,
      );
  } catch (error) {
    report(`DeleteMessageBatch: ${String(error)}`);
  }
}
