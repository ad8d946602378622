import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from "@aws-lambda-powertools/batch";
import type { Logger } from "@aws-lambda-powertools/logger";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { AwsClient } from "../adapters/aws/client";
import { releaseMessages } from "../adapters/sqs/visibility";
import { describe } from "../core/errors";

/**
 * Runs every record of a batch through `handleRecord` and answers with the partial batch
 * response. FIFO: in order, and the first failure of a message group holds back the rest of that
 * group (Powertools' SqsFifoPartialProcessorAsync with skipGroupOnError); the records skipped
 * behind it are released at once, so their group resumes (in order) when the failed record's
 * backoff ends, not after the visibility timeout. A standard queue's records are independent (and
 * handled one after the other, so each log line names its own record).
 */
export async function processBatch(
  event: SQSEvent,
  context: Context | undefined,
  handleRecord: (record: SQSRecord) => Promise<void>,
  queue: { readonly sqs: AwsClient; readonly url: string; readonly logger: Logger },
): Promise<SQSBatchResponse> {
  const fifo = event.Records.some((r) => r.attributes.MessageGroupId !== undefined);
  if (!fifo)
    return processPartialResponse(event, handleRecord, new BatchProcessor(EventType.SQS), {
      context,
      throwOnFullBatchFailure: false,
      // One record at a time: the logger carries the record's ids while it is handled.
      processInParallel: false,
    });
  const reached = new Set<string>();
  const response = await processPartialResponse(
    event,
    (record: SQSRecord) => {
      reached.add(record.messageId);
      return handleRecord(record);
    },
    new SqsFifoPartialProcessorAsync(),
    { context, skipGroupOnError: true, throwOnFullBatchFailure: false },
  );
  const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
  const skipped = event.Records.filter((r) => failed.has(r.messageId) && !reached.has(r.messageId));
  if (skipped.length > 0)
    await releaseMessages(
      queue.sqs,
      queue.url,
      skipped.map((r) => r.receiptHandle),
    ).catch((e: unknown) =>
      queue.logger.warn("could not release the records skipped behind a failure", {
        error: describe(e),
      }),
    );
  return response;
}
