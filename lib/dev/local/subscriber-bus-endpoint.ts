import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  fromCbor,
  RPC_V2_CBOR_HEADERS,
  toCbor,
} from "../../../functions/adapters/aws/eventbridge-v2";
import type { SubscriberBusPutEvents } from "../../../functions/adapters/eventbridge/subscriber-bus";
import type { PointInTimeSubscriberRequest } from "../../operator/replay-subscriber";
import { subscriberArnOf } from "./deploy/subscribers";
import { LOCAL_SERVICE_CREDENTIALS } from "./front-door";
import type { LocalSubscriberBuses } from "./runtime/subscriber-buses";
import { type LocalCredentials, verifySignature } from "./sigv4";

/**
 * The `eventbridgev2` API served on 127.0.0.1 as the service serves it, over the local runtime's
 * emulation of the new buses (./runtime/subscriber-buses.ts), so that what speaks to AWS (the
 * relay's client, `agentbus replay`) is exercised on its own wire protocol: Smithy RPC v2 CBOR, `POST
 * /service/AWSEventsV2/operation/<Operation>` with `smithy-protocol: rpc-v2-cbor` and CBOR bodies
 * both ways, signed (SigV4) for `events` in the endpoint's region by the emulator's credentials
 * (functions/adapters/aws/eventbridge-v2.ts has the sources). Errors are CBOR with `__type` and
 * `message`. Served: PutEvents, DescribeEventBus, DescribeSubscriber (a subscriber of the template, by ARN),
 * ListSubscribers (by bus and name prefix; one page) and CreateSubscriber (a point-in-time replay,
 * idempotent by `ClientToken`: the same token answers what it created the first time).
 */

const OPERATION_PATH = /^\/service\/AWSEventsV2\/operation\/([A-Za-z]+)$/;

/** A request the endpoint took, as read: for tests to check what a client sent. */
export interface SubscriberBusCall {
  readonly operation: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly input: Record<string, unknown>;
}

/** An answer given instead of the emulation's (a test's throttling or fault). */
export interface SubscriberBusAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export interface SubscriberBusEndpointOptions {
  readonly buses: LocalSubscriberBuses;
  readonly region: string;
  /** The credentials requests must be signed with (default: the emulator's). */
  readonly credentials?: LocalCredentials;
  readonly port?: number;
  /** Asked first for each well-formed, signed call: an answer, or undefined for the emulation's. */
  readonly intercept?: (call: SubscriberBusCall) => SubscriberBusAnswer | undefined;
}

export interface SubscriberBusEndpoint {
  readonly url: string;
  /** Every well-formed, signed call, in order. */
  readonly calls: readonly SubscriberBusCall[];
  stop(): Promise<void>;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export async function serveSubscriberBuses(
  options: SubscriberBusEndpointOptions,
): Promise<SubscriberBusEndpoint> {
  const calls: SubscriberBusCall[] = [];
  const operations = localOperations(options.buses);
  const server: Server = createServer((request, response) => {
    void answer(request, response, options, operations, calls);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function answer(
  request: IncomingMessage,
  response: ServerResponse,
  options: SubscriberBusEndpointOptions,
  operations: Readonly<Record<string, (input: Record<string, unknown>) => Promise<object>>>,
  calls: SubscriberBusCall[],
): Promise<void> {
  try {
    const call = await callOf(request, options);
    calls.push(call);
    const given = options.intercept?.(call);
    if (given) return reply(response, given.status, given.body);
    const operation = operations[call.operation];
    if (!operation)
      throw new Refusal(404, "UnknownOperationException", `no operation ${call.operation}`);
    reply(response, 200, await operation(call.input));
  } catch (error) {
    const refusal = refusalOf(error);
    reply(response, refusal.status, { __type: refusal.type, message: refusal.message });
  }
}

/** The call a request makes, refused unless well-formed and signed as the service requires. */
async function callOf(
  request: IncomingMessage,
  options: SubscriberBusEndpointOptions,
): Promise<SubscriberBusCall> {
  const body = await bodyOf(request);
  const url = new URL(request.url ?? "/", "http://127.0.0.1");
  const operation = OPERATION_PATH.exec(url.pathname)?.[1];
  if (request.method !== "POST" || !operation)
    throw new Refusal(404, "UnknownOperationException", `${request.method} ${url.pathname}`);
  const headers = Object.fromEntries(
    Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
  );
  for (const [name, value] of Object.entries(RPC_V2_CBOR_HEADERS))
    if (headers[name] !== value)
      throw new Refusal(400, "SerializationException", `${name} must be ${value}`);
  const signed = await verifySignature(
    { method: "POST", url, headers, body },
    options.credentials ?? LOCAL_SERVICE_CREDENTIALS,
    new Date(),
    "events",
  );
  if ("problem" in signed) throw new Refusal(403, "InvalidSignatureException", signed.problem);
  const scope = `/${options.region}/events/aws4_request`;
  if (!headers.authorization?.includes(scope))
    throw new Refusal(403, "InvalidSignatureException", `the credential scope is not ${scope}`);
  return { operation, headers, input: fromCbor(body) };
}

/** The emulation behind each operation. */
function localOperations(buses: LocalSubscriberBuses) {
  const created = new Map<string, { Name: string; EventBusArn: string } & object>();
  return {
    PutEvents: (input: Record<string, unknown>) =>
      buses.putEvents(input as unknown as SubscriberBusPutEvents),
    DescribeEventBus: async (input: Record<string, unknown>) =>
      buses.describeEventBus(String(input.EventBusArn)),
    DescribeSubscriber: async (input: Record<string, unknown>) => {
      const arn = String(input.SubscriberArn);
      const name = /:subscriber\/([^/]+)\//.exec(arn)?.[1] ?? arn;
      return { SubscriberArn: arn, ...buses.describeSubscriber(name), State: "RUNNING" };
    },
    ListSubscribers: async (input: Record<string, unknown>) => {
      const bus = String(input.EventBusArn);
      const prefix = String(input.NamePrefix ?? "");
      const live = buses.subscribersOf(bus).map((s) => ({
        SubscriberArn: subscriberArnOf(bus, s.name),
        Name: s.name,
        EventBusArn: bus,
        State: "RUNNING",
      }));
      const all = [...live, ...[...created.values()].filter((s) => s.EventBusArn === bus)];
      return { Subscribers: all.filter((s) => s.Name.startsWith(prefix)) };
    },
    CreateSubscriber: async (input: Record<string, unknown>) => {
      const request = pointInTimeRequest(input);
      const before = created.get(request.ClientToken);
      if (before) return before;
      await buses.createSubscriber(request);
      const made = {
        SubscriberArn: subscriberArnOf(request.EventBusArn, request.Name),
        Name: request.Name,
        EventBusArn: request.EventBusArn,
        Type: request.Type,
        StartingPosition: request.StartingPosition,
        PointInTimeConfiguration: input.PointInTimeConfiguration,
        State: "RUNNING",
        CreationTime: new Date(),
      };
      created.set(request.ClientToken, made);
      return made;
    },
  };
}

/** The request as the emulation takes it: the window's timestamps in epoch seconds. */
function pointInTimeRequest(input: Record<string, unknown>): PointInTimeSubscriberRequest {
  const request = input as unknown as PointInTimeSubscriberRequest;
  const window = input.PointInTimeConfiguration as
    | { PointType?: string; StartingPoint?: Date; EndPoint?: Date }
    | undefined;
  if (
    request.StartingPosition !== "POINT_IN_TIME" ||
    !(window?.StartingPoint instanceof Date) ||
    !(window.EndPoint instanceof Date)
  )
    throw new Refusal(
      400,
      "InvalidInputException",
      "the local runtime creates point-in-time subscribers with a TIMESTAMP window only",
    );
  return {
    ...request,
    PointInTimeConfiguration: {
      PointType: "TIMESTAMP",
      StartingPoint: window.StartingPoint.getTime() / 1000,
      EndPoint: window.EndPoint.getTime() / 1000,
    },
  };
}

function refusalOf(error: unknown): Refusal {
  if (error instanceof Refusal) return error;
  const e = error as { name?: string; message?: string; $fault?: string };
  const client = e.$fault === "client";
  return new Refusal(
    client ? 400 : 500,
    client ? (e.name ?? "InvalidInputException") : "InternalException",
    e.message ?? String(error),
  );
}

function reply(response: ServerResponse, status: number, body: object): void {
  const bytes = toCbor(body);
  response.writeHead(status, {
    "smithy-protocol": "rpc-v2-cbor",
    "content-type": "application/cbor",
    "content-length": String(bytes.byteLength),
    "x-amzn-requestid": randomUUID(),
  });
  response.end(bytes);
}

async function bodyOf(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
