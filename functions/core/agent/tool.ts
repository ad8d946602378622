import type * as z from "../../../schemas/zod";
import { PermanentError, UnknownOutcomeError } from "../errors";
import type { ModelToolSpec } from "../model";
import {
  type JsonSchema,
  type ModelSchemas,
  modelSchemaOf,
  toolSchemaName,
} from "../model-schemas";
import type { WriteFound } from "../write-once";

/**
 * A tool an agent may ask for (seed 000 §3.2, §11.4): its name and description for the model, its
 * input and output as zod schemas, and whether it only reads (`effect: "read"`: retried freely)
 * or changes something outside AgentBus (`"write"`: an outside write run once under an
 * idempotency key, recorded in the side-effects table before the call: ../write-once.ts,
 * ./tool-call.ts).
 *
 * What `run` throws decides what happens:
 * - `ToolTimeoutError` (or any UnknownOutcomeError): it may or may not have happened. A write
 *   tool's outcome is then learnt by `query(key)`, or, without one, by running it again under the
 *   same key on the next delivery (such a tool must never apply a key twice); a read tool is
 *   simply run again on the next delivery.
 * - `StillWorkingError` (../write-once.ts), from a tool with `resume`: the outside system took
 *   the call on and is still at it; the run waits and polls it (./task-wait.ts).
 * - `ToolRejectedError` (or any PermanentError): the outside system refused; the model is told.
 * - `TransientError` (throttled, unavailable): nothing happened; the delivery is retried later
 *   (with `details.retryAfterSeconds`, no sooner than that).
 */

export type ToolEffect = "read" | "write";

/** What a tool's `run` and `query` are told about the call. */
export interface ToolCallContext {
  readonly taskId: string;
  readonly runId: string;
  readonly toolCallId: string;
  /** The call's idempotency key: `<task_id>:<agent run>:<turn>:<tool call id>` (toolCallKey). */
  readonly key: string;
  /** What the run is about (its journal's subject: the customer, the order...). */
  readonly subject: Readonly<Record<string, string>>;
  readonly now: Date;
  /**
   * For a write tool the outside system runs long (one with `resume`): keeps the id of the work
   * the call started with the ledger's record, as soon as the system gave it. Awaited before the
   * call waits for the work.
   */
  readonly started?: (operation: string) => Promise<void>;
}

/** What a query by key learnt of a write that may or may not have happened. */
export type ToolQueryAnswer<O> = WriteFound<O>;

/** What another system says of a tool it offers (an MCP server's listing). */
export interface DescribedTool {
  readonly description: string;
  /** Its input as JSON Schema: what the model is shown. */
  readonly inputSchema: JsonSchema;
}

/** A person must approve a call before it runs (the run waits BLOCKED until then). */
export interface ToolApproval<I> {
  /** True when this call needs a person's approval. */
  readonly required: (input: I) => boolean;
  /** How long the run waits for the decision, in seconds. */
  readonly deadlineSeconds: number;
  /** What a deadline that passes does: refuse the call (the model is told), or fail the run. */
  readonly onDeadline: "reject" | "fail";
}

export interface ToolDefinition<I = unknown, O = unknown> {
  readonly name: string;
  readonly description: string;
  readonly input: z.ZodMiniType<I>;
  readonly output: z.ZodMiniType<O>;
  readonly effect: ToolEffect;
  run(input: I, context: ToolCallContext): Promise<O>;
  /** For a write tool: what the outside system knows of the call with this key. */
  query?(input: I, context: ToolCallContext): Promise<ToolQueryAnswer<O>>;
  readonly approval?: ToolApproval<I>;
  /**
   * For a write tool: the input fields that name what a call acts on (an order id), each of which
   * must equal the run's subject's field of the same name. The authority of a call comes from the
   * task, never from the model: a call that names anything else is refused before anything runs.
   */
  readonly actsOn?: readonly (keyof I & string)[];
  /**
   * For a tool another system describes (an MCP server's, functions/integrations/mcp): its
   * description and input schema as that system lists them, in place of `description` and the
   * agent's `schemas`. Awaited before each step of a run (the tool keeps what it read), so `input`
   * may check against it; rejects with a PermanentError when the system does not offer the tool.
   */
  readonly describe?: () => Promise<DescribedTool>;
  /**
   * For a write tool: whether calling it again under the same key is a safe way to learn an
   * outcome its query cannot tell (the outside system never applies a key twice). False: an
   * outcome that stays unknown goes to a person. @default true without `query`, false with one
   */
  readonly resendSafe?: boolean;
  /**
   * For a write tool the outside system may run long (an MCP tool run as a task): the outcome of
   * the work an earlier call started (`operation`, the id `run` gave `started`), as `run` gives
   * one; `StillWorkingError` (../write-once.ts) while it goes on. A call whose work is still going
   * on at its timeout makes the run wait (BLOCKED) and poll by `resume` (./task-wait.ts).
   */
  resume?(operation: string, input: I, context: ToolCallContext): Promise<O>;
  /**
   * For a tool with `resume`: how long the run waits for the work, from the call, before its
   * outcome is unknown and a person is asked. @default 86400 (24 h)
   */
  readonly waitLimitSeconds?: number;
}

/** The tool may or may not have done what it was asked (its outcome must be learnt by key). */
export class ToolTimeoutError extends UnknownOutcomeError {
  constructor(message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super("tool.timeout", message, options);
  }
}

/** The outside system refused the call for good; the model is told why. */
export class ToolRejectedError extends PermanentError {
  constructor(code: string, message: string, options?: { details?: Record<string, unknown> }) {
    super(code, message, options);
  }
}

const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;

/** A tool, checked: a name the model APIs accept, and an approval deadline that can pass. */
export function defineTool<I, O>(definition: ToolDefinition<I, O>): ToolDefinition<I, O> {
  if (!TOOL_NAME.test(definition.name))
    throw new PermanentError(
      "tool.invalid_definition",
      `tool name ${JSON.stringify(definition.name)} must match ${TOOL_NAME} (what model APIs accept)`,
    );
  const seconds = definition.approval?.deadlineSeconds;
  if (seconds !== undefined && !(Number.isInteger(seconds) && seconds > 0))
    throw new PermanentError(
      "tool.invalid_definition",
      `tool ${definition.name}: approval.deadlineSeconds must be a positive integer, got ${seconds}`,
    );
  const limit = definition.waitLimitSeconds;
  if (limit !== undefined && !(Number.isInteger(limit) && limit > 0))
    throw new PermanentError(
      "tool.invalid_definition",
      `tool ${definition.name}: waitLimitSeconds must be a positive integer, got ${limit}`,
    );
  if (definition.actsOn?.length && definition.effect !== "write")
    throw new PermanentError(
      "tool.invalid_definition",
      `tool ${definition.name}: actsOn scopes a write tool; ${definition.name} only reads`,
    );
  return definition;
}

/**
 * Why a call of `tool` is outside what the run is about (its subject), or undefined when it is
 * not: each of the tool's `actsOn` fields must equal the subject's field of the same name.
 */
export function outsideSubject(
  tool: { readonly name: string; readonly actsOn?: readonly string[] },
  input: unknown,
  subject: Readonly<Record<string, string>>,
): string | undefined {
  for (const field of tool.actsOn ?? []) {
    const asked = (input as Record<string, unknown> | null)?.[field];
    const own = subject[field];
    if (own === undefined || asked !== own)
      return `this run is about ${field} ${JSON.stringify(own ?? null)}; ${tool.name} acts on nothing else, and ${JSON.stringify(asked ?? null)} is not it. Nothing was run.`;
  }
  return undefined;
}

/**
 * What the model is shown of each tool: name, description, input as JSON Schema (from `schemas`,
 * or from the system that describes it).
 */
export async function toolSpecsOf(
  tools: readonly ToolDefinition[],
  schemas: ModelSchemas,
): Promise<ModelToolSpec[]> {
  return Promise.all(
    tools.map(async (tool) =>
      tool.describe ? { name: tool.name, ...(await tool.describe()) } : toolSpecOf(tool, schemas),
    ),
  );
}

/** What the model is shown of a tool: name, description, input as JSON Schema (from `schemas`). */
export function toolSpecOf(
  tool: Pick<ToolDefinition, "name" | "description">,
  schemas: ModelSchemas,
): ModelToolSpec {
  const inputSchema = modelSchemaOf(schemas, toolSchemaName(tool.name), `tool ${tool.name}`);
  return { name: tool.name, description: tool.description, inputSchema };
}
