import { createHash } from "node:crypto";
import { PermanentError } from "../core/errors";
import type { ModelPort, ModelRequest, ModelResponse, ModelToolCall } from "../core/model";
import {
  LOCAL_MODEL_NAME,
  type LocalScript,
  type LocalScripts,
  type RequestFacts,
  ToolUse,
} from "./local-model-script";

export { LOCAL_MODEL_NAME, type LocalScript, type LocalScripts, type RequestFacts, ToolUse };

/**
 * NOT a model. A deterministic stand-in for the ModelPort, for the local runtime and for tests:
 * it answers from scripts registered per agent role (`request.metadata.role`), so a workflow runs
 * end to end without Bedrock, AWS credentials or network, and every run gives the same outputs.
 *
 * - A script returns a string (sent as is), an object (sent as its JSON text) or a ToolUse (the
 *   tool calls it asks for, stop reason `tool_use`).
 * - Same request, same answer: scripts derive everything from the request text through a hash
 *   (`RequestFacts`); nothing reads the clock or a random source. `latencyMs` is the reported
 *   latency, not a wait.
 * - Fault injection (its only state besides the scripts): `failNext(role, error)` makes the next call for the role
 *   throw `error`; `invalidNext(role, count)` makes the next `count` calls answer non-JSON text.
 * - A role without a script -> PermanentError `model.no_script`.
 *
 * It knows no application: each role brings its scripts where it declares that it calls the model,
 * `uses: { model: use(model, { localScripts: { [role]: script } }) }`
 * (functions/integrations/model/index.ts), and whoever makes the local model for a set of roles
 * registers theirs: the role kit's twin (`register`, once per role's use), the local runtime
 * (every group of the stack), the function's own adapter under `MODEL_PROVIDER=local` (its
 * role's). The reference applications' scripts sit beside their roles, with the markers that
 * drive them (`[fail-fact-check]`, `[needs-revision]`, `[human-review]`, ...):
 * functions/roles/content-agents/local-scripts.ts,
 * functions/roles/customer-support/reply-generation/local-script.ts and
 * functions/roles/refund-review/local-script.ts.
 */
export class DeterministicLocalModel implements ModelPort {
  readonly name = LOCAL_MODEL_NAME;
  private readonly scripts = new Map<string, LocalScript>();
  private readonly latencyMs: number;
  private readonly failures = new Map<string, unknown[]>();
  private readonly invalid = new Map<string, number>();
  private readonly calls = new Map<string, number>();

  constructor(props: DeterministicLocalModelProps = {}) {
    const latencyMs = props.latencyMs ?? 0;
    if (!Number.isFinite(latencyMs) || latencyMs < 0)
      throw new PermanentError("model.invalid_config", `latencyMs must be >= 0, got ${latencyMs}`);
    this.latencyMs = latencyMs;
    for (const [role, script] of Object.entries(props.scripts ?? {}))
      this.scripts.set(role, script);
  }

  /**
   * Answer `scripts`' roles with them from now on. A role that has a script already keeps it if it
   * is the same one; another is refused (two roles of one stack claim one role's answers).
   */
  register(scripts: LocalScripts): this {
    const clashes = Object.entries(scripts)
      .filter(([role, script]) => (this.scripts.get(role) ?? script) !== script)
      .map(([role]) => role);
    if (clashes.length > 0)
      throw new PermanentError(
        "model.script_clash",
        `${LOCAL_MODEL_NAME} has another script for ${clashes.map((r) => `"${r}"`).join(", ")} already`,
        { details: { roles: clashes } },
      );
    for (const [role, script] of Object.entries(scripts)) this.scripts.set(role, script);
    return this;
  }

  /** The next call for `role` throws `error` (queued: call it twice to fail twice). */
  failNext(role: string, error: unknown): this {
    const queue = this.failures.get(role) ?? [];
    queue.push(error);
    this.failures.set(role, queue);
    return this;
  }

  /** The next `count` calls for `role` answer text that is not JSON. */
  invalidNext(role: string, count = 1): this {
    if (!Number.isInteger(count) || count < 0)
      throw new RangeError(`count must be a non-negative integer, got ${count}`);
    this.invalid.set(role, (this.invalid.get(role) ?? 0) + count);
    return this;
  }

  /** How many calls `role` has received (failed and invalid ones included). */
  callCount(role: string): number {
    return this.calls.get(role) ?? 0;
  }

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const role = request.metadata?.role;
    if (role !== undefined) this.calls.set(role, this.callCount(role) + 1);

    const failure = role === undefined ? undefined : this.failures.get(role);
    if (failure !== undefined && failure.length > 0) throw failure.shift();

    const script = role === undefined ? undefined : this.scripts.get(role);
    if (role === undefined || script === undefined)
      throw new PermanentError(
        "model.no_script",
        `${LOCAL_MODEL_NAME} has no script for role ${role === undefined ? "(none: metadata.role is missing)" : `"${role}"`}`,
        { details: { role: role ?? null, known_roles: [...this.scripts.keys()] } },
      );

    const invalidLeft = this.invalid.get(role) ?? 0;
    let text: string;
    let toolCalls: readonly ModelToolCall[] = [];
    if (invalidLeft > 0) {
      this.invalid.set(role, invalidLeft - 1);
      text = `I would rather describe the answer in prose than as JSON (scripted invalid output for ${role}).`;
    } else {
      const answer = script(request, factsOf(request));
      if (answer instanceof ToolUse) toolCalls = answer.calls;
      text =
        answer instanceof ToolUse
          ? ""
          : typeof answer === "string"
            ? answer
            : JSON.stringify(answer);
    }
    return {
      text,
      ...(toolCalls.length > 0 ? { toolCalls } : {}),
      stopReason: toolCalls.length > 0 ? "tool_use" : "end_turn",
      usage: { inputTokens: tokens(requestText(request)), outputTokens: tokens(text) },
      modelId: LOCAL_MODEL_NAME,
      latencyMs: this.latencyMs,
    };
  }
}

export interface DeterministicLocalModelProps {
  /** Scripts by role (`request.metadata.role`). @default none: each comes with `register` */
  readonly scripts?: LocalScripts;
  /** Latency reported in every response (no actual wait). @default 0 */
  readonly latencyMs?: number;
}

function requestText(request: ModelRequest): string {
  const line = (m: ModelRequest["messages"][number]) =>
    [
      `${m.role}: ${m.text}`,
      ...(m.toolCalls ?? []).map((c) => `tool call ${c.id} ${c.name} ${JSON.stringify(c.input)}`),
      ...(m.toolResults ?? []).map(
        (r) =>
          `tool result ${r.toolCallId}${r.isError ? " (error)" : ""} ${JSON.stringify(r.content)}`,
      ),
    ].join("\n");
  return [request.system ?? "", ...request.messages.map(line)].join("\n");
}

function factsOf(request: ModelRequest): RequestFacts {
  const text = requestText(request);
  const digest = sha256(`${request.metadata?.role ?? ""}\n${text}`);
  const unit = (salt: string) => Number.parseInt(sha256(`${digest}:${salt}`).slice(0, 12), 16);
  return {
    text,
    digest,
    pick: (options, salt) => {
      const value = options[unit(salt) % options.length];
      if (value === undefined) throw new RangeError("pick needs at least one option");
      return value;
    },
    int: (min, max, salt) => min + (unit(salt) % (max - min + 1)),
  };
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A rough token count (about four characters a token), stable for a given text. */
function tokens(text: string): number {
  return Math.ceil(text.length / 4);
}
