import { Readable } from "node:stream";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { describe, expect, it } from "vitest";
import { GetItem } from "../../functions/adapters/aws/operations";
import { fromSdk } from "../../functions/adapters/aws/sdk-client";
import { daemonAddress, sampledTrace, xrayTracer } from "../../functions/handlers/xray";

const ROOT = "1-5759e988-bd862e3fe1be46a994272793";
const PARENT = "53995c3f42cd8ad8";

/** A Lambda environment with active tracing, as the runtime sets it during an invocation. */
function lambdaEnv(sampled = "1"): Record<string, string> {
  return {
    AWS_EXECUTION_ENV: "AWS_Lambda_nodejs22.x",
    AWS_REGION: "us-east-1",
    AWS_XRAY_DAEMON_ADDRESS: "169.254.79.129:2000",
    _X_AMZN_TRACE_ID: `Root=${ROOT};Parent=${PARENT};Sampled=${sampled};Lineage=a:1`,
  };
}

interface Reply {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

/** An SDK client whose HTTP layer is a fake; it records the trace header of each request. */
function fakeDynamo(reply: Reply) {
  const traceHeaders: string[] = [];
  const sdk = new DynamoDBClient({
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" },
    maxAttempts: 1,
    requestHandler: {
      async handle(request: { headers: Record<string, string> }) {
        traceHeaders.push(request.headers["X-Amzn-Trace-Id"] ?? "");
        return {
          response: {
            statusCode: reply.status,
            headers: { "content-type": "application/x-amz-json-1.0", ...reply.headers },
            body: Readable.from([Buffer.from(JSON.stringify(reply.body))]),
          },
        };
      },
    } as never,
  });
  return { client: fromSdk(sdk), traceHeaders };
}

/** A tracer that hands its datagrams to the test instead of the daemon. */
function capturingTracer(env: Record<string, string>) {
  const sent: { document: Record<string, unknown>; port: number; host: string }[] = [];
  const tracer = xrayTracer({
    env,
    send: (datagram, port, host) => {
      const [header, body] = datagram.split("\n");
      expect(JSON.parse(header ?? "")).toEqual({ format: "json", version: 1 });
      sent.push({ document: JSON.parse(body ?? ""), port, host });
    },
  });
  return { tracer, sent };
}

const getItem = () => GetItem({ TableName: "state", Key: { pk: { S: "task_1" } } });

describe("X-Ray subsegments of AWS calls", () => {
  it("records a call as a subsegment of the invocation, and passes it on as the trace's parent", async () => {
    const { tracer, sent } = capturingTracer(lambdaEnv());
    const { client, traceHeaders } = fakeDynamo({
      status: 200,
      body: { Item: {} },
      headers: { "x-amzn-requestid": "REQ1" },
    });
    await tracer.capture(client).send(getItem());

    expect(sent).toHaveLength(1);
    const [{ document, port, host }] = sent as [(typeof sent)[number]];
    expect({ port, host }).toEqual({ port: 2000, host: "169.254.79.129" });
    expect(document).toMatchObject({
      type: "subsegment",
      name: "DynamoDB",
      namespace: "aws",
      trace_id: ROOT,
      parent_id: PARENT,
      aws: { operation: "GetItem", region: "us-east-1", request_id: "REQ1", table_name: "state" },
      http: { response: { status: 200 } },
    });
    expect(document.id).toMatch(/^[0-9a-f]{16}$/);
    expect(document.end_time as number).toBeGreaterThanOrEqual(document.start_time as number);
    expect(document).not.toHaveProperty("fault");
    expect(traceHeaders).toEqual([`Root=${ROOT};Parent=${document.id};Sampled=1;Lineage=a:1`]);
  });

  it("marks a throttled call as a throttled client error with its cause", async () => {
    const { tracer, sent } = capturingTracer(lambdaEnv());
    const { client } = fakeDynamo({
      status: 400,
      body: {
        __type: "com.amazonaws.dynamodb.v20120810#ThrottlingException",
        message: "slow down",
      },
    });
    await expect(tracer.capture(client).send(getItem())).rejects.toThrow();
    expect(sent[0]?.document).toMatchObject({
      throttle: true,
      error: true,
      http: { response: { status: 400 } },
      cause: { exceptions: [{ type: "ThrottlingException", remote: true }] },
    });
    expect(sent[0]?.document).not.toHaveProperty("fault");
  });

  it("sends nothing for an invocation X-Ray does not sample", async () => {
    const { tracer, sent } = capturingTracer(lambdaEnv("0"));
    const { client, traceHeaders } = fakeDynamo({ status: 200, body: {} });
    await tracer.capture(client).send(getItem());
    expect(sent).toEqual([]);
    expect(traceHeaders).toEqual([""]);
  });

  it("traces a call once however often its client is captured", async () => {
    const { tracer, sent } = capturingTracer(lambdaEnv());
    const { client, traceHeaders } = fakeDynamo({ status: 200, body: {} });
    const once = tracer.capture(client);
    expect(tracer.capture(once)).toBe(once);
    await tracer.capture(once).send(getItem());
    expect(sent).toHaveLength(1);
    expect(traceHeaders).toHaveLength(1);
  });

  it.each([
    ["outside Lambda", { ...lambdaEnv(), AWS_EXECUTION_ENV: "" }],
    ["without a daemon address", { ...lambdaEnv(), AWS_XRAY_DAEMON_ADDRESS: "" }],
    ["when POWERTOOLS_TRACE_ENABLED=false", { ...lambdaEnv(), POWERTOOLS_TRACE_ENABLED: "false" }],
  ])("leaves clients untouched %s", (_, env) => {
    const { tracer } = capturingTracer(env);
    const { client } = fakeDynamo({ status: 200, body: {} });
    expect(tracer.capture(client)).toBe(client);
  });
});

describe("trace header and daemon address", () => {
  it("reads the root and parent of a sampled trace only", () => {
    expect(sampledTrace(`Root=${ROOT};Parent=${PARENT};Sampled=1`)).toEqual({
      root: ROOT,
      parent: PARENT,
    });
    expect(sampledTrace(`Root=${ROOT};Parent=${PARENT};Sampled=0`)).toBeUndefined();
    expect(sampledTrace(`Root=${ROOT};Sampled=1`)).toBeUndefined();
    expect(sampledTrace(undefined)).toBeUndefined();
  });

  it("takes the UDP address of either form of AWS_XRAY_DAEMON_ADDRESS", () => {
    expect(daemonAddress("169.254.79.129:2000")).toEqual({ host: "169.254.79.129", port: 2000 });
    expect(daemonAddress("tcp:127.0.0.1:2001 udp:127.0.0.1:2000")).toEqual({
      host: "127.0.0.1",
      port: 2000,
    });
    expect(daemonAddress("")).toBeUndefined();
  });
});
