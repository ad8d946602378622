import { Readable } from "node:stream";
import {
  crash,
  currentInvocation,
  type HttpRequestLike,
  type HttpResponseLike,
  type HttpSender,
  InvocationCrash,
} from "../local/runtime/faults";
import type { FaultDraws } from "./plan";
import { connectionReset, type Service, timedOut } from "./sdk-errors";

/**
 * Fault injection at the HTTP seam of the functions' SDK clients (their `requestHandler`,
 * ../local/function-clients.ts): what the functions meet is what the services and the network
 * give, below the SDK's retries, so the SDK's reading of each answer, its retries and its clock
 * correction are what is exercised. The same decisions as the SDK middleware (./middleware.ts),
 * one draw per HTTP attempt:
 *
 * - throttle and server error: the service's own error answer (status, `__type`, the SQS query
 *   error header; a throttled DynamoDB transaction is cancelled with a ThrottlingError reason);
 * - connection reset: Node's ECONNRESET before the request went out;
 * - timeout after apply: the request goes through, then the answer is lost (TimeoutError);
 * - clock skew: the request is refused as signed at the wrong time (403, "Signature expired")
 *   with a `Date` twenty minutes ahead, from which the client is to correct its clock and retry;
 * - crash after a write: the write applied, then the invocation is dead.
 *
 * Only calls made inside a function invocation are touched; a dead invocation's calls are refused.
 */
export function faultyHttp(
  inner: HttpSender,
  injector: Pick<FaultDraws, "callFault" | "skewed" | "crashAfter">,
): HttpSender {
  return {
    async handle(request, options) {
      const invocation = currentInvocation();
      const call = callOf(request);
      if (!invocation || !call) return inner.handle(request, options);
      const { service, operation } = call;
      if (invocation.crashed)
        throw new InvocationCrash(`${invocation.function} is dead: ${operation} not sent`);
      if (injector.skewed(service, operation, invocation)) return skewAnswer(service, operation);
      const fault = injector.callFault(service, operation, invocation);
      if (fault === "throttle")
        return answer(throttledAnswer(service, operation, textOf(request.body)));
      if (fault === "server-error") return answer(serverFaultAnswer(service, operation));
      if (fault === "connection-reset") throw connectionReset(operation);
      const result = await inner.handle(request, options);
      if (fault === "timeout-after-apply") {
        await drain(result.response.body);
        throw timedOut(operation);
      }
      if (injector.crashAfter(service, operation, invocation)) {
        await drain(result.response.body);
        throw crash(invocation, operation);
      }
      return result;
    },
  };
}

const TARGETS: Readonly<Record<string, Service>> = {
  DynamoDB_20120810: "dynamodb",
  AmazonSQS: "sqs",
  AWSEvents: "eventbridge",
  TrentService: "kms",
};

/**
 * The service and operation a request calls (JSON protocols by target, SNS by its Action); none
 * for EventBridge's new buses (RPC v2 CBOR), which no chaos plan draws faults for.
 */
export function callOf(
  request: Pick<HttpRequestLike, "headers" | "body">,
): { service: Service; operation: string } | undefined {
  const target = request.headers["x-amz-target"];
  if (target) {
    const [prefix = "", operation = ""] = target.split(".");
    const service = TARGETS[prefix];
    return service ? { service, operation } : undefined;
  }
  const action = /(?:^|&)Action=([A-Za-z]+)/.exec(textOf(request.body))?.[1];
  return action ? { service: "sns", operation: action } : undefined;
}

/** A request body as text: the SDK sends the JSON and query protocols' as text or as bytes. */
function textOf(body: unknown): string {
  if (typeof body === "string") return body;
  return body instanceof Uint8Array ? Buffer.from(body).toString("utf8") : "";
}

interface ErrorAnswer {
  readonly status: number;
  readonly type: string;
  readonly message: string;
  readonly extra?: Record<string, unknown>;
}

const DYNAMODB = "com.amazonaws.dynamodb.v20120810#";

/** What the service answers a throttled request with. */
function throttledAnswer(service: Service, operation: string, body: string): ErrorAnswer {
  const message = `Rate exceeded (injected into ${operation})`;
  switch (service) {
    case "dynamodb": {
      if (operation !== "TransactWriteItems")
        return { status: 400, type: `${DYNAMODB}ProvisionedThroughputExceededException`, message };
      const items = (JSON.parse(body) as { TransactItems?: unknown[] }).TransactItems ?? [];
      const reasons = items.map((_, i) =>
        i === 0
          ? { Code: "ThrottlingError", Message: "Throughput exceeds the current capacity" }
          : { Code: "None" },
      );
      return {
        status: 400,
        type: `${DYNAMODB}TransactionCanceledException`,
        message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(", ")}]`,
        extra: { CancellationReasons: reasons },
      };
    }
    case "sqs":
      return { status: 400, type: "com.amazonaws.sqs#RequestThrottled", message };
    case "eventbridge":
      return { status: 400, type: "ThrottlingException", message };
    case "sns":
      return { status: 400, type: "Throttled", message };
    case "kms":
      return { status: 400, type: "ThrottlingException", message };
  }
}

/** A 5xx answer. */
function serverFaultAnswer(service: Service, operation: string): ErrorAnswer {
  const message = `We encountered an internal error. Please try again. (injected into ${operation})`;
  switch (service) {
    case "dynamodb":
      return { status: 500, type: `${DYNAMODB}InternalServerError`, message };
    case "sqs":
      return { status: 503, type: "com.amazonaws.sqs#ServiceUnavailable", message };
    case "eventbridge":
      return { status: 500, type: "InternalException", message };
    case "sns":
      return { status: 500, type: "InternalError", message };
    case "kms":
      return { status: 500, type: "KMSInternalException", message };
  }
}

/** How far ahead of this machine's clock a skewed answer's `Date` is. */
export const SKEW_MS = 20 * 60 * 1000;

/** A refusal as signed at the wrong time, dated by a service clock SKEW_MS ahead. */
function skewAnswer(service: Service, operation: string): { response: HttpResponseLike } {
  const serverNow = new Date(Date.now() + SKEW_MS);
  const message = `Signature expired: the request to ${operation} is now earlier than ${serverNow.toISOString()} - 5 min. (injected)`;
  const type =
    service === "sqs"
      ? "com.amazonaws.sqs#SignatureDoesNotMatch"
      : service === "sns"
        ? "SignatureDoesNotMatch"
        : "InvalidSignatureException";
  const { response } = answer({ status: 403, type, message });
  return {
    response: { ...response, headers: { ...response.headers, date: serverNow.toUTCString() } },
  };
}

/** An error answer as the service sends it: JSON with `__type` (SNS: its query protocol's XML). */
function answer(error: ErrorAnswer): { response: HttpResponseLike } {
  const requestId = `injected-${Date.now()}`;
  if (
    !error.type.includes("#") &&
    /^(Throttled|InternalError|SignatureDoesNotMatch)$/.test(error.type)
  ) {
    const xml = `<ErrorResponse><Error><Type>${error.status >= 500 ? "Receiver" : "Sender"}</Type><Code>${error.type}</Code><Message>${error.message}</Message></Error><RequestId>${requestId}</RequestId></ErrorResponse>`;
    return respond(error.status, { "content-type": "text/xml" }, xml);
  }
  const code = error.type.slice(error.type.indexOf("#") + 1);
  const headers: Record<string, string> = {
    "content-type": "application/x-amz-json-1.0",
    "x-amzn-requestid": requestId,
    // SQS's JSON protocol names the query-compatible error code in this header.
    ...(error.type.startsWith("com.amazonaws.sqs#")
      ? { "x-amzn-query-error": `${code};${error.status >= 500 ? "Receiver" : "Sender"}` }
      : {}),
  };
  const body = JSON.stringify({ __type: error.type, message: error.message, ...error.extra });
  return respond(error.status, headers, body);
}

function respond(statusCode: number, headers: Record<string, string>, body: string) {
  return {
    response: {
      statusCode,
      headers,
      body: Readable.from([Buffer.from(body)]),
    },
  };
}

async function drain(body: AsyncIterable<Uint8Array | string> | undefined): Promise<void> {
  if (!body) return;
  for await (const _ of body) {
    // The answer is read (the connection goes back to the pool), then lost.
  }
}
