/**
 * The port every adapter sends its AWS calls through: a command names its service and operation
 * and carries the operation's input, typed with the AWS SDK v3's own input and output types.
 * Two clients implement it: ./lean-client (what every Lambda function runs: the SDK's signer,
 * HTTP handler and retry strategy, without the SDK's clients) and ./sdk-client (an SDK v3
 * client, for the operator's tools and the local runtime, with its middleware and credential
 * chain).
 */

/**
 * The services AgentBus functions call, by the endpoint prefix of each: `eventsv2` is EventBridge's
 * new buses (the `eventbridgev2` API), which no AWS SDK for JavaScript client speaks.
 */
export type AwsService =
  | "dynamodb"
  | "sqs"
  | "events"
  | "eventsv2"
  | "sns"
  | "bedrock-runtime"
  | "kms";

/** What a response says about its call, as the SDK's `$metadata` does. */
export interface ResponseMetadata {
  readonly httpStatusCode?: number;
  readonly requestId?: string;
  /** Attempts made, retries included. */
  readonly attempts?: number;
  readonly totalRetryDelay?: number;
}

/** One call: `O` is the operation's output type (it types `send`'s result, nothing else). */
export interface AwsCommand<I extends object = object, O extends object = object> {
  readonly service: AwsService;
  readonly operation: string;
  readonly input: I;
  /** Headers added to the request (the X-Ray trace header). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Never set: carries the output type. */
  readonly output?: O;
}

/**
 * `send` is a property, not a method, so that an SDK client (whose `send` takes the SDK's own
 * commands) is not taken for one: ./sdk-client wraps it.
 */
export interface AwsClient {
  /**
   * Sends one command, retried as the SDK retries (throttling and transient errors). A refused
   * call rejects with an `Error` whose `name` is the service's error code, with `$metadata` and
   * the error's fields (`CancellationReasons`, `Item`, ...), as the SDK's errors are.
   */
  readonly send: <I extends object, O extends object>(
    command: AwsCommand<I, O>,
  ) => Promise<O & { readonly $metadata: ResponseMetadata }>;
}

/** A command constructor for one operation: `PutItem({...})`. */
export type Operation<I extends object, O extends object> = ((input: I) => AwsCommand<I, O>) & {
  readonly service: AwsService;
  readonly operation: string;
};

export function operation<I extends object, O extends object>(
  service: AwsService,
  name: string,
): Operation<I, O> {
  const make = (input: I): AwsCommand<I, O> => ({ service, operation: name, input });
  return Object.assign(make, { service, operation: name });
}
