import * as z from "../../schemas/zod";
import { MODEL_INVALID_OUTPUT } from "./agent-run";
import { AgentBusError } from "./errors";
import { converseTraced } from "./genai-spans";

/**
 * The model port: what a role's `decide` needs from a language model. AWS-free; the Bedrock
 * adapter (functions/adapters/bedrock/model.ts) and the deterministic local stand-in
 * (functions/adapters/local-model.ts) implement it.
 *
 * Error contract for implementations: throttling and outages throw TransientError
 * (`model.throttled`, `model.unavailable`, ...); requests that can never succeed (bad model id,
 * no access, invalid request) throw PermanentError. A reply that is text but not what the caller
 * asked for is not an error of the port: `invokeStructured` turns it into ModelOutputInvalidError.
 *
 * Model calls happen inside a role's `decide`, never inside a transaction.
 */
export interface ModelPort {
  /** What answered, for logs and metrics (the model id for real models). */
  readonly name: string;
  /**
   * Who serves the model, as the GenAI conventions name providers (`aws.bedrock`): the
   * `gen_ai.provider.name` of its `chat` spans (./genai-spans.ts). @default `_OTHER`
   */
  readonly provider?: string;
  converse(request: ModelRequest): Promise<ModelResponse>;
  /**
   * A port guarded by the budgets and the operator's stops (./model-guard.ts, which every role's
   * model port is wrapped in): throws when the scope's tenant or run is stopped, and for `model`
   * work when a budget is spent. What an agent run asks before each tool call.
   */
  admit?(scope: ModelScope, work: "model" | "tool", runSpent?: Spend): Promise<void>;
}

/** Whose model call it is: a tenant and, where one is known, the run it serves. */
export interface ModelScope {
  readonly tenant: string;
  readonly run?: string;
}

/** Spent on model calls: tokens in and out, and their cost in millionths of a US$. */
export interface Spend {
  readonly tokens: number;
  readonly micros: number;
}

export interface ModelMessage {
  readonly role: "user" | "assistant";
  readonly text: string;
  /** An assistant turn's requests for tools, in the order the model gave them. */
  readonly toolCalls?: readonly ModelToolCall[];
  /** A user turn's answers to the previous turn's tool calls, one per call. */
  readonly toolResults?: readonly ModelToolResult[];
}

/** A tool the model may ask for: its name, what it does, and its input as JSON Schema. */
export interface ModelToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
}

/**
 * The JSON Schema an answer's text must fit (structured output). A port whose model can constrain
 * its output to a schema does so; any other ignores it. The caller validates the answer either way.
 */
export interface ModelOutputSpec {
  /** A name for the schema (letters, digits, `_` and `-`). */
  readonly name: string;
  readonly schema: Readonly<Record<string, unknown>>;
}

/** The model asks for a tool: the call's id (the model's own), the tool's name, its input. */
export interface ModelToolCall {
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
}

/** What a tool call gave, sent back to the model: a JSON value, or an error it can read. */
export interface ModelToolResult {
  readonly toolCallId: string;
  readonly content: unknown;
  readonly isError?: boolean;
}

export interface ModelRequest {
  readonly system?: string;
  /** The conversation, oldest first; starts with a user message and alternates. */
  readonly messages: readonly ModelMessage[];
  readonly maxTokens?: number;
  readonly temperature?: number;
  /** The tools the model may ask for; none means a plain answer. */
  readonly tools?: readonly ModelToolSpec[];
  /** The schema a text answer must fit, for a model that supports structured output. */
  readonly output?: ModelOutputSpec;
  /** Tracing fields: passed on to invocation logs; the local model picks its script by `role`. */
  readonly metadata?: {
    readonly role?: string;
    readonly task_id?: string;
    readonly correlation_id?: string;
    /** The agent run's turn this call is (`<run>:turn:<n>`). */
    readonly model_run_id?: string;
    /** The tenant and the run the call serves: whose budgets it spends, whose stops halt it. */
    readonly tenant_id?: string;
    readonly run_id?: string;
  };
  /**
   * What the run (`metadata.run_id`) has spent on model calls before this one, as its state
   * keeps it: a guarded port refuses the call once the run's budget is spent.
   */
  readonly runSpent?: Spend;
}

export interface ModelResponse {
  readonly text: string;
  /** The tools the model asks for (stop reason `tool_use`); none when it answered. */
  readonly toolCalls?: readonly ModelToolCall[];
  /** Why the model stopped, as reported (`end_turn`, `max_tokens`, ...). */
  readonly stopReason: string;
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number };
  readonly modelId: string;
  readonly latencyMs: number;
}

export interface InvokeStructuredOptions {
  /** Model calls in total, the first included (at least 1). @default 3 */
  readonly maxAttempts?: number;
  /**
   * The answer's schema as JSON Schema, sent as structured output (`request.output`): from the
   * role's generated book (./model-schemas.ts). Left out, the model is not constrained.
   */
  readonly output?: ModelOutputSpec;
}

export interface StructuredResult<T> {
  readonly value: T;
  /** How many model calls it took (1 when the first answer was valid). */
  readonly attempts: number;
  /** The response whose text produced `value`. */
  readonly response: ModelResponse;
}

export const DEFAULT_STRUCTURED_ATTEMPTS = 3;
/** How much of the model's raw text an error carries and a correction echoes back. */
export const RAW_TEXT_LIMIT = 2000;
/** How many validation issues a correction message and an error carry. */
export const ISSUE_LIMIT = 20;

/**
 * The model answered, but never in the required shape within the attempt budget.
 * Code `model.invalid_output` (what the agent run's `classifyFailure` keys on: retry within the
 * run's budget, then NEEDS_HUMAN) and class permanent, so the queue does not redeliver it blindly.
 */
export class ModelOutputInvalidError extends AgentBusError {
  /** The last reply's text, truncated to RAW_TEXT_LIMIT characters. */
  readonly rawText: string;
  /** The last reply's problems (`path: message`), at most ISSUE_LIMIT of them. */
  readonly issues: readonly string[];
  readonly attempts: number;

  constructor(options: {
    rawText: string;
    issues: readonly string[];
    attempts: number;
    modelId: string;
    stopReason: string;
  }) {
    const issues = options.issues.slice(0, ISSUE_LIMIT);
    const rawText = truncate(options.rawText, RAW_TEXT_LIMIT);
    const summary = truncate(issues.join("; "), 1000);
    super(
      "permanent",
      MODEL_INVALID_OUTPUT,
      `model ${options.modelId} gave no valid output in ${options.attempts} attempt(s) ` +
        `(last stop reason ${options.stopReason}): ${summary}`,
      {
        details: {
          attempts: options.attempts,
          issues,
          raw_text: rawText,
          model_id: options.modelId,
          stop_reason: options.stopReason,
        },
      },
    );
    this.rawText = rawText;
    this.issues = issues;
    this.attempts = options.attempts;
  }
}

/**
 * Asks the model and parses its answer as JSON validated by `schema`. The JSON is the whole reply
 * (a bare object), else the first fenced ```json block, else the span from the first `{` to the
 * last `}` of the reply. On an invalid answer (no JSON, or schema issues) it asks again with the
 * original conversation plus the bad answer and a user message listing the issues (the
 * conversation does not grow with the attempts: only the last answer is echoed), up to
 * `maxAttempts` calls, then throws ModelOutputInvalidError. Errors of the port itself (throttling,
 * outage, access) propagate unchanged and are not retried here: their class decides.
 *
 * `options.output` goes with the request (structured output): a model that supports it answers
 * JSON of that shape, and the validation and corrections above stay the same, since the port may
 * not support it and a schema's constraints may go beyond what a model can enforce.
 */
export async function invokeStructured<T>(
  model: ModelPort,
  request: ModelRequest,
  schema: z.core.$ZodType<T>,
  options: InvokeStructuredOptions = {},
): Promise<StructuredResult<T>> {
  const maxAttempts = options.maxAttempts ?? DEFAULT_STRUCTURED_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);

  const first: ModelRequest =
    options.output === undefined ? request : { ...request, output: options.output };
  let current = first;
  for (let attempt = 1; ; attempt++) {
    const response = await converseTraced(model, current);
    const parsed = parseStructured(response.text, schema);
    if (parsed.ok) return { value: parsed.value, attempts: attempt, response };
    if (attempt >= maxAttempts)
      throw new ModelOutputInvalidError({
        rawText: response.text,
        issues: parsed.issues,
        attempts: attempt,
        modelId: response.modelId,
        stopReason: response.stopReason,
      });
    current = correctionRequest(first, response.text, parsed.issues);
  }
}

export type ParseResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly issues: readonly string[] };

/** Extracts the JSON of a reply (see invokeStructured) and validates it. Never throws. */
export function parseStructured<T>(text: string, schema: z.core.$ZodType<T>): ParseResult<T> {
  const json = extractJson(text);
  if (!json.ok) return json;
  const result = z.safeParse(schema, json.value);
  if (result.success) return { ok: true, value: result.data };
  return {
    ok: false,
    issues: result.error.issues.slice(0, ISSUE_LIMIT).map((issue) => {
      const path = issue.path.map(String).join(".");
      return `${path === "" ? "(root)" : path}: ${issue.message}`;
    }),
  };
}

const FENCED_JSON = /```[ \t]*json[ \t]*\r?\n([\s\S]*?)```/i;

/** The JSON value of a reply: the whole text, the first ```json fence, or the outer `{...}`. */
export function extractJson(
  text: string,
): { ok: true; value: unknown } | { ok: false; issues: string[] } {
  const trimmed = text.trim();
  if (trimmed === "") return { ok: false, issues: ["(root): the reply is empty, expected JSON"] };
  const whole = tryParse(trimmed);
  if (whole.ok) return whole;
  const fenced = FENCED_JSON.exec(text);
  if (fenced?.[1] !== undefined) {
    const inner = tryParse(fenced[1].trim());
    if (inner.ok) return inner;
    return {
      ok: false,
      issues: [`(root): the \`\`\`json block is not valid JSON: ${inner.error}`],
    };
  }
  const start = trimmed.indexOf("{");
  const end = trimmed.lastIndexOf("}");
  if (start >= 0 && end > start) {
    const span = tryParse(trimmed.slice(start, end + 1));
    if (span.ok) return span;
  }
  return { ok: false, issues: [`(root): the reply is not JSON: ${whole.error}`] };
}

function tryParse(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}

/**
 * The original request plus the bad answer and what was wrong with it. Roles alternate: when the
 * conversation ends with a user message the bad answer becomes an assistant message; otherwise
 * (an assistant prefill) it is quoted inside the correction.
 */
function correctionRequest(
  original: ModelRequest,
  rawText: string,
  issues: readonly string[],
): ModelRequest {
  const answer = truncate(rawText.trim(), RAW_TEXT_LIMIT) || "(empty reply)";
  const problems = issues
    .slice(0, ISSUE_LIMIT)
    .map((issue) => `- ${issue}`)
    .join("\n");
  const instruction =
    "Your previous reply could not be used. Validation errors:\n" +
    `${problems}\n` +
    "Reply again with only the corrected JSON object: no prose, no code fence.";
  const last = original.messages.at(-1);
  const messages: ModelMessage[] =
    last?.role === "user"
      ? [
          ...original.messages,
          { role: "assistant", text: answer },
          { role: "user", text: instruction },
        ]
      : [
          ...original.messages,
          { role: "user", text: `Your previous reply was:\n${answer}\n\n${instruction}` },
        ];
  return { ...original, messages };
}

function truncate(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/** JSON with object keys sorted, so the same facts always give the same prompt (and answer). */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) =>
            a < b ? -1 : a > b ? 1 : 0,
          ),
        )
      : v,
  );
}
