/**
 * The port every adapter sends its AWS calls through: a command names its service and operation
 * and carries the operation's input, typed with the AWS SDK v3's own input and output types, and
 * the SDK v3 client and command classes that send it. ./sdk-client implements it on the SDK's
 * clients (what every function runs, and the operator's tools and the local runtime); the one
 * service no SDK client speaks, EventBridge's new buses, has ./eventbridge-v2.
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
  | "kms"
  | "ssm";

/** What a response says about its call, as the SDK's `$metadata` does. */
export interface ResponseMetadata {
  readonly httpStatusCode?: number;
  readonly requestId?: string;
  /** Attempts made, retries included. */
  readonly attempts?: number;
  readonly totalRetryDelay?: number;
}

/** Any AWS SDK v3 client. */
export interface SdkClient {
  // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `send` takes every command of its client
  send(command: any): Promise<any>;
}

/**
 * The SDK v3 classes that send an operation: its service's client (made once per container, with
 * the SDK's defaults) and its command. Carried by the operation itself, so that a bundle holds the
 * clients and commands of the operations its code sends, and no other.
 */
export interface SdkBinding {
  readonly Client: new () => SdkClient;
  /** The operation's command class (each takes its own input: `never` admits them all). */
  readonly Command: new (
    input: never,
  ) => object;
}

/** One call: `O` is the operation's output type (it types `send`'s result, nothing else). */
export interface AwsCommand<I extends object = object, O extends object = object> {
  readonly service: AwsService;
  readonly operation: string;
  readonly input: I;
  /** Headers added to the request (the X-Ray trace header). */
  readonly headers?: Readonly<Record<string, string>>;
  /** How an SDK client sends it; absent for a service no SDK client speaks (`eventsv2`). */
  readonly sdk?: SdkBinding;
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
  readonly sdk?: SdkBinding;
};

/**
 * The command constructor of `service`'s operation `name`, sent by the SDK classes `sdk`. Mark the
 * call `@__PURE__` (./operations): a bundle that sends none of its commands then drops it, and
 * with it the SDK classes it names.
 */
export function operation<I extends object, O extends object>(
  service: AwsService,
  name: string,
  sdk?: SdkBinding & { readonly Command: new (input: I) => object },
): Operation<I, O> {
  const make = (input: I): AwsCommand<I, O> =>
    sdk ? { service, operation: name, input, sdk } : { service, operation: name, input };
  return Object.assign(make, { service, operation: name, ...(sdk ? { sdk } : {}) });
}
