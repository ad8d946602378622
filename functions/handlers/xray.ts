import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import type { AwsClient, AwsCommand, AwsService, ResponseMetadata } from "../adapters/aws/client";

/**
 * X-Ray subsegments for AWS calls, without the X-Ray SDK. With active tracing, Lambda records the
 * invocation's segment; every call of a client given to `capture` becomes a subsegment of it
 * (service, operation, request id, retries, status, table or queue), sent to the X-Ray daemon
 * over UDP as the X-Ray SDK does, and the call carries a trace header whose parent is that
 * subsegment, so SQS and EventBridge continue the trace from it. The Powertools Tracer did the
 * same through aws-xray-sdk-core, which was 120 KB of every bundle and a quarter of its init time
 * (`npm run bench -- bundles` measures the difference).
 */

/** What the handlers use of a tracer. */
export interface Tracer {
  /** The client, its calls traced when X-Ray traces this invocation (the same client if not). */
  capture(client: AwsClient): AwsClient;
}

/** Where tracing reads its switches: the process environment, unless a test gives its own. */
export type TraceEnv = Readonly<Record<string, string | undefined>>;

export interface XRayTracerOptions {
  readonly env?: TraceEnv;
  /** Sends one datagram to the daemon (tests capture them). */
  readonly send?: (datagram: string, port: number, host: string) => void;
}

const DAEMON_HEADER = '{"format":"json","version":1}\n';

/** The subsegment name of each service, as the X-Ray SDK names it. */
const TRACE_NAMES: Readonly<Record<AwsService, string>> = {
  dynamodb: "DynamoDB",
  sqs: "SQS",
  events: "EventBridge",
  eventsv2: "EventBridgeV2",
  sns: "SNS",
  "bedrock-runtime": "BedrockRuntime",
  kms: "KMS",
  ssm: "SSM",
};
const traced = new WeakSet<AwsClient>();

/**
 * A tracer that is on in a Lambda execution environment (`AWS_EXECUTION_ENV`) with an X-Ray
 * daemon address, unless `POWERTOOLS_TRACE_ENABLED=false`, the Powertools switch; elsewhere
 * (local runtime, tests) clients are returned untouched.
 */
export function xrayTracer(options: XRayTracerOptions = {}): Tracer {
  const env = options.env ?? process.env;
  const daemon = daemonAddress(env.AWS_XRAY_DAEMON_ADDRESS);
  const enabled =
    daemon !== undefined &&
    Boolean(env.AWS_EXECUTION_ENV) &&
    env.POWERTOOLS_TRACE_ENABLED?.toLowerCase() !== "false";
  if (!enabled) return { capture: (client) => client };
  const send = options.send ?? udpSender();
  const emit = (document: object) =>
    send(DAEMON_HEADER + JSON.stringify(document), daemon.port, daemon.host);
  return {
    capture(client) {
      if (traced.has(client)) return client;
      const wrapped: AwsClient = { send: (command) => sendTraced(client, command, env, emit) };
      traced.add(wrapped);
      return wrapped;
    },
  };
}

/** `Root=...;Parent=...;Sampled=1` of the current invocation, if it is sampled. */
export function sampledTrace(header: string | undefined) {
  const fields = new Map(
    (header ?? "").split(";").map((part) => {
      const at = part.indexOf("=");
      return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
    }),
  );
  const root = fields.get("Root");
  const parent = fields.get("Parent");
  if (!root || !parent || fields.get("Sampled") !== "1") return undefined;
  return { root, parent };
}

/**
 * The invocation's trace header with `Parent` set to `parent`, every other field kept: `Lineage`
 * in particular, which Lambda's recursive loop detection follows through SQS.
 */
export function withParent(header: string, parent: string): string {
  return header
    .split(";")
    .map((field) => (field.trim().startsWith("Parent=") ? `Parent=${parent}` : field))
    .join(";");
}

/** `AWS_XRAY_DAEMON_ADDRESS`: `host:port`, or `udp:host:port tcp:host:port`. */
export function daemonAddress(value: string | undefined) {
  const udp = (value ?? "").split(/\s+/).find((part) => !part.startsWith("tcp:")) ?? "";
  const match = /^(?:udp:)?(.+):(\d+)$/.exec(udp);
  return match?.[1] && match[2] ? { host: match[1], port: Number(match[2]) } : undefined;
}

/** One call as a subsegment of the sampled invocation, its trace header naming it as parent. */
async function sendTraced<I extends object, O extends object>(
  client: AwsClient,
  command: AwsCommand<I, O>,
  env: TraceEnv,
  emit: (document: object) => void,
) {
  const header = env._X_AMZN_TRACE_ID;
  const trace = sampledTrace(header);
  if (!header || !trace) return client.send(command);
  const id = randomBytes(8).toString("hex");
  const start = Date.now() / 1000;
  const record = (metadata: ResponseMetadata | undefined, error?: unknown) =>
    emit({
      ...callDocument(command, metadata, error, env.AWS_REGION),
      id,
      trace_id: trace.root,
      parent_id: trace.parent,
      start_time: start,
      end_time: Date.now() / 1000,
    });
  const headers = { ...command.headers, "X-Amzn-Trace-Id": withParent(header, id) };
  try {
    const output = await client.send({ ...command, headers });
    record(output.$metadata);
    return output;
  } catch (error) {
    record((error as { $metadata?: ResponseMetadata }).$metadata, error);
    throw error;
  }
}

/** The subsegment of one call, as the X-Ray SDK writes it for an AWS SDK v3 call. */
function callDocument(
  command: AwsCommand,
  metadata: ResponseMetadata | undefined,
  error: unknown,
  region: string | undefined,
) {
  const input = command.input as Record<string, unknown>;
  const status = metadata?.httpStatusCode;
  const name = error instanceof Error ? error.name : undefined;
  const throttle = status === 429 || (name !== undefined && /Throttl|TooManyRequests/.test(name));
  const failed = error !== undefined;
  return {
    type: "subsegment",
    name: TRACE_NAMES[command.service],
    namespace: "aws",
    aws: {
      operation: command.operation,
      region,
      request_id: metadata?.requestId,
      retries: Math.max((metadata?.attempts ?? 1) - 1, 0),
      ...(typeof input.TableName === "string" ? { table_name: input.TableName } : {}),
      ...(typeof input.QueueUrl === "string" ? { queue_url: input.QueueUrl } : {}),
    },
    ...(status ? { http: { response: { status } } } : {}),
    ...(throttle ? { throttle: true } : {}),
    ...(failed && (status === undefined || status >= 500) ? { fault: true } : {}),
    ...(failed && status !== undefined && status >= 400 && status < 500 ? { error: true } : {}),
    ...(failed && name
      ? {
          cause: { exceptions: [{ id: randomBytes(8).toString("hex"), type: name, remote: true }] },
        }
      : {}),
  };
}

/** One UDP socket per container, made on first use; it never keeps the process alive. */
function udpSender(): (datagram: string, port: number, host: string) => void {
  let socket: Socket | undefined;
  return (datagram, port, host) => {
    if (!socket) {
      socket = createSocket("udp4");
      socket.unref();
      socket.on("error", () => {});
    }
    socket.send(datagram, port, host);
  };
}
