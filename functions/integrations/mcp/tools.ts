import { createHash } from "node:crypto";
import * as z from "../../../schemas/zod";
import type { AnyTool } from "../../core/agent/agent";
import {
  type DescribedTool,
  defineTool,
  type ToolApproval,
  type ToolEffect,
  type ToolQueryAnswer,
  ToolRejectedError,
} from "../../core/agent/tool";
import { PermanentError } from "../../core/errors";
import { canonicalJson } from "../../core/model";
import type { JsonSchema } from "../../core/model-schemas";
import { outputSchemaIssues } from "../../core/output-schema";
import {
  IDEMPOTENCY_KEY_META,
  type McpCallResult,
  type McpListedTool,
  type McpServerPort,
} from "./port";
import { callAsTask, resumeTask } from "./task-call";

/**
 * An MCP server's tools as an agent's tools (functions/core/agent/tool.ts): the author names the
 * tools the agent may use and marks each read or write; what the model is shown of each (its
 * description and input schema) comes from the server's `tools/list`.
 *
 * - The listing is read once per container, on the first step that needs it, and kept; a failed
 *   read is tried again on the next step. With `pin` (the sha256 `mcpListingHash` gives), a
 *   listing of the named tools that differs is refused: the deployment runs the tools it was
 *   tested with, or none. A tool named here that the server does not list fails the step
 *   (`mcp.tool_not_listed`, permanent).
 * - The model's input is checked against the listed JSON Schema before anything runs.
 * - A write is run once under the step's key through the side-effect ledger, like any write tool
 *   (tool-call.ts); the key is sent in the request's `_meta` (`io.agentbus/idempotency-key`) and,
 *   with `keyArgument`, in that argument too (taken out of what the model is shown).
 * - An `isError` result is a refusal (`failed`, the model is told); a JSON-RPC error too; a timeout
 *   or a connection dropped after sending is `unknown`, learnt by `query` (a read tool of the
 *   server asked by key) or, when the server `dedupes` keys, by a call again under the same key;
 *   with neither, a person is asked.
 */

export interface McpToolDeclaration {
  /** @default "write" */
  readonly effect?: ToolEffect;
  /** The argument the step's key is also sent in (besides `_meta`); the model never sees it. */
  readonly keyArgument?: string;
  /**
   * For a write: a read tool of the server that answers, for a key, the result of the call made
   * under it, and `isError` when it has none (not applied).
   */
  readonly query?: { readonly tool: string; readonly keyArgument: string };
  /** For a write: the server never applies a key twice, so a call again under it is safe. */
  readonly dedupes?: boolean;
  /** For a write: input fields that must equal the run's subject's (ToolDefinition.actsOn). */
  readonly actsOn?: readonly string[];
  readonly approval?: ToolApproval<McpInput>;
  /**
   * For a write the server runs as a task: how long the run waits for a task that outlives its
   * call, polling it, before its outcome is unknown and a person is asked. @default 86400 (24 h)
   */
  readonly taskLimitSeconds?: number;
}

export interface McpToolsDeclaration {
  /** The server, as messages name it (`crm`). */
  readonly server: string;
  /** The tools the agent may use, by the server's names. */
  readonly tools: Readonly<Record<string, McpToolDeclaration>>;
  /** How long a call may take before its outcome is unknown. @default 10000 */
  readonly timeoutMs?: number;
  /** The sha256 of the named tools' listing (`mcpListingHash`); another listing is refused. */
  readonly pin?: string;
}

export type McpInput = Record<string, unknown>;

/** What an MCP tool gives back: its text content, and its structured content when it has one. */
export interface McpToolOutput {
  readonly text: string;
  readonly structured?: Record<string, unknown>;
}

const McpInputSchema = z.record(z.string(), z.unknown());
const McpToolOutputSchema = z.object({
  text: z.string(),
  structured: z.optional(z.record(z.string(), z.unknown())),
});

export const DEFAULT_MCP_TIMEOUT_MS = 10_000;

/** The tools of `server` the declaration names, as an agent's tools. */
export function mcpTools(server: McpServerPort, declaration: McpToolsDeclaration): AnyTool[] {
  const listing = listingOnce(server, declaration);
  return Object.entries(declaration.tools).map(([name, tool]) =>
    mcpTool(server, declaration, listing, name, tool),
  );
}

/** The sha256 of the listing of the tools the declaration names, as `pin` takes it. */
export async function mcpListingHash(
  server: McpServerPort,
  declaration: Pick<McpToolsDeclaration, "server" | "tools">,
): Promise<string> {
  return listingHash(namedListing(await server.listTools(), declaration));
}

/** A named tool as the listing describes it, and whether the server runs its calls as tasks. */
interface ListedTool extends DescribedTool {
  readonly asTask: boolean;
}

type Listing = () => Promise<ReadonlyMap<string, ListedTool>>;

/** The listing, read on first use and kept; a failed read is tried again next time. */
function listingOnce(server: McpServerPort, declaration: McpToolsDeclaration): Listing {
  let read: Promise<ReadonlyMap<string, ListedTool>> | undefined;
  return () => {
    read ??= readListing(server, declaration).catch((error: unknown) => {
      read = undefined;
      throw error;
    });
    return read;
  };
}

async function readListing(
  server: McpServerPort,
  declaration: McpToolsDeclaration,
): Promise<ReadonlyMap<string, ListedTool>> {
  const listed = namedListing(await server.listTools(), declaration);
  if (declaration.pin !== undefined && listingHash(listed) !== declaration.pin)
    throw new PermanentError(
      "mcp.listing_changed",
      `MCP server ${declaration.server} lists tools other than those pinned (${declaration.pin}); it lists ${listingHash(listed)} now`,
    );
  return new Map(
    listed.map((tool) => {
      const keyArgument = declaration.tools[tool.name]?.keyArgument;
      const inputSchema = withoutArgument(tool.inputSchema, keyArgument, declaration.server, tool);
      const asTask = tool.taskSupport === "required" || tool.taskSupport === "optional";
      return [tool.name, { description: tool.description ?? "", inputSchema, asTask }];
    }),
  );
}

/** The listed tools the declaration names, by name; a name the server does not list is refused. */
function namedListing(
  listed: readonly McpListedTool[],
  declaration: Pick<McpToolsDeclaration, "server" | "tools">,
): McpListedTool[] {
  const named = Object.keys(declaration.tools).sort();
  const missing = named.filter((name) => !listed.some((tool) => tool.name === name));
  const queries = Object.values(declaration.tools).flatMap((t) => (t.query ? [t.query.tool] : []));
  missing.push(...queries.filter((name) => !listed.some((tool) => tool.name === name)));
  if (missing.length > 0)
    throw new PermanentError(
      "mcp.tool_not_listed",
      `MCP server ${declaration.server} does not list ${missing.join(", ")} (it lists: ${listed.map((t) => t.name).join(", ") || "nothing"})`,
    );
  return named.map((name) => listed.find((tool) => tool.name === name) as McpListedTool);
}

/**
 * The hash of what the model is shown and how a call runs (a tool now run as a task is a change);
 * a listing without `taskSupport` hashes as before it was counted.
 */
function listingHash(listed: readonly McpListedTool[]): string {
  const shown = listed.map(({ name, description, inputSchema, taskSupport }) => ({
    name,
    description,
    inputSchema,
    ...(taskSupport === undefined ? {} : { taskSupport }),
  }));
  return `sha256:${createHash("sha256").update(canonicalJson(shown)).digest("hex")}`;
}

/** The input schema without the argument the key is sent in (the model never gives it). */
function withoutArgument(
  schema: JsonSchema,
  argument: string | undefined,
  server: string,
  tool: McpListedTool,
): JsonSchema {
  if (argument === undefined) return schema;
  const properties = (schema.properties ?? {}) as Record<string, unknown>;
  if (!(argument in properties))
    throw new PermanentError(
      "mcp.key_argument_missing",
      `MCP server ${server}'s tool ${tool.name} has no argument ${argument} to send the idempotency key in`,
    );
  const { [argument]: _key, ...rest } = properties;
  const required = Array.isArray(schema.required)
    ? (schema.required as string[]).filter((name) => name !== argument)
    : undefined;
  return { ...schema, properties: rest, ...(required ? { required } : {}) };
}

function mcpTool(
  server: McpServerPort,
  declaration: McpToolsDeclaration,
  listing: Listing,
  name: string,
  tool: McpToolDeclaration,
): AnyTool {
  const effect = tool.effect ?? "write";
  const timeoutMs = declaration.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
  let described: ListedTool | undefined;
  const request = (args: McpInput, key?: string) => ({
    name,
    arguments: key && tool.keyArgument ? { ...args, [tool.keyArgument]: key } : args,
    ...(key ? { meta: { [IDEMPOTENCY_KEY_META]: key } } : {}),
    timeoutMs,
  });
  const call = async (args: McpInput, key?: string, started?: (id: string) => Promise<void>) => {
    const asTask = described?.asTask ?? false;
    const asked = request(args, key);
    const result = await (asTask ? callAsTask(server, asked, started) : server.callTool(asked));
    return outputOf(name, result);
  };
  return defineTool<McpInput, McpToolOutput>({
    name,
    description: `${name} (MCP server ${declaration.server})`,
    effect,
    input: listedInput(() => described?.inputSchema),
    output: McpToolOutputSchema,
    async describe() {
      const found = (await listing()).get(name) as ListedTool;
      described = found;
      return { description: found.description, inputSchema: found.inputSchema };
    },
    run: (input, { key, started }) =>
      effect === "write" ? call(input, key, started) : call(input),
    // A task that outlived its call: asked about by its id, never created again.
    ...(effect === "write"
      ? {
          resume: async (taskId: string, input: McpInput, { key }: { key: string }) =>
            outputOf(name, await resumeTask(server, request(input, key), taskId)),
        }
      : {}),
    ...(tool.taskLimitSeconds === undefined ? {} : { waitLimitSeconds: tool.taskLimitSeconds }),
    // A task tool's query cannot tell a task still working from none: its outcome stays unknown.
    ...(effect === "write" && tool.query
      ? { query: queryUnlessTask(server, tool.query, timeoutMs, () => described) }
      : {}),
    ...(effect === "write" ? { resendSafe: tool.dedupes ?? false } : {}),
    ...(tool.actsOn ? { actsOn: tool.actsOn } : {}),
    ...(tool.approval ? { approval: tool.approval } : {}),
  });
}

/** The model's input, checked against the listed schema (read before the step: `describe`). */
function listedInput(schema: () => JsonSchema | undefined) {
  return McpInputSchema.check(
    z.superRefine((value, ctx) => {
      const listed = schema();
      const issues = listed
        ? outputSchemaIssues(listed, value, "(input)")
        : ["(input): the MCP server's listing has not been read"];
      for (const message of issues) ctx.issues.push({ code: "custom", message, input: value });
    }),
  );
}

/**
 * A write's outcome, asked of the server's query tool by key; for a tool the server runs as a task
 * `unknown`: a task created and still working is not applied yet, and a call again would create a
 * second one.
 */
function queryUnlessTask(
  server: McpServerPort,
  query: NonNullable<McpToolDeclaration["query"]>,
  timeoutMs: number,
  listed: () => ListedTool | undefined,
) {
  const asked = queryBy(server, query, timeoutMs);
  return async (
    input: McpInput,
    context: { key: string },
  ): Promise<ToolQueryAnswer<McpToolOutput>> =>
    listed()?.asTask ? { status: "unknown" } : asked(input, context);
}

/** A write's outcome, asked of the server's query tool by key. */
function queryBy(
  server: McpServerPort,
  query: NonNullable<McpToolDeclaration["query"]>,
  timeoutMs: number,
) {
  return async (
    _input: McpInput,
    { key }: { key: string },
  ): Promise<ToolQueryAnswer<McpToolOutput>> => {
    const result = await server.callTool({
      name: query.tool,
      arguments: { [query.keyArgument]: key },
      timeoutMs,
    });
    return result.isError
      ? { status: "not_applied" }
      : { status: "applied", output: resultOutput(result) };
  };
}

/** A result as the tool's output; `isError` is the tool's refusal. */
function outputOf(name: string, result: McpCallResult): McpToolOutput {
  const output = resultOutput(result);
  if (result.isError)
    throw new ToolRejectedError("mcp.tool_error", `${name} refused: ${output.text || "no reason"}`);
  return output;
}

function resultOutput(result: McpCallResult): McpToolOutput {
  const text = result.content
    .map((block) => (block.type === "text" ? String(block.text) : `[${String(block.type)}]`))
    .join("\n");
  return result.structuredContent
    ? { text, structured: { ...result.structuredContent } }
    : { text };
}
