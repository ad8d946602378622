import { DEFAULT_TENANT } from "../../../schemas/ids";
import * as z from "../../../schemas/zod";
import { PermanentError } from "../errors";
import { converseTraced, inAgentSpan, inToolSpan } from "../genai-spans";
import {
  ISSUE_LIMIT,
  type ModelMessage,
  type ModelPort,
  type ModelRequest,
  type ModelScope,
  type ModelToolSpec,
} from "../model";
import { BudgetExhaustedError, spendOf } from "../model-guard";
import { modelSchemaOf } from "../model-schemas";
import type { SideEffectStore } from "../side-effects";
import {
  type AgentDefinition,
  type AgentJournal,
  ANSWER_SCHEMA,
  type AnyTool,
  DEFAULT_MAX_ERROR_TURNS,
  DEFAULT_MAX_UNKNOWN_ATTEMPTS,
  type JournalStep,
  latestStep,
  moved,
  type PendingCall,
  recorded,
  type Waiting,
} from "./agent";
import type { ContentStore } from "./content";
import { conversationTexts, withMessage } from "./messages";
import { blockedOnTask } from "./task-wait";
import { outsideSubject, toolSpecsOf } from "./tool";
import { type CallOutcome, runReadTool, runWriteTool, toolCallKey } from "./tool-call";
import { reportedCount, reportedLatency, takenTurn } from "./turn";

/**
 * One step of an agent run (./agent.ts): the caller commits the journal it returns before the
 * next step starts, so a redelivered step is a duplicate and a model turn or tool call that
 * committed is never asked or run again.
 *
 * The step is the first that applies of:
 * 1. a tool call of the latest turn is unsettled -> settle it: refused at once if the model named
 *    no such tool, gave input that does not fit, or asked a write tool to act on anything but what
 *    the run is about (its subject: ToolDefinition.actsOn) (nothing runs); BLOCKED if it needs a
 *    person's approval not yet given; else run it (./tool-call.ts); BLOCKED on the outside work it
 *    started when that outlives the call (./task-wait.ts). Its answer is stored; once
 *    every call of the turn is answered, the answers become the next user message. A write that
 *    took effect is given back with the step (`wrote`), so its facts commit with it.
 * 2. else a model turn: the conversation so far (content references, ./content.ts) with the
 *    tools. A turn the run cannot take (too many calls, a name or id out of bounds, too large:
 *    ./turn.ts) -> an error turn, nothing run. Tool calls -> kept as the turn's calls (1). A text
 *    answer -> parsed as JSON against `output`: the run is COMPLETED with it (the texts of the
 *    conversation it read given back with the step: `conversation`), or told what is wrong (an
 *    error turn).
 * The turn budget spent, `maxErrorTurns` error turns in a row, or the run's or its tenant's model
 * budget spent (`budget.exhausted`, ../model-guard.ts: no model call starts) -> NEEDS_HUMAN.
 * A model or tool call refused because an operator stopped the run or its tenant throws
 * OperatorStopError, which the role turns into the run's end, CANCELLED (./stop.ts).
 */

export interface AgentPorts {
  readonly model: ModelPort;
  readonly content: ContentStore;
  readonly sideEffects: SideEffectStore;
}

export interface StepContext {
  readonly now: Date;
  readonly receiveCount: number;
  /** Tracing fields for the model (the local model picks its script by `role`). */
  readonly correlationId?: string;
}

/** What one step did: the journal to commit, and whether another step follows. */
export interface StepResult {
  readonly journal: AgentJournal;
  /** `continue`: emit the next step's command; `wait`: a person or a deadline moves it on. */
  readonly next: "continue" | "wait" | "end";
  /** The step as recorded (for the trace events). */
  readonly recorded: JournalStep;
  /** The write the step learnt took effect, if any: what the role's facts of it are made from. */
  readonly wrote?: WriteDone;
  /**
   * The texts of the run's conversation (./messages.ts), oldest first, when the step holds them all: a model
   * turn that ended the run read the conversation to ask the model and wrote its answer. The
   * role's `finish` is given them so it need not read the conversation again (./agent-role.ts).
   */
  readonly conversation?: readonly string[];
}

/** A write tool's call that took effect outside AgentBus (a refund made). */
export interface WriteDone {
  readonly tool: string;
  readonly tool_call_id: string;
  readonly key: string;
  readonly input: unknown;
  readonly output: unknown;
}

export async function agentStep(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  context: StepContext,
): Promise<StepResult> {
  const run = { agent: agent.name, runId: journal.run_id, taskId: journal.task_id };
  return inAgentSpan(run, async () => {
    // Tools another system describes are read first: their input is checked against it.
    const specs = await toolSpecsOf(agent.tools, agent.schemas);
    const call = journal.pending.find((p) => p.result === undefined);
    if (call) return callStep(agent, journal, call, ports, context);
    return modelStep(agent, journal, ports, context, specs);
  });
}

async function modelStep(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  context: StepContext,
  specs: readonly ModelToolSpec[],
): Promise<StepResult> {
  const { now } = context;
  if (journal.totals.model_turns >= agent.maxTurns)
    return handOver(journal, now, `the turn budget (${agent.maxTurns}) is spent without an answer`);
  const texts = await conversationTexts(journal, ports.content);
  const turn = journal.totals.model_turns + 1;
  const modelRunId = `${journal.run_id}:turn:${turn}`;
  const response = await askModel(
    turnRequest(agent, journal, { texts, specs }, context.correlationId, modelRunId),
    ports.model,
  );
  if (response instanceof BudgetExhaustedError)
    return handOver(journal, now, response.message, undefined, response.code);
  const taken = takenTurn(response);
  const tokens = {
    input: reportedCount(response.usage?.inputTokens),
    output: reportedCount(response.usage?.outputTokens),
  };
  const totals = {
    ...journal.totals,
    model_turns: turn,
    input_tokens: journal.totals.input_tokens + tokens.input,
    output_tokens: journal.totals.output_tokens + tokens.output,
    cost_micros: (journal.totals.cost_micros ?? 0) + spendOf(response).micros,
  };
  const messages = await withMessage(journal, await ports.content.put(taken.stored), ports.content);
  const step = {
    kind: "model" as const,
    model_run_id: modelRunId,
    asked: taken.taken ? taken.calls.map((call) => call.name) : [],
    ...(taken.taken ? {} : { outcome: "not taken" }),
    tokens,
    latency_ms: reportedLatency(response.latencyMs),
  };
  if (!taken.taken) {
    const refused = { ...totals, refused_calls: totals.refused_calls + taken.asked };
    const next = recorded(journal, step, now, { totals: refused, ...messages });
    return errorTurn(agent, next, ports, now, `Your turn was not taken: ${taken.problem}`);
  }
  if (taken.calls.length) {
    const pending = taken.calls.map((call) => ({
      id: call.id,
      name: call.name,
      input: call.input,
      turn,
    }));
    const next = recorded(journal, step, now, { totals, ...messages, pending });
    return refuseInvalidCalls(agent, next, ports, now);
  }
  const next = recorded(journal, step, now, { totals, ...messages });
  const answer = { text: taken.text, conversation: [...texts, taken.stored] };
  return answered(agent, next, answer, ports, now);
}

/**
 * What the model is asked on a turn: the conversation so far, the tools, the answer's schema,
 * and what the run has spent (for its budget).
 */
function turnRequest(
  agent: AgentDefinition,
  journal: AgentJournal,
  shown: { readonly texts: readonly string[]; readonly specs: readonly ModelToolSpec[] },
  correlationId: string | undefined,
  modelRunId: string,
): ModelRequest {
  const { totals } = journal;
  return {
    system: agent.instructions,
    messages: shown.texts.map((text) => JSON.parse(text) as ModelMessage),
    tools: [...shown.specs],
    output: {
      name: ANSWER_SCHEMA,
      schema: modelSchemaOf(agent.schemas, ANSWER_SCHEMA, agent.name),
    },
    ...agent.model,
    metadata: {
      role: agent.name,
      task_id: journal.task_id,
      correlation_id: correlationId,
      model_run_id: modelRunId,
      tenant_id: runScope(journal).tenant,
      run_id: journal.run_id,
    },
    runSpent: {
      tokens: totals.input_tokens + totals.output_tokens,
      micros: totals.cost_micros ?? 0,
    },
  };
}

/** Whose calls the run's are: its tenant's (the default tenant's when it names none) and its own. */
export function runScope(journal: AgentJournal): ModelScope {
  return { tenant: journal.tenant_id ?? DEFAULT_TENANT, run: journal.run_id };
}

/**
 * The model's turn (traced); a spent budget comes back as the error, for the run to be handed to
 * a person.
 */
async function askModel(request: ModelRequest, model: ModelPort) {
  try {
    return await converseTraced(model, request);
  } catch (error) {
    if (error instanceof BudgetExhaustedError) return error;
    throw error;
  }
}

/**
 * A text answer: COMPLETED when it fits `output`, else an error turn (bounded). `conversation`:
 * the texts of the journal's messages, the answer's last.
 */
async function answered(
  agent: AgentDefinition,
  journal: AgentJournal,
  answer: { readonly text: string; readonly conversation: readonly string[] },
  ports: AgentPorts,
  now: Date,
): Promise<StepResult> {
  const read = readAnswer(agent, answer.text);
  const problem = "problem" in read ? read.problem : await agent.accept?.(read.output, journal);
  if (problem === undefined && "output" in read) {
    const done = {
      ...journal,
      status: moved(journal, "TaskCompleted"),
      output: read.output,
      error_turns: 0,
    };
    const { conversation } = answer;
    return { journal: done, next: "end", recorded: latestStep(done), conversation };
  }
  return errorTurn(agent, journal, ports, now, `Your answer was not accepted: ${problem}`);
}

/** The answer parsed as JSON and checked against `output`, or what is wrong with it. */
function readAnswer(
  agent: AgentDefinition,
  answer: string,
): { readonly output: unknown } | { readonly problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(answer);
  } catch {
    return {
      problem:
        "it is not JSON. Answer with one JSON object that fits the required output, or call a tool.",
    };
  }
  const parsed = agent.output.safeParse(value);
  if (parsed.success) return { output: parsed.data };
  return { problem: z.issueLines(parsed.error, "(answer)").slice(0, ISSUE_LIMIT).join("; ") };
}

/** Tell the model what went wrong, as the next user message; too many in a row -> a person. */
async function errorTurn(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  now: Date,
  text: string,
): Promise<StepResult> {
  const errorTurns = journal.error_turns + 1;
  const limit = agent.maxErrorTurns ?? DEFAULT_MAX_ERROR_TURNS;
  const said = bounded(text);
  if (errorTurns >= limit)
    return handOver(
      { ...journal, error_turns: errorTurns },
      now,
      `${errorTurns} model turns in a row went wrong; the last: ${said}`,
    );
  const ref = await ports.content.put(JSON.stringify({ role: "user", text: said }));
  const next = {
    ...journal,
    error_turns: errorTurns,
    ...(await withMessage(journal, ref, ports.content)),
  };
  return { journal: next, next: "continue", recorded: latestStep(next) };
}

/** Calls to tools that do not exist, or with input that does not fit, are answered at once. */
async function refuseInvalidCalls(
  agent: AgentDefinition,
  journal: AgentJournal,
  ports: AgentPorts,
  now: Date,
): Promise<StepResult> {
  let refusedNow = 0;
  const pending: PendingCall[] = [];
  for (const call of journal.pending) {
    const problem = callProblem(agent, call, journal.subject);
    if (problem === undefined) {
      pending.push(call);
      continue;
    }
    refusedNow += 1;
    const ref = await ports.content.put(JSON.stringify({ error: problem }));
    pending.push({ ...call, result: { ref, is_error: true } });
  }
  const totals = { ...journal.totals, refused_calls: journal.totals.refused_calls + refusedNow };
  const errorTurns = refusedNow > 0 ? journal.error_turns + 1 : 0;
  const next = { ...journal, pending, totals, error_turns: errorTurns };
  const limit = agent.maxErrorTurns ?? DEFAULT_MAX_ERROR_TURNS;
  if (errorTurns >= limit)
    return handOver(next, now, `${errorTurns} model turns in a row asked for tools wrongly`);
  return { journal: await closeTurn(next, ports), next: "continue", recorded: latestStep(next) };
}

function callProblem(
  agent: AgentDefinition,
  call: PendingCall,
  subject: AgentJournal["subject"],
): string | undefined {
  const tool = agent.tools.find((t) => t.name === call.name);
  if (!tool)
    return `there is no tool named ${call.name}; the tools are: ${agent.tools.map((t) => t.name).join(", ")}. Nothing was run.`;
  const parsed = tool.input.safeParse(call.input);
  if (parsed.success) return outsideSubject(tool, parsed.data, subject);
  const issues = z.issueLines(parsed.error, "(input)").slice(0, ISSUE_LIMIT).join("; ");
  return bounded(`the input of ${call.name} does not fit its schema (${issues}). Nothing was run.`);
}

/** The most of an error the model is told (an answer's issues are bounded by nothing else). */
const ERROR_TEXT_LIMIT = 2000;

function bounded(text: string): string {
  return text.length <= ERROR_TEXT_LIMIT ? text : `${text.slice(0, ERROR_TEXT_LIMIT - 1)}…`;
}

/** Settle one tool call of the latest turn. */
async function callStep(
  agent: AgentDefinition,
  journal: AgentJournal,
  call: PendingCall,
  ports: AgentPorts,
  context: StepContext,
): Promise<StepResult> {
  const { now } = context;
  const tool = agent.tools.find((t) => t.name === call.name) as AnyTool;
  const input = tool.input.parse(call.input);
  const key = toolCallKey(journal.task_id, journal.run_id, call);
  const approval = tool.approval;
  if (approval?.required(input) && call.decision === undefined)
    return block(journal, now, {
      kind: "approval",
      tool_call_id: call.id,
      tool: tool.name,
      input,
      since: now.toISOString(),
      deadline: new Date(now.getTime() + approval.deadlineSeconds * 1000).toISOString(),
      reason: `${tool.name} needs a person's approval`,
    });
  const outcome = await settledBy(call, tool, input, key, ports, context, journal, agent);
  if (outcome.kind === "working") {
    const blocked = blockedOnTask(journal, { id: call.id, tool: tool.name, input }, outcome, now);
    return { journal: blocked, next: "wait", recorded: latestStep(blocked) };
  }
  if (outcome.kind === "unknown")
    return handOver(journal, now, outcome.message, {
      kind: "outcome",
      tool_call_id: call.id,
      tool: tool.name,
      input,
      key,
      since: now.toISOString(),
      reason: outcome.message,
    });
  const next = await settledCall(journal, call.id, tool, key, outcome, ports, now);
  // The turn that asked for the call is the newest message until the turn closes (closeTurn).
  const turnRef = journal.messages.at(-1);
  const resultRef = next.pending.find((p) => p.id === call.id)?.result?.ref;
  const refs = {
    ...(turnRef ? { turn_ref: turnRef } : {}),
    ...(resultRef ? { result_ref: resultRef } : {}),
  };
  const result = {
    journal: await closeTurn(next, ports),
    next: "continue" as const,
    recorded: { ...latestStep(next), ...refs },
  };
  if (tool.effect !== "write" || outcome.kind !== "succeeded") return result;
  const wrote = { tool: tool.name, tool_call_id: call.id, key, input, output: outcome.output };
  return { ...result, wrote };
}

/** The journal with the call's answer stored and the call recorded as a step. */
async function settledCall(
  journal: AgentJournal,
  callId: string,
  tool: AnyTool,
  key: string,
  outcome: Extract<CallOutcome, { kind: "succeeded" | "failed" }>,
  ports: AgentPorts,
  now: Date,
): Promise<AgentJournal> {
  const content =
    outcome.kind === "succeeded"
      ? outcome.output
      : { error: outcome.code, message: outcome.message };
  const ref = await storedAnswer(ports, JSON.stringify(content), tool, journal);
  const pending = journal.pending.map((p) =>
    p.id === callId ? { ...p, result: { ref, is_error: outcome.kind !== "succeeded" } } : p,
  );
  const totals = { ...journal.totals, tool_calls: journal.totals.tool_calls + 1 };
  const step = {
    kind: "tool" as const,
    tool_call_id: callId,
    tool: tool.name,
    outcome: outcome.kind === "succeeded" ? `succeeded (${outcome.by})` : `failed: ${outcome.code}`,
    ...(tool.effect === "write" ? { key } : {}),
  };
  return recorded(journal, step, now, { pending, totals });
}

/**
 * A tool's answer stored; one too large for the content store fails the step at once,
 * permanently, naming the tool and the run (a retry would run the tool to the same answer).
 */
async function storedAnswer(
  ports: AgentPorts,
  text: string,
  tool: AnyTool,
  journal: AgentJournal,
): Promise<string> {
  try {
    return await ports.content.put(text);
  } catch (error) {
    if (!(error instanceof PermanentError) || error.code !== "content.too_large") throw error;
    throw new PermanentError(
      "tool.output_too_large",
      `tool ${tool.name} of agent ${journal.agent} (run ${journal.run_id}) answered ${String(error.details.bytes)} bytes, more than can be stored (${String(error.details.limit)})`,
      {
        details: {
          tool: tool.name,
          agent: journal.agent,
          run_id: journal.run_id,
          ...error.details,
        },
      },
    );
  }
}

async function settledBy(
  call: PendingCall,
  tool: AnyTool,
  input: unknown,
  key: string,
  ports: AgentPorts,
  context: StepContext,
  journal: AgentJournal,
  agent: AgentDefinition,
): Promise<CallOutcome> {
  const decision = call.decision?.decision;
  if (decision === "reject")
    return { kind: "failed", code: "tool.rejected_by_person", message: personMessage(call) };
  if (decision === "not_applied")
    return { kind: "failed", code: "tool.not_applied", message: personMessage(call) };
  // No tool call starts for a run or tenant an operator stopped (throws OperatorStopError).
  await ports.model.admit?.(runScope(journal), "tool");
  const run = {
    tool,
    input,
    context: {
      taskId: journal.task_id,
      runId: journal.run_id,
      toolCallId: call.id,
      key,
      subject: journal.subject,
      now: context.now,
    },
    receiveCount: context.receiveCount,
    maxUnknownAttempts: agent.maxUnknownAttempts ?? DEFAULT_MAX_UNKNOWN_ATTEMPTS,
  };
  return inToolSpan({ tool: tool.name, callId: call.id, effect: tool.effect }, () =>
    tool.effect === "read" ? runReadTool(run) : runWriteTool(run, ports.sideEffects),
  );
}

function personMessage(call: PendingCall): string {
  const d = call.decision;
  return `${d?.decision} by ${d?.by}${d?.reason ? `: ${d.reason}` : ""}`;
}

/** Once every call of the turn has its answer, the answers are the next user message. */
export async function closeTurn(journal: AgentJournal, ports: AgentPorts): Promise<AgentJournal> {
  if (journal.pending.length === 0 || journal.pending.some((p) => p.result === undefined))
    return journal;
  const contents = await ports.content.getMany(journal.pending.map((p) => p.result?.ref ?? ""));
  const message: ModelMessage = {
    role: "user",
    text: "",
    toolResults: journal.pending.map((p, i) => ({
      toolCallId: p.id,
      content: JSON.parse(contents[i] ?? "null"),
      ...(p.result?.is_error ? { isError: true } : {}),
    })),
  };
  const ref = await ports.content.put(JSON.stringify(message));
  return { ...journal, pending: [], ...(await withMessage(journal, ref, ports.content)) };
}

function block(journal: AgentJournal, now: Date, waiting: Waiting): StepResult {
  const next = recorded(
    journal,
    {
      kind: "tool",
      tool_call_id: waiting.tool_call_id,
      tool: waiting.tool,
      outcome: "awaiting approval",
    },
    now,
    {
      status: moved(journal, "TaskBlocked"),
      waiting,
    },
  );
  return { journal: next, next: "wait", recorded: latestStep(next) };
}

/**
 * NEEDS_HUMAN: a person takes over (an unknown write outcome, a spent turn or model budget).
 * `code` says why (the failure's code): `tool.outcome_unknown` when a write's outcome is waited
 * for, else `agent.needs_human` unless given.
 */
function handOver(
  journal: AgentJournal,
  now: Date,
  reason: string,
  waiting?: Waiting,
  code?: string,
): StepResult {
  const next: AgentJournal = {
    ...journal,
    status: moved(journal, "NeedsHuman"),
    waiting: waiting ?? { kind: "answer", since: now.toISOString(), reason },
    failure: {
      code: code ?? (waiting ? "tool.outcome_unknown" : "agent.needs_human"),
      message: reason,
    },
    updated_at: now.toISOString(),
  };
  return { journal: next, next: "wait", recorded: latestStep(next) };
}
