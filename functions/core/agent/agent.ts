import type * as z from "../../../schemas/zod";
import { type RunState, type RunTrigger, TRANSITIONS } from "../agent-run-model";
import { PermanentError } from "../errors";
import { type ModelSchemas, modelSchemaOf, toolSchemaName } from "../model-schemas";
import { ERASED } from "../personal-data/erased";
import type { ContentStore } from "./content";
import { conversationRefs, type EarlierMessages } from "./messages";
import type { ToolDefinition } from "./tool";

/**
 * An agent that loops (seed 000 §3.2, §11.4): a model turn, then the tools it asks for, then the
 * next turn, until a final answer valid against `output`, the turn budget (NEEDS_HUMAN), or a wait
 * for a person. Declared once with `defineAgent`; run one step per delivery by ./loop.ts, each step
 * committed before the next begins, so a redelivery resumes from the last committed step.
 */

// biome-ignore lint/suspicious/noExplicitAny: a list of tools of any input and output types
export type AnyTool = ToolDefinition<any, any>;

// biome-ignore lint/suspicious/noExplicitAny: an agent of any output type
export interface AgentDefinition<O = any> {
  /** The agent's name (its consumer group's, by convention). */
  readonly name: string;
  /** The system prompt. */
  readonly instructions: string;
  readonly tools: readonly AnyTool[];
  /** The final answer: JSON text the model gives instead of asking for a tool. */
  readonly output: z.ZodMiniType<O>;
  /**
   * What the model is shown of `output` (`answer`) and of each tool's input (`tool:<name>`), as
   * JSON Schema: the role folder's generated model-schemas.json (../model-schemas.ts;
   * `agentModelSchemas` lists them for the role module).
   */
  readonly schemas: ModelSchemas;
  /** Model turns a run may take; when they are spent without an answer, NEEDS_HUMAN. */
  readonly maxTurns: number;
  /**
   * Model turns in a row that may go wrong (an unknown tool, bad tool input, an answer that does
   * not fit `output`) before the run is handed to a person. @default 3
   */
  readonly maxErrorTurns?: number;
  /** Deliveries a write's outcome may stay unknown before a person is asked. @default 5 */
  readonly maxUnknownAttempts?: number;
  readonly model?: { readonly maxTokens?: number; readonly temperature?: number };
  /**
   * A last check of a final answer against the outside world (an answer that says a refund was
   * made, when the payment system has none): a problem is sent back to the model as an error turn.
   */
  readonly accept?: (output: O, journal: AgentJournal) => Promise<string | undefined>;
}

export const DEFAULT_MAX_ERROR_TURNS = 3;
export { DEFAULT_MAX_UNKNOWN_ATTEMPTS } from "../write-once";
export const MAX_TURNS_LIMIT = 10_000;
/** How many of the latest steps the run's item keeps in full (the rest are counted). */
export const JOURNAL_WINDOW = 20;

/** The name the answer's schema is kept under in an agent's schemas. */
export const ANSWER_SCHEMA = "answer";

/** The zod schemas an agent shows its model, by the names its schemas book keeps them under. */
export function agentModelSchemas(
  tools: Readonly<Record<string, z.core.$ZodType>>,
  output: z.core.$ZodType,
): Record<string, z.core.$ZodType> {
  return {
    [ANSWER_SCHEMA]: output,
    ...Object.fromEntries(
      Object.entries(tools).map(([name, input]) => [toolSchemaName(name), input]),
    ),
  };
}

/**
 * An agent, checked: tools with distinct names, a turn budget in range, a JSON Schema in `schemas`
 * for the answer and for each tool's input but those another system describes (`describe`).
 */
export function defineAgent<O>(definition: AgentDefinition<O>): AgentDefinition<O> {
  const invalid = (message: string) =>
    new PermanentError("agent.invalid_definition", `agent ${definition.name}: ${message}`);
  const { maxTurns } = definition;
  if (!Number.isInteger(maxTurns) || maxTurns < 1 || maxTurns > MAX_TURNS_LIMIT)
    throw invalid(`maxTurns must be an integer from 1 to ${MAX_TURNS_LIMIT}, got ${maxTurns}`);
  const names = definition.tools.map((tool) => tool.name);
  const twice = names.find((name, i) => names.indexOf(name) !== i);
  if (twice !== undefined) throw invalid(`two tools are named ${twice}`);
  const schemed = definition.tools.filter((tool) => tool.describe === undefined);
  for (const name of [ANSWER_SCHEMA, ...schemed.map((tool) => toolSchemaName(tool.name))])
    modelSchemaOf(definition.schemas, name, `agent ${definition.name}`);
  return definition;
}

/** A tool call of the run's latest model turn, and what became of it so far. */
export interface PendingCall {
  /** The model's id of the call, unique within its turn. */
  readonly id: string;
  readonly name: string;
  readonly input: unknown;
  /**
   * The model turn that asked for it (the run's `model_turns` then), part of its key
   * (./tool-call.ts toolCallKey); absent in a call taken before calls kept it.
   */
  readonly turn?: number;
  /** The answer sent back to the model (content reference), once the call is settled. */
  readonly result?: { readonly ref: string; readonly is_error: boolean };
  /** A person's decision on a call that needed approval. */
  readonly decision?: PersonDecision;
}

export interface PersonDecision {
  readonly decision: "approve" | "reject" | "applied" | "not_applied" | "answer";
  readonly by: string;
  readonly reason?: string;
  readonly at: string;
}

/** A decision taken on one of the run's calls, as the journal keeps it once the call has run. */
export interface DecidedCall {
  readonly tool_call_id: string;
  /**
   * The model turn of the call decided (its `PendingCall.turn`): a model may give each turn's
   * calls the same ids, and a decision on one turn's call is no decision on the next's. Absent
   * for a call that kept no turn, and in a decision kept before decisions kept it.
   */
  readonly turn?: number;
  readonly decision: PersonDecision["decision"];
  /** Who decided: a person, or `deadline`. */
  readonly by: string;
  readonly at: string;
}

/**
 * What a decision answers: an approval (approve, reject), a write's unknown outcome, or the run's
 * own answer (a run handed over for good: no call).
 */
const ANSWERS: Readonly<Record<PersonDecision["decision"], "approval" | "outcome" | "answer">> = {
  approve: "approval",
  reject: "approval",
  applied: "outcome",
  not_applied: "outcome",
  answer: "answer",
};

/**
 * The decision already taken on call `callId` that answers what `decision` answers (its approval,
 * or its outcome), by a person or a deadline; undefined when none was. A decision names the
 * call's id alone, which is unique only within its turn: it is about the call of that id pending
 * now, whose decisions are those kept for its turn and id (`decisions`, and the call's own in a
 * run stored before `decisions`), never an earlier turn's call of the same id. With no such call
 * pending (it ran and its turn closed), the latest decision kept on a call of that id answers: a
 * decision repeated after its call ran.
 */
export function decisionOn(
  journal: Pick<AgentJournal, "decisions" | "pending">,
  callId: string,
  decision: PersonDecision["decision"],
): Pick<PersonDecision, "decision" | "by" | "at"> | undefined {
  const answers = (d: { decision: PersonDecision["decision"] } | undefined) =>
    d !== undefined && ANSWERS[d.decision] === ANSWERS[decision];
  const call = journal.pending.find((p) => p.id === callId);
  const onThisCall = (d: DecidedCall) =>
    call === undefined ? d.tool_call_id === callId : decidedOn(d, call);
  const kept = (journal.decisions ?? []).filter((d) => onThisCall(d) && answers(d));
  if (kept.length > 0) return kept.at(-1);
  return answers(call?.decision) ? call?.decision : undefined;
}

/**
 * Whether a kept decision was taken on `call`: the same id in the same turn. One kept without a
 * turn counts for a call without one (taken before calls kept their turn, keyed without it too:
 * ./tool-call.ts toolCallKey), never for a call of a later turn; one kept so on a call that has a
 * turn is on that call itself while it is pending (`PendingCall.decision`).
 */
function decidedOn(decided: DecidedCall, call: Pick<PendingCall, "id" | "turn">): boolean {
  return decided.tool_call_id === call.id && decided.turn === call.turn;
}

/** The journal's decisions with one more, on `call` (it keeps the latest JOURNAL_WINDOW). */
export function withDecision(
  journal: AgentJournal,
  call: Pick<PendingCall, "id" | "turn">,
  decision: PersonDecision,
): readonly DecidedCall[] {
  const { decision: taken, by, at } = decision;
  const entry: DecidedCall = {
    tool_call_id: call.id,
    ...(call.turn === undefined ? {} : { turn: call.turn }),
    decision: taken,
    by,
    at,
  };
  return [...(journal.decisions ?? []), entry].slice(-JOURNAL_WINDOW);
}

/** What a BLOCKED or NEEDS_HUMAN run waits for. */
export interface Waiting {
  /**
   * `approval`: a call needs a person's yes or no; `outcome`: a write's outcome is unknown;
   * `task`: the work a write started at an outside system goes on (./task-wait.ts: no person).
   */
  readonly kind: "approval" | "outcome" | "answer" | "task";
  readonly tool_call_id?: string;
  readonly tool?: string;
  readonly input?: unknown;
  readonly key?: string;
  readonly since: string;
  /** When an approval's deadline passes, or outside work is polled next (ISO 8601). */
  readonly deadline?: string;
  readonly reason: string;
  /** For `task`: the outside system's work (an MCP task), as its last poll found it. */
  readonly remote_task?: { readonly id: string; readonly status: string };
}

export interface StartedBy {
  readonly event_type: string;
  readonly payload: unknown;
  readonly input_version?: number;
}

/** One committed step, as the journal's window keeps it. */
export interface JournalStep {
  readonly step: number;
  readonly at: string;
  readonly kind: "start" | "model" | "tool" | "person";
  /** Model turns: `<run>:turn:<n>`, the tools asked for, tokens and latency. */
  readonly model_run_id?: string;
  readonly asked?: readonly string[];
  readonly tokens?: { readonly input: number; readonly output: number };
  readonly latency_ms?: number;
  /** Tool calls: the call, its tool and how it ended. */
  readonly tool_call_id?: string;
  readonly tool?: string;
  readonly outcome?: string;
  readonly key?: string;
  /**
   * A settled tool call's, on its step command only (the window does not keep it): the content
   * reference of the model turn that asked for the call, where its input is.
   */
  readonly turn_ref?: string;
  /** A settled tool call's, likewise: the content reference of the answer the model was given. */
  readonly result_ref?: string;
}

export interface JournalTotals {
  readonly model_turns: number;
  readonly tool_calls: number;
  readonly refused_calls: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  /** Write calls that took effect (run, or applied by a person); absent in older runs: none. */
  readonly writes?: number;
  /**
   * What the model turns cost, in millionths of a US$ (../model-prices.ts): the run's spend for
   * its budget (../model-guard.ts). Absent in older runs: none.
   */
  readonly cost_micros?: number;
}

/** Why a run stops before its answer: its turn was cancelled, or the customer wrote again. */
export interface RunStop {
  readonly reason: "cancelled" | "superseded";
  readonly at: string;
  /** Who cancelled the turn. */
  readonly by?: string;
}

/**
 * The run's item: small and bounded whatever the run's length. The conversation with the model is
 * kept as content references (./content.ts), the newest in the item and the older in pages
 * (./messages.ts); the latest steps in full in `window`.
 */
export interface AgentJournal {
  /** The agent run's key: its `agent_run` aggregate id, the same from its start to its end. */
  readonly run_id: string;
  /**
   * The run under way (the envelope's `run_id`, seed 000 §4.1): new at the start and at each
   * resume after a person's answer (./agent-role.ts). Absent on journals stored before it was
   * kept: `run_id` then (currentRunOf).
   */
  readonly current_run?: string;
  readonly task_id: string;
  readonly agent: string;
  /** What the run is about (ids its facts carry: an order, a conversation). */
  readonly subject: Readonly<Record<string, string>>;
  /** The command that began the run: its payload, and the input version it was made from. */
  readonly started_by: StartedBy;
  /** The chain the run belongs to (its start command's correlation id). */
  readonly correlation_id: string;
  /** The tenant whose run it is: its start command's (absent: the default tenant). */
  readonly tenant_id?: string;
  /**
   * The agent's decision command type: what a person's answer is sent as (the CLI, the console)
   * and what the lease sweeper sends a run BLOCKED past its approval's deadline
   * (functions/core/sweeper.ts).
   */
  readonly decision_type: string;
  readonly status: RunState;
  /** Steps committed (the continue command of step n carries n). */
  readonly step: number;
  readonly error_turns: number;
  /** The references of the conversation's newest messages (./messages.ts: MESSAGES_KEPT). */
  readonly messages: readonly string[];
  /** The pages of its older messages, once it has more than the item keeps (./messages.ts). */
  readonly earlier?: EarlierMessages;
  readonly pending: readonly PendingCall[];
  /**
   * The latest JOURNAL_WINDOW decisions taken on the run's calls: what tells a decision repeated
   * after its call ran (and left `pending`) from one the run never waited for.
   */
  readonly decisions?: readonly DecidedCall[];
  readonly window: readonly JournalStep[];
  readonly totals: JournalTotals;
  readonly waiting?: Waiting;
  /**
   * Set when the run's turn was cancelled or superseded: the run ends CANCELLED at its next step
   * unless it has written (./agent-role.ts, `stopped`).
   */
  readonly stop?: RunStop;
  /** The final answer. */
  readonly output?: unknown;
  readonly failure?: { readonly code: string; readonly message: string };
  readonly started_at: string;
  readonly updated_at: string;
}

/** The run of the agent run under way (AgentJournal.current_run). */
export function currentRunOf(journal: Pick<AgentJournal, "run_id" | "current_run">): string {
  return journal.current_run ?? journal.run_id;
}

const ZERO: JournalTotals = {
  model_turns: 0,
  tool_calls: 0,
  refused_calls: 0,
  input_tokens: 0,
  output_tokens: 0,
};

/** A run at its start: RUNNING, the first user message stored, no step taken. */
export function newJournal(fields: {
  runId: string;
  taskId: string;
  agent: string;
  subject: Readonly<Record<string, string>>;
  startedBy: StartedBy;
  correlationId: string;
  tenantId?: string;
  decisionType: string;
  firstMessage: string;
  now: Date;
}): AgentJournal {
  const at = fields.now.toISOString();
  return {
    run_id: fields.runId,
    task_id: fields.taskId,
    agent: fields.agent,
    subject: fields.subject,
    started_by: fields.startedBy,
    correlation_id: fields.correlationId,
    ...(fields.tenantId === undefined ? {} : { tenant_id: fields.tenantId }),
    decision_type: fields.decisionType,
    status: "RUNNING",
    step: 0,
    error_turns: 0,
    messages: [fields.firstMessage],
    pending: [],
    window: [],
    totals: ZERO,
    started_at: at,
    updated_at: at,
  };
}

/** The run's status after `trigger`, by the agent run's transition table (agent-run-model.ts). */
export function moved(journal: AgentJournal, trigger: RunTrigger): RunState {
  const next = TRANSITIONS[journal.status][trigger];
  if (next === undefined)
    throw new PermanentError(
      "agent.illegal_transition",
      `agent run ${journal.run_id} cannot take ${trigger} while ${journal.status}`,
      { details: { run_id: journal.run_id, status: journal.status, trigger } },
    );
  return next;
}

/** The latest step the journal's window keeps (step 0, the start, when it keeps none yet). */
export function latestStep(journal: AgentJournal): JournalStep {
  return (
    journal.window[journal.window.length - 1] ?? { step: 0, at: journal.started_at, kind: "start" }
  );
}

/**
 * The step of the person's answer that ended a run handed over for good (`answer by <who>`), or
 * undefined when no such answer ended it.
 */
export function answeredByPerson(journal: AgentJournal): JournalStep | undefined {
  const last = latestStep(journal);
  return journal.status === "COMPLETED" && last.outcome?.startsWith("answer by ")
    ? last
    : undefined;
}

/** The journal with one more step recorded (the window keeps the latest JOURNAL_WINDOW). */
export function recorded(
  journal: AgentJournal,
  step: Omit<JournalStep, "step" | "at">,
  now: Date,
  change: Partial<AgentJournal> = {},
): AgentJournal {
  const number = journal.step + 1;
  const entry: JournalStep = { step: number, at: now.toISOString(), ...step };
  return {
    ...journal,
    ...change,
    step: number,
    window: [...journal.window, entry].slice(-JOURNAL_WINDOW),
    updated_at: now.toISOString(),
  };
}

/** The fields of a run's answer and records that hold words: what an erasure leaves `[erased]`. */
const WORDS = new Set(["text", "reply_text", "reason", "answer", "message", "summary"]);

function erasedWords(value: unknown): unknown {
  if (!value || typeof value !== "object" || Array.isArray(value)) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, WORDS.has(k) && typeof v === "string" ? ERASED : v]),
  );
}

/**
 * A run's journal once its customer is erased (Role.personalState): the words of its answer, of
 * its calls' inputs, of what it waits for, of its failure and of people's decisions `[erased]`;
 * ids, states and counts
 * kept. Its messages are stored texts, erased where they are kept (`journalContent`).
 */
export function erasedJournal(journal: AgentJournal): AgentJournal {
  return {
    ...journal,
    pending: journal.pending.map((call) => ({
      ...call,
      input: erasedWords(call.input),
      ...(call.decision?.reason === undefined
        ? {}
        : { decision: { ...call.decision, reason: ERASED } }),
    })),
    ...(journal.output === undefined ? {} : { output: erasedWords(journal.output) }),
    ...(journal.waiting
      ? {
          waiting: {
            ...journal.waiting,
            reason: ERASED,
            ...(journal.waiting.input === undefined
              ? {}
              : { input: erasedWords(journal.waiting.input) }),
          },
        }
      : {}),
    ...(journal.failure ? { failure: { ...journal.failure, message: ERASED } } : {}),
  };
}

/**
 * The stored texts a journal refers to: its messages (read from its pages, which hold references
 * only) and its settled calls' answers.
 */
export async function journalContent(
  journal: AgentJournal,
  content: Pick<ContentStore, "getMany">,
): Promise<string[]> {
  const answers = journal.pending.flatMap((p) => (p.result ? [p.result.ref] : []));
  return [...(await conversationRefs(journal, content)), ...answers];
}
