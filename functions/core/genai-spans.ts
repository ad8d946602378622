import {
  type Attributes,
  type Context,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

/**
 * OpenTelemetry spans of the work a model does, named and attributed by the GenAI semantic
 * conventions as `@opentelemetry/semantic-conventions` 1.45.0 exports them (`SEMCONV_VERSION`;
 * test/handlers/telemetry.test.ts checks every name here against that package):
 *
 * - `chat <model>` (client): one model call, with `gen_ai.operation.name` `chat`,
 *   `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`,
 *   `gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons`, and the
 *   request's `max_tokens` and `temperature` when set; `agentbus.model_run_id` for a turn of an
 *   agent run.
 * - `invoke_agent <agent>` (internal): one step of an agent run (a model turn or a tool call:
 *   functions/core/agent/loop.ts), with `gen_ai.agent.name` and the run as
 *   `gen_ai.conversation.id`.
 * - `execute_tool <tool>` (internal): one tool call, with `gen_ai.tool.name`,
 *   `gen_ai.tool.call.id` and `gen_ai.tool.type` `function`.
 *
 * Only the API is used here: with no tracer provider registered (tests, the local runtime unless
 * an OTLP endpoint is set) every span is a no-op. A span never carries a prompt, an answer or a
 * tool's input or output: those hold customers' words (functions/handlers/README.md, "What the
 * logs carry"). A failed call or tool ends its span with status error and the error's code.
 */

/** The semantic conventions the names below follow (the schema URL of the tracer). */
export const SEMCONV_VERSION = "1.45.0";

/** The attribute names used, as the conventions spell them. */
export const GENAI = {
  operationName: "gen_ai.operation.name",
  providerName: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  requestMaxTokens: "gen_ai.request.max_tokens",
  requestTemperature: "gen_ai.request.temperature",
  responseModel: "gen_ai.response.model",
  finishReasons: "gen_ai.response.finish_reasons",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  agentName: "gen_ai.agent.name",
  conversationId: "gen_ai.conversation.id",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  errorType: "error.type",
} as const;

/** `gen_ai.operation.name` values. */
export const GENAI_OPERATIONS = {
  chat: "chat",
  invokeAgent: "invoke_agent",
  executeTool: "execute_tool",
} as const;

/** The provider of a model that does not say (`ModelPort.provider`), as the conventions ask. */
export const OTHER_PROVIDER = "_OTHER";

/** AgentBus's own attributes on these spans. */
export const AGENTBUS_SPAN_ATTRIBUTES = {
  modelRunId: "agentbus.model_run_id",
  taskId: "agentbus.task_id",
  toolEffect: "agentbus.tool.effect",
  toolOutcome: "agentbus.tool.outcome",
} as const;

/** The tracer AgentBus's spans are made by (the global provider's; a no-op without one). */
export function agentbusTracer() {
  return trace.getTracerProvider().getTracer("agentbus", undefined, {
    schemaUrl: `https://opentelemetry.io/schemas/${SEMCONV_VERSION}`,
  });
}

/**
 * Runs `work` inside a new active span (a child of the active one), ended when `work` settles; an
 * error ends it with status error and the error's `code` (or name) as `error.type`, and is
 * rethrown.
 */
export async function inSpan<T>(
  name: string,
  options: { readonly kind: SpanKind; readonly attributes: Attributes; readonly parent?: Context },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const { parent, ...spanOptions } = options;
  const run = async (span: Span) => {
    try {
      return await work(span);
    } catch (error) {
      span.setAttribute(GENAI.errorType, errorTypeOf(error));
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  };
  const tracer = agentbusTracer();
  return parent
    ? tracer.startActiveSpan(name, spanOptions, parent, run)
    : tracer.startActiveSpan(name, spanOptions, run);
}

/** The error's code (AgentBusError), else its name: a failed span's `error.type`. */
export function errorTypeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.name : "Error";
}

/** The attributes without those whose value is undefined. */
function defined(attributes: Record<string, Attributes[string]>): Attributes {
  return Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined));
}

/** What a `chat` span reads of a model call (./model.ts's port, request and response). */
interface ChatCall {
  readonly maxTokens?: number;
  readonly temperature?: number;
  readonly metadata?: { readonly model_run_id?: string; readonly task_id?: string };
}
interface ChatAnswer {
  readonly modelId: string;
  readonly stopReason: string;
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number };
}

/** One model call in a `chat <model>` span (every call of the core goes through it). */
export function converseTraced<Q extends ChatCall, A extends ChatAnswer>(
  model: {
    readonly name: string;
    readonly provider?: string;
    converse(request: Q): Promise<A>;
  },
  request: Q,
): Promise<A> {
  const attributes = defined({
    [GENAI.operationName]: GENAI_OPERATIONS.chat,
    [GENAI.providerName]: model.provider ?? OTHER_PROVIDER,
    [GENAI.requestModel]: model.name,
    [GENAI.requestMaxTokens]: request.maxTokens,
    [GENAI.requestTemperature]: request.temperature,
    [AGENTBUS_SPAN_ATTRIBUTES.modelRunId]: request.metadata?.model_run_id,
    [AGENTBUS_SPAN_ATTRIBUTES.taskId]: request.metadata?.task_id,
  });
  return inSpan(`chat ${model.name}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const response = await model.converse(request);
    span.setAttributes({
      [GENAI.responseModel]: response.modelId,
      [GENAI.inputTokens]: response.usage.inputTokens,
      [GENAI.outputTokens]: response.usage.outputTokens,
      [GENAI.finishReasons]: [response.stopReason],
    });
    return response;
  });
}

/** One step of an agent run in an `invoke_agent <agent>` span. */
export function inAgentSpan<T>(
  run: { readonly agent: string; readonly runId: string; readonly taskId: string },
  work: () => Promise<T>,
): Promise<T> {
  const attributes = {
    [GENAI.operationName]: GENAI_OPERATIONS.invokeAgent,
    [GENAI.agentName]: run.agent,
    [GENAI.conversationId]: run.runId,
    [AGENTBUS_SPAN_ATTRIBUTES.taskId]: run.taskId,
  };
  return inSpan(`invoke_agent ${run.agent}`, { kind: SpanKind.INTERNAL, attributes }, work);
}

/**
 * One tool call in an `execute_tool <tool>` span; `outcome` says what became of it (`succeeded`,
 * `failed`: a refusal the model is told, `unknown`).
 */
export function inToolSpan<T extends { readonly kind: string }>(
  call: { readonly tool: string; readonly callId: string; readonly effect: "read" | "write" },
  work: () => Promise<T>,
): Promise<T> {
  const attributes = {
    [GENAI.operationName]: GENAI_OPERATIONS.executeTool,
    [GENAI.toolName]: call.tool,
    [GENAI.toolCallId]: call.callId,
    [GENAI.toolType]: "function",
    [AGENTBUS_SPAN_ATTRIBUTES.toolEffect]: call.effect,
  };
  return inSpan(
    `execute_tool ${call.tool}`,
    { kind: SpanKind.INTERNAL, attributes },
    async (span) => {
      const outcome = await work();
      span.setAttribute(AGENTBUS_SPAN_ATTRIBUTES.toolOutcome, outcome.kind);
      const code = (outcome as { readonly code?: unknown }).code;
      if (outcome.kind !== "succeeded") {
        span.setAttribute(GENAI.errorType, typeof code === "string" ? code : outcome.kind);
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      return outcome;
    },
  );
}
