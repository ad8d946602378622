import { Readable } from "node:stream";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { HttpResponse } from "@smithy/core/transport";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { BedrockModel, converseInput, modelFailure } from "../../functions/adapters/bedrock/model";
import { AgentBusError } from "../../functions/core/errors";
import { invokeStructured, type ModelRequest } from "../../functions/core/model";
import { fromSdk } from "../../lib/operator/from-sdk";

const MODEL_ID = "anthropic.claude-3-haiku-20240307-v1:0";

interface Reply {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

interface SeenRequest {
  readonly method: string;
  readonly path: string;
  readonly body: Record<string, unknown>;
}

/**
 * A BedrockRuntimeClient whose HTTP layer is a fake: the real SDK serializes the Converse request
 * and deserializes the canned response (or error), no network involved. SDK retries are off so an
 * error reaches the adapter on the first try.
 */
function fakeBedrock(replies: readonly (Reply | Error)[]) {
  const seen: SeenRequest[] = [];
  const client = new BedrockRuntimeClient({
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" },
    maxAttempts: 1,
    requestHandler: {
      async handle(request: { method: string; path: string; body?: unknown }) {
        const raw = request.body;
        const text =
          typeof raw === "string"
            ? raw
            : raw instanceof Uint8Array
              ? new TextDecoder().decode(raw)
              : "";
        seen.push({
          method: request.method,
          path: decodeURIComponent(request.path),
          body: JSON.parse(text || "{}") as Record<string, unknown>,
        });
        const reply = replies[seen.length - 1];
        if (reply === undefined) throw new Error(`unexpected request ${seen.length}`);
        if (reply instanceof Error) throw reply;
        return {
          response: new HttpResponse({
            statusCode: reply.status,
            headers: { "content-type": "application/json", ...reply.headers },
            body: Readable.from([Buffer.from(JSON.stringify(reply.body))]),
          }),
        };
      },
    },
  });
  return { client, seen };
}

function ok(text: string, extra: Record<string, unknown> = {}): Reply {
  return {
    status: 200,
    body: {
      output: { message: { role: "assistant", content: [{ text }] } },
      stopReason: "end_turn",
      usage: { inputTokens: 21, outputTokens: 7, totalTokens: 28 },
      metrics: { latencyMs: 345 },
      ...extra,
    },
  };
}

function awsError(status: number, type: string, message: string): Reply {
  return { status, headers: { "x-amzn-errortype": type }, body: { message } };
}

const request: ModelRequest = {
  system: "You are the writer. Answer with JSON only.",
  messages: [
    { role: "user", text: "Write about grid storage." },
    { role: "assistant", text: "Which angle?" },
    { role: "user", text: "Costs." },
  ],
  maxTokens: 512,
  metadata: { role: "writing", task_id: "task-01J", correlation_id: "corr-01J" },
};

async function failure(reply: Reply | Error): Promise<AgentBusError> {
  const { client } = fakeBedrock([reply]);
  const error = await new BedrockModel({ client: fromSdk(client), modelId: MODEL_ID })
    .converse(request)
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(AgentBusError);
  return error as AgentBusError;
}

describe("BedrockModel (Converse through a fake HTTP handler)", () => {
  it("sends a Converse request for the model with the system prompt, messages and settings", async () => {
    const { client, seen } = fakeBedrock([ok("hello")]);
    const model = new BedrockModel({
      client: fromSdk(client),
      modelId: MODEL_ID,
      defaults: { maxTokens: 1024, temperature: 0.2 },
    });
    expect(model.name).toBe(MODEL_ID);
    await model.converse(request);

    expect(seen).toHaveLength(1);
    const sent = seen[0];
    expect(sent?.method).toBe("POST");
    expect(sent?.path).toContain(`/model/${MODEL_ID}/converse`);
    expect(sent?.body).toEqual({
      system: [{ text: "You are the writer. Answer with JSON only." }],
      messages: [
        { role: "user", content: [{ text: "Write about grid storage." }] },
        { role: "assistant", content: [{ text: "Which angle?" }] },
        { role: "user", content: [{ text: "Costs." }] },
      ],
      // The request's maxTokens wins over the default; temperature falls back to it.
      inferenceConfig: { maxTokens: 512, temperature: 0.2 },
      requestMetadata: { role: "writing", task_id: "task-01J", correlation_id: "corr-01J" },
    });
  });

  it("leaves out what the request does not set and metadata Bedrock would reject", async () => {
    const { client, seen } = fakeBedrock([ok("hi")]);
    await new BedrockModel({ client: fromSdk(client), modelId: MODEL_ID }).converse({
      messages: [{ role: "user", text: "hi" }],
      metadata: { role: "writing", task_id: "bad\u0000id<>" },
    });
    expect(seen[0]?.body).toEqual({
      messages: [{ role: "user", content: [{ text: "hi" }] }],
      requestMetadata: { role: "writing" },
    });
  });

  it("maps a 200 response: text blocks, stop reason, usage, latency", async () => {
    const { client } = fakeBedrock([
      ok("", {
        output: {
          message: {
            role: "assistant",
            content: [{ text: '{"title":' }, { text: '"Grid"}' }],
          },
        },
        stopReason: "max_tokens",
      }),
    ]);
    const response = await new BedrockModel({
      client: fromSdk(client),
      modelId: MODEL_ID,
    }).converse(request);
    expect(response).toEqual({
      text: '{"title":"Grid"}',
      stopReason: "max_tokens",
      usage: { inputTokens: 21, outputTokens: 7 },
      modelId: MODEL_ID,
      latencyMs: 345,
    });
  });

  it("feeds invokeStructured: a truncated max_tokens reply is just invalid text, then re-asked", async () => {
    const { client, seen } = fakeBedrock([
      ok('{"title": "Grid', { stopReason: "max_tokens" }),
      ok('```json\n{"title": "Grid storage", "body": "..."}\n```'),
    ]);
    const model = new BedrockModel({ client: fromSdk(client), modelId: MODEL_ID });
    const result = await invokeStructured(
      model,
      request,
      z.object({ title: z.string(), body: z.string() }),
    );
    expect(result.attempts).toBe(2);
    expect(result.value.title).toBe("Grid storage");
    const messages = seen[1]?.body.messages as { role: string }[];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant", "user"]);
  });

  it("maps 429 ThrottlingException to transient model.throttled", async () => {
    const error = await failure(awsError(429, "ThrottlingException", "Too many requests"));
    expect(error.errorClass).toBe("transient");
    expect(error.code).toBe("model.throttled");
    expect(error.message).toContain(MODEL_ID);
  });

  it("maps ServiceQuotaExceededException to transient model.throttled", async () => {
    const error = await failure(awsError(400, "ServiceQuotaExceededException", "quota"));
    expect(error).toMatchObject({ errorClass: "transient", code: "model.throttled" });
  });

  it("maps 400 ValidationException (named in the body's __type) to permanent model.validation", async () => {
    const error = await failure({
      status: 400,
      body: {
        __type: "com.amazon.bedrock#ValidationException",
        message: "The model returned the following errors: messages: roles must alternate",
      },
    });
    expect(error.errorClass).toBe("permanent");
    expect(error.code).toBe("model.validation");
    expect(error.message).toContain(MODEL_ID);
    expect(error.details).toMatchObject({ model_id: MODEL_ID, error_name: "ValidationException" });
  });

  it("maps AccessDenied and ResourceNotFound to permanent errors naming the model", async () => {
    const denied = await failure(awsError(403, "AccessDeniedException", "no access"));
    expect(denied).toMatchObject({ errorClass: "permanent", code: "model.access_denied" });
    const missing = await failure(awsError(404, "ResourceNotFoundException", "no such model"));
    expect(missing).toMatchObject({ errorClass: "permanent", code: "model.not_found" });
    expect(missing.message).toContain(MODEL_ID);
  });

  it("maps 503 (typed or not), 500, ModelTimeout and ModelError to transient model.unavailable", async () => {
    for (const reply of [
      { status: 503, body: { message: "Service Unavailable" } },
      awsError(503, "ServiceUnavailableException", "down"),
      awsError(500, "InternalServerException", "oops"),
      awsError(408, "ModelTimeoutException", "took too long"),
      awsError(424, "ModelErrorException", "model failed"),
    ]) {
      const error = await failure(reply);
      expect(error).toMatchObject({ errorClass: "transient", code: "model.unavailable" });
    }
  });

  it("maps ModelNotReadyException to transient model.not_ready", async () => {
    const error = await failure(awsError(429, "ModelNotReadyException", "warming up"));
    expect(error).toMatchObject({ errorClass: "transient", code: "model.not_ready" });
  });

  it("maps a network failure to transient model.unavailable", async () => {
    const reset = Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
    const error = await failure(reset);
    expect(error).toMatchObject({ errorClass: "transient", code: "model.unavailable" });
    expect(error.cause).toBe(reset);
  });

  it("maps any other client error to a permanent model.<name> code", () => {
    const conflict = Object.assign(new Error("busy"), {
      name: "ConflictException",
      $fault: "client",
      $metadata: { httpStatusCode: 409 },
    });
    expect(modelFailure(conflict, MODEL_ID)).toMatchObject({
      errorClass: "permanent",
      code: "model.conflict",
    });
    expect(modelFailure("boom", MODEL_ID)).toMatchObject({
      errorClass: "transient",
      code: "model.unavailable",
    });
  });

  it("refuses an empty model id", () => {
    const { client } = fakeBedrock([]);
    expect(() => new BedrockModel({ client: fromSdk(client), modelId: " " })).toThrow(/modelId/);
  });
});

const lookupTool = {
  name: "lookup_order",
  description: "Find an order by its id.",
  inputSchema: {
    type: "object",
    properties: { order_id: { type: "string" } },
    required: ["order_id"],
  },
};

/** A conversation through two rounds of tool use, with every kind of result. */
const toolRequest: ModelRequest = {
  messages: [
    { role: "user", text: "Where is order 42?" },
    {
      role: "assistant",
      text: "Let me look.",
      toolCalls: [{ id: "tooluse_1", name: "lookup_order", input: { order_id: "42" } }],
    },
    {
      role: "user",
      text: "",
      toolResults: [{ toolCallId: "tooluse_1", content: { status: "shipped", items: [1, 2] } }],
    },
    {
      role: "assistant",
      text: "",
      toolCalls: [
        { id: "tooluse_2", name: "lookup_order", input: { order_id: "43" } },
        { id: "tooluse_3", name: "lookup_order", input: { order_id: "44" } },
        { id: "tooluse_4", name: "lookup_order", input: { order_id: "45" } },
      ],
    },
    {
      role: "user",
      text: "Here they are.",
      toolResults: [
        { toolCallId: "tooluse_2", content: ["a", 1] },
        { toolCallId: "tooluse_3", content: "no such order", isError: true },
        { toolCallId: "tooluse_4", content: { reason: "timeout" }, isError: true },
      ],
    },
  ],
  tools: [lookupTool],
};

/** The Converse messages of toolRequest, as sent on the wire. */
const toolMessages = [
  { role: "user", content: [{ text: "Where is order 42?" }] },
  {
    role: "assistant",
    content: [
      { text: "Let me look." },
      { toolUse: { toolUseId: "tooluse_1", name: "lookup_order", input: { order_id: "42" } } },
    ],
  },
  {
    // No text block: the text is empty.
    role: "user",
    content: [
      {
        toolResult: {
          toolUseId: "tooluse_1",
          content: [{ json: { status: "shipped", items: [1, 2] } }],
          status: "success",
        },
      },
    ],
  },
  {
    role: "assistant",
    content: [
      { toolUse: { toolUseId: "tooluse_2", name: "lookup_order", input: { order_id: "43" } } },
      { toolUse: { toolUseId: "tooluse_3", name: "lookup_order", input: { order_id: "44" } } },
      { toolUse: { toolUseId: "tooluse_4", name: "lookup_order", input: { order_id: "45" } } },
    ],
  },
  {
    role: "user",
    content: [
      { text: "Here they are." },
      // An array is no JSON object: it goes as text.
      { toolResult: { toolUseId: "tooluse_2", content: [{ text: '["a",1]' }], status: "success" } },
      {
        toolResult: {
          toolUseId: "tooluse_3",
          content: [{ text: '"no such order"' }],
          status: "error",
        },
      },
      {
        toolResult: {
          toolUseId: "tooluse_4",
          content: [{ json: { reason: "timeout" } }],
          status: "error",
        },
      },
    ],
  },
];

const toolConfig = {
  tools: [
    {
      toolSpec: {
        name: "lookup_order",
        description: "Find an order by its id.",
        inputSchema: { json: lookupTool.inputSchema },
      },
    },
  ],
};

describe("BedrockModel tool use", () => {
  it("converseInput offers the request's tools as toolConfig toolSpecs", () => {
    const input = converseInput(MODEL_ID, {
      messages: [{ role: "user", text: "Where is order 42?" }],
      tools: [lookupTool, { name: "noop", description: "Nothing.", inputSchema: {} }],
    });
    expect(input).toStrictEqual({
      modelId: MODEL_ID,
      messages: [{ role: "user", content: [{ text: "Where is order 42?" }] }],
      toolConfig: {
        tools: [
          ...toolConfig.tools,
          { toolSpec: { name: "noop", description: "Nothing.", inputSchema: { json: {} } } },
        ],
      },
    });
  });

  it("converseInput sends no toolConfig for no tools, and an empty text block when nothing else is there", () => {
    const input = converseInput(MODEL_ID, {
      messages: [
        { role: "user", text: "", toolResults: [] },
        { role: "assistant", text: "", toolCalls: [] },
      ],
      tools: [],
    });
    expect(input).not.toHaveProperty("toolConfig");
    expect(input.messages).toStrictEqual([
      { role: "user", content: [{ text: "" }] },
      { role: "assistant", content: [{ text: "" }] },
    ]);
  });

  it("converseInput turns tool calls into toolUse blocks and tool results into toolResult blocks", () => {
    const input = converseInput(MODEL_ID, toolRequest);
    expect(input.messages).toStrictEqual(toolMessages);
    expect(input.toolConfig).toStrictEqual(toolConfig);
  });

  it("sends the tool blocks through the SDK's serializer unchanged", async () => {
    const { client, seen } = fakeBedrock([ok("done")]);
    await new BedrockModel({ client: fromSdk(client), modelId: MODEL_ID }).converse(toolRequest);
    expect(seen[0]?.body).toStrictEqual({ messages: toolMessages, toolConfig });
  });

  it("maps toolUse blocks of the reply to toolCalls, in order, next to the text", async () => {
    const { client } = fakeBedrock([
      ok("", {
        output: {
          message: {
            role: "assistant",
            content: [
              { text: "Looking up " },
              {
                toolUse: { toolUseId: "tooluse_a", name: "lookup_order", input: { order_id: "7" } },
              },
              { text: "both." },
              { toolUse: { toolUseId: "tooluse_b", name: "noop", input: {} } },
            ],
          },
        },
        stopReason: "tool_use",
      }),
    ]);
    const response = await new BedrockModel({
      client: fromSdk(client),
      modelId: MODEL_ID,
    }).converse({ ...toolRequest, messages: toolRequest.messages.slice(0, 1) });
    expect(response).toStrictEqual({
      text: "Looking up both.",
      toolCalls: [
        { id: "tooluse_a", name: "lookup_order", input: { order_id: "7" } },
        { id: "tooluse_b", name: "noop", input: {} },
      ],
      stopReason: "tool_use",
      usage: { inputTokens: 21, outputTokens: 7 },
      modelId: MODEL_ID,
      latencyMs: 345,
    });
  });

  it("leaves toolCalls out of a reply without toolUse blocks", async () => {
    const { client } = fakeBedrock([ok("plain")]);
    const response = await new BedrockModel({
      client: fromSdk(client),
      modelId: MODEL_ID,
    }).converse(request);
    expect(response.text).toBe("plain");
    expect(response).not.toHaveProperty("toolCalls");
  });
});

describe("BedrockModel structured output", () => {
  const HAIKU_45 = "global.anthropic.claude-haiku-4-5-20251001-v1:0";
  const answer = {
    type: "object",
    properties: {
      decision: { type: "string", enum: ["approved", "rejected"] },
      reason: { type: "string", minLength: 1, maxLength: 2000 },
      tags: { type: "array", items: { type: "string", pattern: "^[a-z]+$" }, minItems: 2 },
    },
    required: ["decision", "reason"],
  };
  const asked: ModelRequest = {
    messages: [{ role: "user", text: "Decide." }],
    output: { name: "answer", schema: answer },
  };

  it("sends the output schema as outputConfig.textFormat for a model that supports it", () => {
    const input = converseInput(HAIKU_45, asked, {}, true);
    expect(input.outputConfig?.textFormat?.type).toBe("json_schema");
    const structure = input.outputConfig?.textFormat?.structure;
    const sent = structure && "jsonSchema" in structure ? structure.jsonSchema : undefined;
    expect(sent?.name).toBe("answer");
    // Closed objects, and the constraints Bedrock does not enforce named in the description.
    expect(JSON.parse(sent?.schema ?? "{}")).toStrictEqual({
      type: "object",
      additionalProperties: false,
      properties: {
        decision: { type: "string", enum: ["approved", "rejected"] },
        reason: { type: "string", description: "(minLength 1, maxLength 2000)" },
        tags: {
          type: "array",
          items: { type: "string", description: '(pattern "^[a-z]+$")' },
          minItems: 1,
          description: "(minItems 2)",
        },
      },
      required: ["decision", "reason"],
    });
  });

  it("leaves outputConfig out for a model without it, or a schema it cannot enforce", () => {
    expect(converseInput(MODEL_ID, asked, {}, false)).not.toHaveProperty("outputConfig");
    const record: ModelRequest = {
      ...asked,
      output: {
        name: "counts",
        schema: { type: "object", additionalProperties: { type: "integer" } },
      },
    };
    expect(converseInput(HAIKU_45, record, {}, true)).not.toHaveProperty("outputConfig");
    expect(converseInput(HAIKU_45, { messages: asked.messages }, {}, true)).not.toHaveProperty(
      "outputConfig",
    );
  });

  it("goes through the SDK's serializer with the tools, and one of a union becomes anyOf", async () => {
    const { client, seen } = fakeBedrock([ok('{"decision":"approved","reason":"ok"}')]);
    const model = new BedrockModel({
      client: fromSdk(client),
      modelId: HAIKU_45,
      structuredOutput: true,
    });
    await model.converse({
      ...toolRequest,
      output: { name: "either", schema: { oneOf: [answer, { type: "string" }] } },
    });
    const body = seen[0]?.body as {
      outputConfig: { textFormat: { type: string; structure: { jsonSchema: { schema: string } } } };
      toolConfig: unknown;
    };
    expect(body.toolConfig).toStrictEqual(toolConfig);
    expect(body.outputConfig.textFormat.type).toBe("json_schema");
    const schema = JSON.parse(body.outputConfig.textFormat.structure.jsonSchema.schema);
    expect(schema).not.toHaveProperty("oneOf");
    expect(schema.anyOf).toHaveLength(2);
  });

  it("invokeStructured sends the caller's output schema and still validates the answer", async () => {
    const { client, seen } = fakeBedrock([
      ok('{"decision":"maybe"}'),
      ok('{"decision":"approved"}'),
    ]);
    const model = new BedrockModel({
      client: fromSdk(client),
      modelId: HAIKU_45,
      structuredOutput: true,
    });
    const schema = z.object({ decision: z.enum(["approved", "rejected"]) });
    const result = await invokeStructured(model, { messages: asked.messages }, schema, {
      output: { name: "decision", schema: z.toJSONSchema(schema) as Record<string, unknown> },
    });
    expect(result).toMatchObject({ value: { decision: "approved" }, attempts: 2 });
    // The correction keeps the schema.
    expect(seen.map((s) => Object.keys(s.body).includes("outputConfig"))).toEqual([true, true]);
  });
});
