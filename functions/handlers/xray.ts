import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";

/**
 * X-Ray subsegments for AWS SDK v3 calls, without the X-Ray SDK. With active tracing, Lambda
 * records the invocation's segment; every SDK call of a client given to `captureAWSv3Client`
 * becomes a subsegment of it (service, operation, request id, retries, status, table or queue),
 * sent to the X-Ray daemon over UDP as the X-Ray SDK does, and the call carries a trace header
 * whose parent is that subsegment, so SQS and EventBridge continue the trace from it. The
 * Powertools Tracer did the same through aws-xray-sdk-core, which was 120 KB of every bundle and
 * a quarter of its init time (`npm run bench -- bundles` measures the difference).
 */

/** What the handlers use of a tracer (the Powertools Tracer's method of the same name). */
export interface Tracer {
  /** The same client, its calls traced when X-Ray traces this invocation. */
  captureAWSv3Client<T>(client: T): T;
}

/** Where tracing reads its switches: the process environment, unless a test gives its own. */
export type TraceEnv = Readonly<Record<string, string | undefined>>;

export interface XRayTracerOptions {
  readonly env?: TraceEnv;
  /** Sends one datagram to the daemon (tests capture them). */
  readonly send?: (datagram: string, port: number, host: string) => void;
}

/** The part of an SDK v3 client and its calls the middleware uses. */
interface Traceable {
  readonly middlewareStack: {
    add(middleware: Middleware, options: { step: "build"; name: string; priority: "high" }): void;
    identify(): string[];
  };
}
interface CallContext {
  readonly clientName?: string;
  readonly commandName?: string;
}
interface CallArgs {
  readonly input?: Record<string, unknown>;
  readonly request?: { headers?: Record<string, string> };
}
interface Metadata {
  readonly httpStatusCode?: number;
  readonly requestId?: string;
  readonly attempts?: number;
}
type Next = (args: CallArgs) => Promise<{ output?: { $metadata?: Metadata } }>;
type Middleware = (next: Next, context: CallContext) => Next;

const MIDDLEWARE_NAME = "agentbusXRaySubsegment";
const DAEMON_HEADER = '{"format":"json","version":1}\n';

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
  if (!enabled) return { captureAWSv3Client: (client) => client };
  const send = options.send ?? udpSender();
  const emit = (document: object) =>
    send(DAEMON_HEADER + JSON.stringify(document), daemon.port, daemon.host);
  const middleware = subsegmentMiddleware(env, emit);
  return {
    captureAWSv3Client<T>(client: T): T {
      const stack = (client as unknown as Traceable).middlewareStack;
      if (stack && !stack.identify().some((name) => name.startsWith(MIDDLEWARE_NAME))) {
        stack.add(middleware, { step: "build", name: MIDDLEWARE_NAME, priority: "high" });
      }
      return client;
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

function subsegmentMiddleware(env: TraceEnv, emit: (document: object) => void): Middleware {
  return (next, context) => async (args) => {
    const header = env._X_AMZN_TRACE_ID;
    const trace = sampledTrace(header);
    if (!header || !trace) return next(args);
    const id = randomBytes(8).toString("hex");
    const headers = args.request?.headers;
    if (headers) headers["X-Amzn-Trace-Id"] = withParent(header, id);
    const start = Date.now() / 1000;
    const record = (metadata: Metadata | undefined, error?: unknown) =>
      emit({
        ...callDocument(context, args.input ?? {}, metadata, error, env.AWS_REGION),
        id,
        trace_id: trace.root,
        parent_id: trace.parent,
        start_time: start,
        end_time: Date.now() / 1000,
      });
    try {
      const result = await next(args);
      record(result.output?.$metadata);
      return result;
    } catch (error) {
      record((error as { $metadata?: Metadata }).$metadata, error);
      throw error;
    }
  };
}

/** The subsegment of one call, as the X-Ray SDK writes it for an AWS SDK v3 call. */
function callDocument(
  context: CallContext,
  input: Record<string, unknown>,
  metadata: Metadata | undefined,
  error: unknown,
  region: string | undefined,
) {
  const status = metadata?.httpStatusCode;
  const name = error instanceof Error ? error.name : undefined;
  const throttle = status === 429 || (name !== undefined && /Throttl|TooManyRequests/.test(name));
  const failed = error !== undefined;
  return {
    type: "subsegment",
    name: (context.clientName ?? "AWS").replace(/Client$/, ""),
    namespace: "aws",
    aws: {
      operation: (context.commandName ?? "").replace(/Command$/, ""),
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
