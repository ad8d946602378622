import { createHash, createHmac } from "node:crypto";
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import type { AwsService } from "../../../functions/adapters/aws/client";
import { queryBody, snsErrorName } from "../../../functions/adapters/aws/lean/query";
import { endpointOf, SERVICES } from "../../../functions/adapters/aws/lean/services";
import {
  type HttpRequestLike,
  LeanAwsClient,
  type LeanClientOptions,
} from "../../../functions/adapters/aws/lean-client";
import { Converse, GetItem, Publish, PutEvents } from "../../../functions/adapters/aws/operations";

const CREDENTIALS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG" };

interface Reply {
  readonly status: number;
  readonly body: string;
  readonly headers?: Record<string, string>;
}

/** A client whose HTTP layer records each request and answers from `replies` in turn. */
function recording(replies: (Reply | Error)[], options: LeanClientOptions = {}) {
  const requests: HttpRequestLike[] = [];
  const client = new LeanAwsClient({
    region: "eu-west-1",
    credentials: CREDENTIALS,
    env: {},
    ...options,
    http: {
      async handle(request) {
        requests.push(request);
        const reply = replies[Math.min(requests.length, replies.length) - 1];
        if (!reply) throw new Error("no reply");
        if (reply instanceof Error) throw reply;
        return {
          response: {
            statusCode: reply.status,
            headers: { "x-amzn-requestid": `req-${requests.length}`, ...reply.headers },
            body: Readable.from([Buffer.from(reply.body)]),
          },
        };
      },
    },
  });
  return { client, requests };
}

const hex = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) =>
  createHmac("sha256", key).update(data).digest();

/**
 * The SigV4 signature of a request, computed here from the specification (canonical request,
 * string to sign, derived key), independently of the signer the client uses.
 */
function expectedSignature(request: HttpRequestLike, secret: string, scope: string): string {
  const auth = request.headers.authorization ?? "";
  const signed = /SignedHeaders=([^,]+)/.exec(auth)?.[1]?.split(";") ?? [];
  const header = (name: string) =>
    Object.entries(request.headers)
      .find(([k]) => k.toLowerCase() === name)?.[1]
      ?.trim() ?? "";
  const path = request.path
    .split("/")
    .map((segment) =>
      encodeURIComponent(segment).replace(
        /[!'()*]/g,
        (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join("/");
  const canonical = [
    request.method,
    path,
    "",
    ...signed.map((name) => `${name}:${header(name)}`),
    "",
    signed.join(";"),
    hex(request.body),
  ].join("\n");
  const date = header("x-amz-date");
  const toSign = ["AWS4-HMAC-SHA256", date, scope, hex(canonical)].join("\n");
  const [day, region, service] = scope.split("/") as [string, string, string];
  const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), "aws4_request");
  return createHmac("sha256", key).update(toSign).digest("hex");
}

describe("LeanAwsClient requests", () => {
  it("sends a JSON 1.0 call signed by SigV4 for the service's endpoint", async () => {
    const { client, requests } = recording([{ status: 200, body: '{"Item":{"pk":{"S":"a"}}}' }]);
    const output = await client.send(GetItem({ TableName: "t", Key: { pk: { S: "a" } } }));
    expect(output).toMatchObject({ Item: { pk: { S: "a" } } });
    expect(output.$metadata).toMatchObject({
      httpStatusCode: 200,
      requestId: "req-1",
      attempts: 1,
    });
    const [request] = requests as [HttpRequestLike];
    expect(request).toMatchObject({
      method: "POST",
      protocol: "https:",
      hostname: "dynamodb.eu-west-1.amazonaws.com",
      path: "/",
    });
    expect(request.headers).toMatchObject({
      host: "dynamodb.eu-west-1.amazonaws.com",
      "content-type": "application/x-amz-json-1.0",
      "x-amz-target": "DynamoDB_20120810.GetItem",
    });
    expect(JSON.parse(String(request.body))).toEqual({ TableName: "t", Key: { pk: { S: "a" } } });
    const auth = request.headers.authorization ?? "";
    const scope = /Credential=AKIDEXAMPLE\/([^,]+),/.exec(auth)?.[1] ?? "";
    expect(scope).toMatch(/^\d{8}\/eu-west-1\/dynamodb\/aws4_request$/);
    expect(auth).toMatch(/SignedHeaders=[^,]*content-type;host;[^,]*x-amz-date;x-amz-target/);
    expect(/Signature=([0-9a-f]{64})/.exec(auth)?.[1]).toBe(
      expectedSignature(request, CREDENTIALS.secretAccessKey, scope),
    );
  });

  it("signs with the session token and each service's signing name", async () => {
    const { client, requests } = recording(
      [
        { status: 200, body: '{"FailedEntryCount":0,"Entries":[]}' },
        { status: 200, body: '{"output":{"message":{"role":"assistant","content":[]}}}' },
      ],
      { credentials: { ...CREDENTIALS, sessionToken: "TOKEN" } },
    );
    await client.send(PutEvents({ Entries: [{ Time: new Date(1_700_000_000_500) }] }));
    await client.send(Converse({ modelId: "anthropic.claude-v2:1", messages: [] }));
    const [events, bedrock] = requests as [HttpRequestLike, HttpRequestLike];
    expect(events.headers["x-amz-target"]).toBe("AWSEvents.PutEvents");
    expect(events.headers["content-type"]).toBe("application/x-amz-json-1.1");
    expect(JSON.parse(String(events.body))).toEqual({ Entries: [{ Time: 1_700_000_000.5 }] });
    expect(events.headers["x-amz-security-token"]).toBe("TOKEN");
    expect(events.headers.authorization).toMatch(/\/eu-west-1\/events\/aws4_request/);
    expect(bedrock.hostname).toBe("bedrock-runtime.eu-west-1.amazonaws.com");
    expect(bedrock.path).toBe("/model/anthropic.claude-v2%3A1/converse");
    expect(JSON.parse(String(bedrock.body))).toEqual({ messages: [] });
    expect(bedrock.headers.authorization).toMatch(/\/eu-west-1\/bedrock\/aws4_request/);
    const scope = /Credential=AKIDEXAMPLE\/([^,]+),/.exec(bedrock.headers.authorization ?? "")?.[1];
    expect(/Signature=([0-9a-f]{64})/.exec(bedrock.headers.authorization ?? "")?.[1]).toBe(
      expectedSignature(bedrock, CREDENTIALS.secretAccessKey, scope ?? ""),
    );
  });

  it("takes credentials and region from the environment, and says which are missing", async () => {
    const env = { AWS_REGION: "us-east-2", AWS_ACCESS_KEY_ID: "AK", AWS_SECRET_ACCESS_KEY: "S" };
    const { client, requests } = recording([{ status: 200, body: "{}" }], {
      region: undefined,
      credentials: undefined,
      env,
    });
    await client.send(GetItem({ TableName: "t", Key: {} }));
    expect(requests[0]?.headers.authorization).toMatch(/Credential=AK\/\d{8}\/us-east-2\//);
    const bare = recording([{ status: 200, body: "{}" }], {
      region: undefined,
      credentials: undefined,
    });
    await expect(bare.client.send(GetItem({ TableName: "t", Key: {} }))).rejects.toThrow(
      /no AWS region: set AWS_REGION/,
    );
    const keyless = recording([{ status: 200, body: "{}" }], { credentials: undefined });
    await expect(keyless.client.send(GetItem({ TableName: "t", Key: {} }))).rejects.toThrow(
      /neither AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY .* nor AWS_CONTAINER_CREDENTIALS_FULL_URI/,
    );
  });
});

describe("LeanAwsClient retries and errors", () => {
  const throttled = {
    status: 400,
    body: '{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}',
  };

  it("retries throttling and transient failures as the SDK does, and reports the attempts", async () => {
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const { client, requests } = recording([throttled, reset, { status: 200, body: "{}" }]);
    const output = await client.send(GetItem({ TableName: "t", Key: {} }));
    expect(requests).toHaveLength(3);
    expect(output.$metadata.attempts).toBe(3);
    expect(output.$metadata.totalRetryDelay).toBeGreaterThan(0);
  });

  it("gives up after the attempts allowed, with the service's error", async () => {
    const { client, requests } = recording([throttled], { maxAttempts: 2 });
    const error = await client.send(GetItem({ TableName: "t", Key: {} })).catch((e) => e);
    expect(requests).toHaveLength(2);
    expect(error).toBeInstanceOf(Error);
    expect(error).toMatchObject({
      name: "ProvisionedThroughputExceededException",
      message: "slow down",
      $fault: "client",
      $metadata: { httpStatusCode: 400, requestId: "req-2", attempts: 2 },
    });
  });

  it("does not retry a client error, and keeps the error's fields", async () => {
    const { client, requests } = recording([
      {
        status: 400,
        body: '{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"cancelled","CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Item":{"b":{"B":"AAE="}}}]}',
      },
    ]);
    const error = await client.send(GetItem({ TableName: "t", Key: {} })).catch((e) => e);
    expect(requests).toHaveLength(1);
    expect(error.name).toBe("TransactionCanceledException");
    expect(error.message).toBe("cancelled");
    expect(error.CancellationReasons[1].Item.b.B).toEqual(new Uint8Array([0, 1]));
  });

  it("names a server fault and an error given only by its header", async () => {
    const { client } = recording(
      [
        {
          status: 503,
          body: "",
          headers: { "x-amzn-errortype": "ServiceUnavailableException:http://internal/" },
        },
      ],
      { maxAttempts: 1 },
    );
    const error = await client.send(Converse({ modelId: "m", messages: [] })).catch((e) => e);
    expect(error).toMatchObject({ name: "ServiceUnavailableException", $fault: "server" });
  });

  it("corrects its clock from the service's Date header and retries a call refused as skewed", async () => {
    const ahead = 3_600_000;
    const serverDate = () => new Date(Date.now() + ahead).toUTCString();
    const skewed = {
      status: 400,
      body: '{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"Signature expired"}',
    };
    const { client, requests } = recording([
      { ...skewed, headers: { date: serverDate() } },
      { status: 200, body: "{}", headers: { date: serverDate() } },
      { status: 200, body: "{}" },
    ]);
    const output = await client.send(GetItem({ TableName: "t", Key: {} }));
    expect(requests).toHaveLength(2);
    expect(output.$metadata.attempts).toBe(2);
    const signedAt = (r: HttpRequestLike | undefined) => {
      const stamp = r?.headers["x-amz-date"] ?? "";
      return Date.parse(
        stamp.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, "$1-$2-$3T$4:$5:$6Z"),
      );
    };
    // The first request was signed by this machine's clock, the retry by the service's.
    expect(Math.abs(signedAt(requests[0]) - Date.now())).toBeLessThan(60_000);
    expect(Math.abs(signedAt(requests[1]) - (Date.now() + ahead))).toBeLessThan(60_000);
    // Later calls keep the offset.
    await client.send(GetItem({ TableName: "t", Key: {} }));
    expect(Math.abs(signedAt(requests[2]) - (Date.now() + ahead))).toBeLessThan(60_000);
  });

  it("does not retry a refused signature when the clocks agree, nor trust a cached answer's date", async () => {
    const refused = {
      status: 403,
      body: '{"__type":"com.amazon.coral.service#InvalidSignatureException","message":"bad signature"}',
    };
    const agreeing = recording([{ ...refused, headers: { date: new Date().toUTCString() } }]);
    const error = await agreeing.client.send(GetItem({ TableName: "t", Key: {} })).catch((e) => e);
    expect(agreeing.requests).toHaveLength(1);
    expect(error).toMatchObject({ name: "InvalidSignatureException", $metadata: { attempts: 1 } });
    const far = new Date(Date.now() + 3_600_000).toUTCString();
    const cached = recording([{ ...refused, headers: { date: far, age: "10" } }]);
    await cached.client.send(GetItem({ TableName: "t", Key: {} })).catch((e) => e);
    expect(cached.requests).toHaveLength(1);
  });

  it("reads an SNS query error", async () => {
    const xml =
      "<ErrorResponse><Error><Type>Sender</Type><Code>NotFound</Code><Message>Topic does not exist</Message></Error><RequestId>r-9</RequestId></ErrorResponse>";
    const { client } = recording([{ status: 404, body: xml, headers: { "x-amzn-requestid": "" } }]);
    const error = await client
      .send(Publish({ TopicArn: "arn:aws:sns:eu-west-1:1:t", Message: "m" }))
      .catch((e) => e);
    expect(error).toMatchObject({ name: "NotFoundException", message: "Topic does not exist" });
  });
});

describe("query protocol and endpoints", () => {
  it("flattens a Publish as the query protocol does", () => {
    const form = new URLSearchParams(
      queryBody("Publish", "2010-03-31", {
        TopicArn: "arn:t",
        Message: "a&b",
        MessageAttributes: {
          k: { DataType: "String", StringValue: "v" },
          bin: { DataType: "Binary", BinaryValue: new Uint8Array([1, 2]) },
        },
      }),
    );
    expect(Object.fromEntries(form)).toEqual({
      Action: "Publish",
      Version: "2010-03-31",
      TopicArn: "arn:t",
      Message: "a&b",
      "MessageAttributes.entry.1.Name": "k",
      "MessageAttributes.entry.1.Value.DataType": "String",
      "MessageAttributes.entry.1.Value.StringValue": "v",
      "MessageAttributes.entry.2.Name": "bin",
      "MessageAttributes.entry.2.Value.DataType": "Binary",
      "MessageAttributes.entry.2.Value.BinaryValue": "AQI=",
    });
  });

  it("names SNS errors as the SDK does", () => {
    expect(snsErrorName("NotFound")).toBe("NotFoundException");
    expect(snsErrorName("ParameterValueInvalid")).toBe("InvalidParameterValueException");
    expect(snsErrorName("Throttling")).toBe("Throttling");
  });

  it("resolves endpoints as the SDK does: given, per service, global, FIPS, partition", () => {
    expect(endpointOf("sqs", "eu-west-1", {}).href).toBe("https://sqs.eu-west-1.amazonaws.com/");
    expect(endpointOf("events", "cn-north-1", {}).host).toBe("events.cn-north-1.amazonaws.com.cn");
    expect(endpointOf("sns", "us-east-1", { AWS_USE_FIPS_ENDPOINT: "true" }).host).toBe(
      "sns-fips.us-east-1.amazonaws.com",
    );
    const env = {
      AWS_ENDPOINT_URL: "http://127.0.0.1:5000",
      AWS_ENDPOINT_URL_DYNAMODB: "http://127.0.0.1:8000",
    };
    expect(endpointOf("dynamodb", "us-east-1", env).href).toBe("http://127.0.0.1:8000/");
    expect(endpointOf("sqs", "us-east-1", env).href).toBe("http://127.0.0.1:5000/");
    expect(endpointOf("sqs", "us-east-1", env, "http://127.0.0.1:1/").port).toBe("1");
  });
});

describe("errors the services' models mark retryable", () => {
  /** Every error class an SDK client module exports whose instances carry `$retryable`. */
  function sdkRetryable(module: Record<string, unknown>): string[] {
    const names: string[] = [];
    for (const [name, value] of Object.entries(module)) {
      if (typeof value !== "function" || (!name.endsWith("Exception") && !name.endsWith("Error")))
        continue;
      const Class = value as new (options: object) => { $fault?: string; $retryable?: object };
      let instance: { $fault?: string; $retryable?: object };
      try {
        instance = new Class({ message: "m", $metadata: {} });
      } catch {
        continue;
      }
      if (instance.$fault && instance.$retryable !== undefined) names.push(name);
    }
    return names.sort();
  }

  it("lists for each service the errors the SDK's models mark retryable", async () => {
    const modules = {
      dynamodb: await import("@aws-sdk/client-dynamodb"),
      sqs: await import("@aws-sdk/client-sqs"),
      sns: await import("@aws-sdk/client-sns"),
      events: await import("@aws-sdk/client-eventbridge"),
      "bedrock-runtime": await import("@aws-sdk/client-bedrock-runtime"),
      kms: await import("@aws-sdk/client-kms"),
    } as const;
    // eventbridgev2 has no SDK client to compare with: its model marks no error retryable
    // (aws/aws-sdk-ruby client_api.rb), and the lean client lists none.
    expect(SERVICES.eventsv2.retryableErrors).toBeUndefined();
    expect(Object.keys(modules).sort()).toEqual(
      Object.keys(SERVICES)
        .filter((s) => s !== "eventsv2")
        .sort(),
    );
    for (const [service, module] of Object.entries(modules)) {
      const lean = [...(SERVICES[service as AwsService].retryableErrors ?? [])].sort();
      expect({ service, retryable: lean }).toEqual({ service, retryable: sdkRetryable(module) });
    }
    expect(SERVICES.dynamodb.retryableErrors).toContain("ReplicatedWriteConflictException");
  });

  it("retries them, and says so on the error as the SDK does", async () => {
    const conflict = {
      status: 400,
      body: '{"__type":"com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException","message":"conflict"}',
    };
    const { client, requests } = recording([conflict, { status: 200, body: "{}" }]);
    const output = await client.send(GetItem({ TableName: "t", Key: {} }));
    expect(requests).toHaveLength(2);
    expect(output.$metadata.attempts).toBe(2);
    const once = recording([conflict], { maxAttempts: 1 });
    const error = await once.client.send(GetItem({ TableName: "t", Key: {} })).catch((e) => e);
    expect(error).toMatchObject({ name: "ReplicatedWriteConflictException", $retryable: {} });
    const notReady = recording([
      {
        status: 429,
        body: '{"message":"loading"}',
        headers: { "x-amzn-errortype": "ModelNotReadyException" },
      },
      { status: 200, body: '{"output":{"message":{"role":"assistant","content":[]}}}' },
    ]);
    await notReady.client.send(Converse({ modelId: "m", messages: [] }));
    expect(notReady.requests).toHaveLength(2);
  });
});
