import {
  DynamoDBServiceException,
  InternalServerError,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from "@aws-sdk/client-dynamodb";
import {
  EventBridgeServiceException,
  InternalException,
  ThrottlingException,
} from "@aws-sdk/client-eventbridge";
import { KMSInternalException, KMSServiceException } from "@aws-sdk/client-kms";
import {
  InternalErrorException,
  SNSServiceException,
  ThrottledException,
} from "@aws-sdk/client-sns";
import { RequestThrottled, SQSServiceException } from "@aws-sdk/client-sqs";

/**
 * The errors the services and the SDK's HTTP handler really throw, built from the SDK's own
 * exception classes so that the code's classification of them (throttled, server fault, unknown
 * outcome) is what is exercised.
 */
export type Service = "dynamodb" | "sqs" | "eventbridge" | "sns" | "kms";

const meta = (httpStatusCode: number) => ({ httpStatusCode, attempts: 1, totalRetryDelay: 0 });

/** What the service answers a throttled request with. */
export function throttled(service: Service, operation: string, input: unknown): Error {
  const message = `Rate exceeded (injected into ${operation})`;
  switch (service) {
    case "dynamodb":
      // A throttled transaction is cancelled with a ThrottlingError reason, not a throttle.
      return operation === "TransactWriteItems"
        ? transactionThrottled(input, message)
        : new ProvisionedThroughputExceededException({ message, $metadata: meta(400) });
    case "sqs":
      return new RequestThrottled({ message, $metadata: meta(400) });
    case "eventbridge":
      return new ThrottlingException({ message, $metadata: meta(400) });
    case "sns":
      return new ThrottledException({ message, $metadata: meta(400) });
    case "kms":
      // KMS throttles with the generic ThrottlingException, which its model does not declare.
      return new KMSServiceException({
        name: "ThrottlingException",
        $fault: "client",
        message,
        $metadata: meta(400),
      });
  }
}

function transactionThrottled(input: unknown, message: string): Error {
  const items = (input as { TransactItems?: unknown[] } | undefined)?.TransactItems ?? [];
  return new TransactionCanceledException({
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${items.map((_, i) => (i === 0 ? "ThrottlingError" : "None")).join(", ")}] (${message})`,
    $metadata: meta(400),
    CancellationReasons: items.map((_, i) =>
      i === 0
        ? { Code: "ThrottlingError", Message: "Throughput exceeds the current capacity" }
        : { Code: "None" },
    ),
  });
}

/** A 5xx answer. */
export function serverFault(service: Service, operation: string): Error {
  const message = `We encountered an internal error. Please try again. (injected into ${operation})`;
  switch (service) {
    case "dynamodb":
      return new InternalServerError({ message, $metadata: meta(500) });
    case "sqs":
      // SQS has no modelled 5xx class: its base exception under the name the service answers.
      return new SQSServiceException({
        name: "ServiceUnavailable",
        $fault: "server",
        message,
        $metadata: meta(503),
      });
    case "eventbridge":
      return new InternalException({ message, $metadata: meta(500) });
    case "sns":
      return new InternalErrorException({ message, $metadata: meta(500) });
    case "kms":
      return new KMSInternalException({ message, $metadata: meta(500) });
  }
}

/** What the HTTP handler throws when the answer does not come in time (the request may have been applied). */
export function timedOut(operation: string): Error {
  return Object.assign(
    new Error(
      `socket timed out waiting for the answer to ${operation} (injected after the request was applied)`,
    ),
    { name: "TimeoutError" },
  );
}

/** What Node throws when the connection is reset before the request went out. */
export function connectionReset(operation: string): Error {
  return Object.assign(new Error(`socket hang up (injected before ${operation} was sent)`), {
    code: "ECONNRESET",
  });
}

/** The base exception class of a service (a test tells the injected errors by it). */
export const SERVICE_EXCEPTIONS = {
  dynamodb: DynamoDBServiceException,
  sqs: SQSServiceException,
  eventbridge: EventBridgeServiceException,
  sns: SNSServiceException,
  kms: KMSServiceException,
} as const;
