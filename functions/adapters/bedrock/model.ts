import type {
  ContentBlock,
  ConverseCommandInput,
  ConverseCommandOutput,
  Message,
  ToolResultContentBlock,
} from "@aws-sdk/client-bedrock-runtime";
import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { type AgentBusError, PermanentError, TransientError } from "../../core/errors";
import type {
  ModelMessage,
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelToolCall,
  ModelToolResult,
} from "../../core/model";
import type { AwsClient } from "../aws/client";
import { Converse } from "../aws/operations";
import { reportModelCall } from "../model-calls";
import { snakeCase } from "../sdk-errors";

export interface BedrockModelProps {
  /**
   * Created once per container and injected. Its own retries (`maxAttempts`, standard mode
   * by default) run before an error reaches us; what is left becomes a TransientError and is
   * retried by the queue's visibility backoff.
   */
  readonly client: AwsClient;
  /** Model id, inference profile id or ARN, from configuration (e.g. the `MODEL_ID` env var). */
  readonly modelId: string;
  /** Inference settings used when a request leaves them out. */
  readonly defaults?: { readonly maxTokens?: number; readonly temperature?: number };
  /**
   * Whether the model constrains its answer to a request's `output` schema (Converse
   * `outputConfig.textFormat`); set at deploy from the model catalog (`MODEL_STRUCTURED_OUTPUT`).
   * A model without it would refuse the field, so it is then left out. @default false
   */
  readonly structuredOutput?: boolean;
}

/**
 * ModelPort over the Bedrock Converse API (`POST /model/{modelId}/converse`).
 *
 * Request (see `converseInput`): the request's tools become `toolConfig.tools[].toolSpec`; each
 * message is its text block (left out when the text is empty and other blocks follow), then a
 * `toolUse` block per tool call (assistant turns) or a `toolResult` block per tool result (user
 * turns: a JSON object as a `json` block, any other value as its JSON text, status `error` or
 * `success`).
 *
 * Structured output: when the model supports it (`structuredOutput`), a request's `output` schema
 * goes as `outputConfig.textFormat` (type `json_schema`, the schema as JSON text) in the subset
 * Bedrock enforces (see `enforceableSchema`); the caller still validates the answer in full.
 *
 * Reply: the text blocks of `output.message.content` concatenated, `toolCalls` from its `toolUse`
 * blocks (id = `toolUseId`; left out when there are none; reasoning blocks are ignored),
 * `stopReason` as reported (`tool_use` when the model asks for tools; a `max_tokens` reply is
 * returned as text like any other: invokeStructured judges it), `usage.inputTokens/outputTokens`,
 * and `metrics.latencyMs` (the service's measure; the wall time of the call when absent). Each
 * answered call is reported to the model call meter (`reportModelCall`, ../model-calls.ts): the
 * consumer publishes its latency and tokens as metrics.
 *
 * Errors (see `modelFailure`): throttling -> TransientError `model.throttled`; outages, timeouts,
 * 5xx and network errors -> TransientError `model.unavailable`; ModelNotReadyException ->
 * TransientError `model.not_ready`; ValidationException, AccessDeniedException and
 * ResourceNotFoundException -> PermanentError `model.validation`, `model.access_denied`,
 * `model.not_found`; any other client error -> PermanentError `model.<snake_case name>`.
 * Messages name the model id.
 */
export class BedrockModel implements ModelPort {
  readonly name: string;
  readonly provider = "aws.bedrock";
  private readonly client: AwsClient;
  private readonly modelId: string;
  private readonly defaults: { readonly maxTokens?: number; readonly temperature?: number };
  private readonly structuredOutput: boolean;

  constructor(props: BedrockModelProps) {
    if (props.modelId.trim() === "")
      throw new PermanentError("model.invalid_config", "BedrockModel needs a non-empty modelId");
    this.client = props.client;
    this.modelId = props.modelId;
    this.name = props.modelId;
    this.defaults = props.defaults ?? {};
    this.structuredOutput = props.structuredOutput ?? false;
  }

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const input = converseInput(this.modelId, request, this.defaults, this.structuredOutput);
    const started = performance.now();
    let output: ConverseCommandOutput;
    try {
      output = await this.client.send(Converse(input));
    } catch (error) {
      throw modelFailure(error, this.modelId);
    }
    const elapsed = Math.round(performance.now() - started);
    const content = output.output?.message?.content ?? [];
    const toolCalls = toolCallsOf(content);
    const response: ModelResponse = {
      text: content.map((block) => block.text ?? "").join(""),
      ...(toolCalls.length === 0 ? {} : { toolCalls }),
      stopReason: output.stopReason ?? "unknown",
      usage: {
        inputTokens: output.usage?.inputTokens ?? 0,
        outputTokens: output.usage?.outputTokens ?? 0,
      },
      modelId: this.modelId,
      latencyMs: output.metrics?.latencyMs ?? elapsed,
    };
    reportModelCall({
      modelId: this.modelId,
      latencyMs: response.latencyMs,
      inputTokens: response.usage.inputTokens,
      outputTokens: response.usage.outputTokens,
    });
    return response;
  }
}

/** The Converse request for one ModelRequest (pure; exported for tests). */
export function converseInput(
  modelId: string,
  request: ModelRequest,
  defaults: { readonly maxTokens?: number; readonly temperature?: number } = {},
  structuredOutput = false,
): ConverseCommandInput {
  const maxTokens = request.maxTokens ?? defaults.maxTokens;
  const temperature = request.temperature ?? defaults.temperature;
  const inferenceConfig = {
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(temperature === undefined ? {} : { temperature }),
  };
  const requestMetadata = metadataOf(request.metadata);
  const outputConfig = structuredOutput ? outputConfigOf(request.output) : undefined;
  return {
    modelId,
    messages: request.messages.map(messageOf),
    ...(request.system === undefined || request.system === ""
      ? {}
      : { system: [{ text: request.system }] }),
    ...(request.tools === undefined || request.tools.length === 0
      ? {}
      : {
          toolConfig: {
            tools: request.tools.map((tool) => ({
              toolSpec: {
                name: tool.name,
                description: tool.description,
                inputSchema: { json: tool.inputSchema as JsonDocument },
              },
            })),
          },
        }),
    ...(Object.keys(inferenceConfig).length === 0 ? {} : { inferenceConfig }),
    ...(requestMetadata === undefined ? {} : { requestMetadata }),
    ...(outputConfig === undefined ? {} : { outputConfig }),
  };
}

/** Converse's `outputConfig` for a request's output schema; none when it cannot be enforced. */
function outputConfigOf(output: ModelRequest["output"]): ConverseCommandInput["outputConfig"] {
  const schema = output && enforceableSchema(output.schema);
  if (!output || !schema) return undefined;
  const name = output.name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64) || "answer";
  return {
    textFormat: {
      type: "json_schema",
      structure: { jsonSchema: { name, schema: JSON.stringify(schema) } },
    },
  };
}

/** Keywords Bedrock's structured output does not enforce: left out, named in the description. */
const UNENFORCED = [
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "maxItems",
  "uniqueItems",
  "default",
] as const;

/**
 * A JSON Schema in the subset Bedrock's structured output takes (types, properties, required,
 * items, enum, const, anyOf, `$defs`/`$ref`, `minItems` 0 or 1, objects closed by
 * `additionalProperties: false`): constraints beyond it are left out and named in the
 * description, so the model still reads them and the caller's validation enforces them.
 * Undefined when the schema needs what cannot be left out (an object with open or typed extra
 * properties, such as a record): structured output is then not asked for.
 */
export function enforceableSchema(schema: unknown): Record<string, unknown> | undefined {
  if (Array.isArray(schema)) {
    const items = schema.map(enforceableSchema);
    return items.every((i) => i !== undefined) ? (items as never) : undefined;
  }
  if (typeof schema !== "object" || schema === null) return schema as never;
  const node = { ...(schema as Record<string, unknown>) };
  const dropped: string[] = [];
  for (const key of UNENFORCED)
    if (key in node) {
      dropped.push(`${key} ${JSON.stringify(node[key])}`);
      delete node[key];
    }
  if (typeof node.minItems === "number" && node.minItems > 1) {
    dropped.push(`minItems ${node.minItems}`);
    node.minItems = 1;
  }
  if (node.type === "object" || node.properties !== undefined) {
    if (node.additionalProperties !== undefined && node.additionalProperties !== false)
      return undefined;
    node.additionalProperties = false;
  }
  if (dropped.length > 0)
    node.description = [node.description, `(${dropped.join(", ")})`].filter(Boolean).join(" ");
  for (const key of ["properties", "$defs"] as const) {
    const members = node[key] as Record<string, unknown> | undefined;
    if (members === undefined) continue;
    const entries = Object.entries(members).map(([k, v]) => [k, enforceableSchema(v)] as const);
    if (entries.some(([, v]) => v === undefined)) return undefined;
    node[key] = Object.fromEntries(entries);
  }
  if (node.oneOf !== undefined) {
    // An answer that fits one member fits `anyOf` too; the caller's validation keeps "exactly one".
    node.anyOf = node.oneOf;
    delete node.oneOf;
  }
  for (const key of ["items", "anyOf", "allOf"] as const) {
    if (node[key] === undefined) continue;
    const converted = enforceableSchema(node[key]);
    if (converted === undefined) return undefined;
    node[key] = converted;
  }
  return node;
}

/** A JSON value as the SDK types it (its `DocumentType`). */
type JsonDocument = NonNullable<ToolResultContentBlock.JsonMember["json"]>;

/**
 * One Converse message: the text block (Bedrock rejects an empty one, so it is left out when
 * other blocks follow; a message keeps at least one block), then the tool calls (assistant) or
 * tool results (user).
 */
function messageOf(message: ModelMessage): Message {
  const blocks: ContentBlock[] = [
    ...(message.toolCalls ?? []).map(toolUseBlock),
    ...(message.toolResults ?? []).map(toolResultBlock),
  ];
  if (message.text !== "" || blocks.length === 0) blocks.unshift({ text: message.text });
  return { role: message.role, content: blocks };
}

function toolUseBlock(call: ModelToolCall): ContentBlock {
  return { toolUse: { toolUseId: call.id, name: call.name, input: call.input as JsonDocument } };
}

/** Converse's `json` result block takes an object only: any other value goes as its JSON text. */
function toolResultBlock(result: ModelToolResult): ContentBlock {
  const value = result.content;
  const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
  return {
    toolResult: {
      toolUseId: result.toolCallId,
      // JSON.stringify gives undefined for undefined (no JSON value): sent as null.
      content: [
        isObject ? { json: value as JsonDocument } : { text: JSON.stringify(value) ?? "null" },
      ],
      status: result.isError === true ? "error" : "success",
    },
  };
}

/** The `toolUse` blocks of a reply, in order, as the port's tool calls. */
function toolCallsOf(content: readonly ContentBlock[]): ModelToolCall[] {
  return content.flatMap((block) =>
    block.toolUse === undefined
      ? []
      : [
          {
            id: block.toolUse.toolUseId ?? "",
            name: block.toolUse.name ?? "",
            input: block.toolUse.input,
          },
        ],
  );
}

/** Converse's `requestMetadata` (filters invocation logs) accepts at most 16 pairs of this form. */
const METADATA_KEY = /^[a-zA-Z0-9\s:_@$#=/+,.-]{1,256}$/;
const METADATA_VALUE = /^[a-zA-Z0-9\s:_@$#=/+,.-]{0,256}$/;

/** The tracing fields Bedrock accepts; a value it would reject is left out rather than failing. */
function metadataOf(metadata: ModelRequest["metadata"]): Record<string, string> | undefined {
  if (metadata === undefined) return undefined;
  const entries = Object.entries(metadata).filter(
    (entry): entry is [string, string] =>
      typeof entry[1] === "string" && METADATA_KEY.test(entry[0]) && METADATA_VALUE.test(entry[1]),
  );
  return entries.length === 0 ? undefined : Object.fromEntries(entries.slice(0, 16));
}

const PERMANENT_CODES: Readonly<Record<string, string>> = {
  ValidationException: "model.validation",
  AccessDeniedException: "model.access_denied",
  ResourceNotFoundException: "model.not_found",
};

const UNAVAILABLE = new Set([
  "ModelTimeoutException",
  "ServiceUnavailableException",
  "InternalServerException",
  "ModelErrorException",
]);

/** Maps an AWS or network error of a Converse call to our error classes (exported for tests). */
export function modelFailure(error: unknown, modelId: string): AgentBusError {
  const e = (typeof error === "object" && error !== null ? error : {}) as Parameters<
    typeof isThrottlingError
  >[0] & { $fault?: string };
  const name = error instanceof Error ? error.name : "Error";
  const detail = error instanceof Error ? error.message : String(error);
  const message = `Bedrock Converse with model ${modelId} failed: ${name}: ${detail}`;
  const options = { cause: error, details: { model_id: modelId, error_name: name } };

  if (name === "ModelNotReadyException")
    return new TransientError("model.not_ready", message, options);
  if (name === "ServiceQuotaExceededException" || isThrottlingError(e))
    return new TransientError("model.throttled", message, options);
  if (UNAVAILABLE.has(name)) return new TransientError("model.unavailable", message, options);
  const permanent = PERMANENT_CODES[name];
  if (permanent !== undefined) return new PermanentError(permanent, message, options);
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError("model.unavailable", message, options);
  return new PermanentError(`model.${snakeCase(name)}`, message, options);
}
