import { type AggregateRef, type Envelope, tenantOf } from "../../../schemas";
import { agentRunIdOf } from "../agent-run";
import type { EmitSpec } from "../emit";
import { OperatorStopError } from "../model-guard";
import type { DiscardReason, StateSummary } from "../ports";
import type { DecideContext, Decision, PersonalState, Role, RoleDescriptor } from "../role";
import {
  type AgentDefinition,
  type AgentJournal,
  currentRunOf,
  erasedJournal,
  type JournalStep,
  journalContent,
  newJournal,
} from "./agent";
import { scopedContent } from "./content";
import { type AgentPorts, agentStep, type StepResult, type WriteDone } from "./loop";
import { conversationTexts } from "./messages";
import { approvalExpired, personDecides } from "./person";
import { cancelTurn, operatorStopped, type Superseded, stopDiscard, stopped } from "./stop";
import { taskPollDue, waitsForTask } from "./task-wait";

/**
 * An agent as a consumer group's role: each run is the aggregate `agent_run/<run id>`, and each
 * step is one delivery of the agent's step command on the run's own stream. The version gate
 * makes a redelivered step a duplicate, so a model turn or tool call whose step committed is never
 * asked or run again; a step that did not commit is taken again (a write tool then learns its
 * outcome by its key, ./tool-call.ts).
 */

export const AGENT_RUN_AGGREGATE = "agent_run";

/** The command that starts a run, the run's step command, and a person's decision. */
export interface AgentCommandTypes {
  readonly start: string;
  readonly step: string;
  readonly decision: string;
  /**
   * The command that cancels the customer's turn a run works on (its run: `runOfTurn` of its
   * task): the run stops (./stop.ts).
   */
  readonly cancel?: string;
}

/** An agent's group outside its handler: its identity and one state per run. */
export interface AgentDescriptor extends RoleDescriptor {
  readonly types: AgentCommandTypes;
}

/**
 * The descriptor of an agent's group: the run of a start command is `runOf(event)`; `facts` are
 * what its `finish` and `needsPerson` may emit (it emits its own step commands besides).
 */
export function agentDescriptor(fields: {
  group: string;
  types: AgentCommandTypes;
  runOf: (start: Envelope) => string;
  facts: readonly string[];
  /**
   * For an agent that works on a customer's conversation: the run a turn (its task) started. Its
   * journal and messages are then erased with the customer (Role.personalState).
   */
  runOfTurn?: (taskId: string) => string;
}): AgentDescriptor {
  const { group, types, runOf, facts, runOfTurn } = fields;
  if (types.cancel !== undefined && runOfTurn === undefined)
    throw new Error(`agent ${group}: a cancel of a turn (${types.cancel}) needs runOfTurn`);
  return {
    group,
    types,
    ...(runOfTurn
      ? {
          personalState: {
            stateOf: ({ taskId }) =>
              taskId ? { type: AGENT_RUN_AGGREGATE, id: runOfTurn(taskId) } : undefined,
            erase: erasedJournal,
            contentOf: journalContent,
          } satisfies PersonalState<AgentJournal>,
        }
      : {}),
    subscriptions: [
      types.start,
      types.step,
      types.decision,
      ...(types.cancel ? [types.cancel] : []),
    ],
    emits: [types.step, ...facts],
    stateOf: (event): AggregateRef => ({
      type: AGENT_RUN_AGGREGATE,
      id:
        event.event_type === types.start
          ? runOf(event)
          : event.event_type === types.cancel && runOfTurn
            ? runOfTurn(event.task_id)
            : (event.payload as { run_id: string }).run_id,
    }),
  };
}

/**
 * The texts of a run's conversation (its journal's `messages`: the first message, each model turn,
 * each turn's tool results, refusals and errors), oldest first. A run a model's answer ended gives
 * the texts its final step read from the content store moments before, with the answer, so they
 * are not read twice; any other end (a person's answer, a deadline) reads them from the store,
 * once, on the first ask. Nothing is kept across deliveries: a customer's erasure of the stored
 * conversation holds for every later step.
 */
export type RunConversation = () => Promise<readonly string[]>;

export interface AgentRoleSpec {
  readonly descriptor: AgentDescriptor;
  readonly agent: AgentDefinition;
  /** The run a start command begins: the first user message and what the run is about. */
  begin(event: Envelope): Promise<{
    readonly prompt: string;
    readonly subject: Readonly<Record<string, string>>;
  }>;
  /**
   * The facts of a run that ended (COMPLETED, or FAILED by a deadline). `conversation` gives the
   * texts of the run's conversation (RunConversation), for what checks the run's answer against
   * what its model saw (an output guard).
   */
  finish(journal: AgentJournal, conversation: RunConversation): Promise<EmitSpec[]>;
  /** The fact that a run waits for a person. */
  needsPerson(journal: AgentJournal): Promise<EmitSpec[]>;
  /**
   * The facts of a write that took effect (a refund made), committed with the step that learnt
   * it, whatever becomes of the run after: what moved outside AgentBus is always a fact.
   */
  wrote?(journal: AgentJournal, write: WriteDone): Promise<EmitSpec[]>;
  /** For an agent that answers a customer's turn: whether a newer message superseded it. */
  readonly superseded?: Superseded;
  /**
   * The facts of a turn the agent no longer answers (./stop.ts): its start discarded, or its run
   * stopped, with the reason (`superseded`, `cancelled`); committed with the discard, so that
   * what waits on the turn hears it gets no answer from this agent.
   */
  stoppedFacts?(
    reason: DiscardReason,
    event: Envelope,
    journal: AgentJournal | undefined,
  ): Promise<EmitSpec[]>;
  readonly ports: AgentPorts;
}

export function agentRole(spec: AgentRoleSpec): Role<AgentJournal> {
  const { types } = spec.descriptor;
  return {
    ...spec.descriptor,
    summarize: summarizeAgentRun,
    // A run's journal (1-3 KB of JSON, written on every step of the run) is read by AgentBus
    // alone: kept deflated, each step's write bills about half the units.
    compactState: true,
    discard: (state, event) => stopDiscard(state, event, types.start, spec.superseded),
    // A start discarded before its run began: the run will never say so itself.
    async discarded(state, event, reason) {
      if (state || event.event_type !== types.start || !spec.stoppedFacts) return undefined;
      return { emit: declared(spec, await spec.stoppedFacts(reason, event, undefined)) };
    },
    // A person's decision and the sweeper's deadline are obeyed in the run's tenant only (one
    // that names none: the default tenant's).
    tenantOfState: tenantOf,
    async decide(state, event, context) {
      const run = inRunScope(spec, event);
      const decision = await decideOn(run, state, event, context);
      return withCurrentRun(run, state, event, context.receiveCount, decision);
    },
  };
}

/**
 * The spec as the run an event goes to uses it: its texts stored in the run's own scope, keyed
 * by the run's state (../agent/content.ts ContentStore), so that erasing its customer overwrites
 * no text another run reads.
 */
function inRunScope(spec: AgentRoleSpec, event: Envelope): AgentRoleSpec {
  const run = spec.descriptor.stateOf?.(event) ?? event.aggregate;
  const content = scopedContent(spec.ports.content, `${run.type}#${run.id}`);
  return { ...spec, ports: { ...spec.ports, content } };
}

/** What the run decides on a start, a step, a person's answer, a cancel or a deadline. */
async function decideOn(
  spec: AgentRoleSpec,
  state: AgentJournal | undefined,
  event: Envelope,
  context: DecideContext<AgentJournal>,
): Promise<Decision<AgentJournal>> {
  const { types } = spec.descriptor;
  if (event.event_type === types.start) return start(spec, state, event, context.now);
  if (event.event_type === types.cancel)
    return cancelTurn(state, event, () => notStarted(spec, event, context.now), context.now);
  if (!state) return {};
  if (takesStep(spec, state, event)) {
    const stop = await stopped(spec.agent, state, spec.ports, spec.superseded, context.now);
    if (stop) return withStoppedFacts(spec, stop, event, state);
  }
  const expired = approvalExpired(spec.agent, state, context.now);
  if (expired) return outcome(spec, expired);
  // The sweeper's deadline of a run waiting for outside work: the step that polls it, now.
  const polling = event.event_type === types.decision && taskPollDue(state, context.now);
  if (polling) return taken(spec, state, polling, event, context);
  if (event.event_type === types.decision) return decision(spec, state, event, context);
  return step(spec, state, event, context);
}

/**
 * The decision stamped with the run that makes it. A start, and a person's answer that resumes
 * the agent run, begin a new run (`agentRunIdOf`: the group, the message, its receive count, so a
 * decision made again in one delivery names the same run), kept as the journal's `current_run`;
 * everything the decision emits carries the run as `run_id`, and a resume's the run it resumed as
 * `resumed_from`.
 */
function withCurrentRun(
  spec: AgentRoleSpec,
  before: AgentJournal | undefined,
  event: Envelope,
  receiveCount: number,
  decision: Decision<AgentJournal>,
): Decision<AgentJournal> {
  const { types, group } = spec.descriptor;
  // A poll of outside work the run waits for (./task-wait.ts) goes on with the same run.
  const begins =
    decision.state !== undefined &&
    (event.event_type === types.start ||
      (event.event_type === types.decision && before !== undefined && !waitsForTask(before)));
  const journal =
    begins && decision.state
      ? { ...decision.state, current_run: agentRunIdOf(group, event, receiveCount) }
      : (decision.state ?? before);
  if (!journal) return decision;
  const runId = currentRunOf(journal);
  const resumed =
    begins && before && event.event_type === types.decision
      ? { resumedFrom: currentRunOf(before) }
      : {};
  return {
    ...decision,
    ...(begins ? { state: journal } : {}),
    ...(decision.emit
      ? { emit: decision.emit.map((emitted) => ({ ...emitted, runId, ...resumed })) }
      : {}),
  };
}

async function start(
  spec: AgentRoleSpec,
  state: AgentJournal | undefined,
  event: Envelope,
  now: Date,
): Promise<Decision<AgentJournal>> {
  if (state) return {};
  const { prompt, subject } = await spec.begin(event);
  const runId = spec.descriptor.stateOf?.(event).id ?? event.aggregate.id;
  const first = await spec.ports.content.put(JSON.stringify({ role: "user", text: prompt }));
  const journal = newJournal({
    runId,
    taskId: event.task_id,
    agent: spec.agent.name,
    subject,
    startedBy: {
      event_type: event.event_type,
      payload: event.payload,
      ...(event.input_version === undefined ? {} : { input_version: event.input_version }),
    },
    correlationId: event.correlation_id,
    ...(event.tenant_id === undefined ? {} : { tenantId: event.tenant_id }),
    decisionType: spec.descriptor.types.decision,
    firstMessage: first,
    now,
  });
  return {
    state: journal,
    emit: [stepCommand(spec, journal, { step: 0, at: journal.started_at, kind: "start" })],
  };
}

/** A step the run takes next, or a decision on the approval it waits for. */
function takesStep(spec: AgentRoleSpec, state: AgentJournal, event: Envelope): boolean {
  const { types } = spec.descriptor;
  if (event.event_type === types.decision) return state.status === "BLOCKED";
  const { step: asked } = event.payload as { step: number };
  return event.event_type === types.step && state.status === "RUNNING" && asked === state.step + 1;
}

/** The run of a turn cancelled before its start command came: kept so that start is dropped. */
function notStarted(spec: AgentRoleSpec, cancel: Envelope, now: Date): AgentJournal {
  const journal = newJournal({
    runId: spec.descriptor.stateOf?.(cancel).id ?? cancel.aggregate.id,
    taskId: cancel.task_id,
    agent: spec.agent.name,
    subject: {},
    startedBy: { event_type: cancel.event_type, payload: cancel.payload },
    correlationId: cancel.correlation_id,
    ...(cancel.tenant_id === undefined ? {} : { tenantId: cancel.tenant_id }),
    decisionType: spec.descriptor.types.decision,
    firstMessage: "",
    now,
  });
  return { ...journal, messages: [] };
}

async function step(
  spec: AgentRoleSpec,
  state: AgentJournal,
  event: Envelope,
  context: DecideContext<AgentJournal>,
): Promise<Decision<AgentJournal>> {
  // The registry checked the payload against the step command's schema on delivery.
  const { step: asked } = event.payload as { step: number };
  if (state.status !== "RUNNING" || asked !== state.step + 1) return {};
  return taken(spec, state, state, event, context);
}

/** The run's next step, from `journal` (`state`, or `state` made RUNNING to poll outside work). */
async function taken(
  spec: AgentRoleSpec,
  state: AgentJournal,
  journal: AgentJournal,
  event: Envelope,
  context: DecideContext<AgentJournal>,
): Promise<Decision<AgentJournal>> {
  try {
    const result = await agentStep(spec.agent, journal, spec.ports, {
      now: context.now,
      receiveCount: context.receiveCount,
      correlationId: event.correlation_id,
    });
    return await outcome(spec, result);
  } catch (error) {
    if (!(error instanceof OperatorStopError)) throw error;
    return withStoppedFacts(spec, operatorStopped(state, error.stop, context.now), event, state);
  }
}

/** A run's stop, with the facts of a turn it no longer answers when it was discarded. */
async function withStoppedFacts(
  spec: AgentRoleSpec,
  stop: Decision<AgentJournal>,
  event: Envelope,
  state: AgentJournal,
): Promise<Decision<AgentJournal>> {
  if (!stop.discarded || !spec.stoppedFacts) return stop;
  return { ...stop, emit: declared(spec, await spec.stoppedFacts(stop.discarded, event, state)) };
}

async function decision(
  spec: AgentRoleSpec,
  state: AgentJournal,
  event: Envelope,
  context: DecideContext<AgentJournal>,
): Promise<Decision<AgentJournal>> {
  const answer = event.payload as {
    tool_call_id?: string;
    decision: "approve" | "reject" | "applied" | "not_applied" | "answer" | "deadline";
    output?: unknown;
    reason?: string;
    requested_by: string;
    waiting_since?: string;
  };
  // The sweeper's `deadline` for a run that no longer waits (or not yet past it) changes nothing:
  // a deadline that passed was settled before this (approvalExpired in decide).
  if (answer.decision === "deadline") return {};
  const result = await personDecides(
    spec.agent,
    state,
    { ...answer, decision: answer.decision, by: answer.requested_by },
    spec.ports,
    context.now,
  );
  // The same decision again (two people, or a command sent twice) changes nothing.
  return result ? outcome(spec, result) : {};
}

/**
 * What a step's result commits: the journal, the facts of a write it learnt took effect, and the
 * next step, the end, or the wait.
 */
async function outcome(spec: AgentRoleSpec, result: StepResult): Promise<Decision<AgentJournal>> {
  const journal = result.wrote ? withWriteCounted(result.journal) : result.journal;
  const wrote =
    result.wrote && spec.wrote ? declared(spec, await spec.wrote(journal, result.wrote)) : [];
  if (result.next === "continue")
    return { state: journal, emit: [...wrote, stepCommand(spec, journal, result.recorded)] };
  if (result.next === "end") {
    const facts = await spec.finish(journal, conversationOf(result, spec.ports));
    return { state: journal, emit: [...wrote, ...declared(spec, facts)] };
  }
  // A run waiting for outside work waits for nobody: its next poll is due at the deadline.
  const facts = waitsForTask(journal) ? [] : declared(spec, await spec.needsPerson(journal));
  return { state: journal, emit: [...wrote, ...facts], dueAt: journal.waiting?.deadline ?? null };
}

/** The conversation of a run that ended (RunConversation): the step's own texts, or one read. */
function conversationOf(result: StepResult, ports: AgentPorts): RunConversation {
  let read: Promise<readonly string[]> | undefined;
  return () => {
    read ??= result.conversation
      ? Promise.resolve(result.conversation)
      : conversationTexts(result.journal, ports.content);
    return read;
  };
}

/** The journal with one more write that took effect (./stop.ts: such a run is not stopped). */
function withWriteCounted(journal: AgentJournal): AgentJournal {
  return { ...journal, totals: { ...journal.totals, writes: (journal.totals.writes ?? 0) + 1 } };
}

/** The facts of a run, each of a type its descriptor declares (as `defineRole` holds a role to). */
function declared(spec: AgentRoleSpec, facts: EmitSpec[]): EmitSpec[] {
  const emits = spec.descriptor.emits ?? [];
  for (const fact of facts)
    if (!emits.includes(fact.type))
      throw new Error(
        `agent ${spec.descriptor.group} emitted ${fact.type}, which is not among its emits (${emits.join(", ")})`,
      );
  return facts;
}

/** The run's next step command, saying what the step before did. */
function stepCommand(spec: AgentRoleSpec, journal: AgentJournal, done: JournalStep): EmitSpec {
  const { at: _at, tokens, ...rest } = done;
  return {
    type: spec.descriptor.types.step,
    payload: {
      run_id: journal.run_id,
      step: journal.step + 1,
      done: {
        ...rest,
        ...(tokens ? { input_tokens: tokens.input, output_tokens: tokens.output } : {}),
      },
    },
  };
}

/**
 * The model turn or tool call an agent's step command says its step did (`done.model_run_id`,
 * `done.tool_call_id`): what the log line of the step that emitted it names. Empty for any other
 * event.
 */
export function stepIdsOf(event: { readonly payload?: unknown }): {
  model_run_id?: string;
  tool_call_id?: string;
} {
  const done = (event.payload as { done?: Record<string, unknown> } | undefined)?.done;
  if (!done || typeof done !== "object") return {};
  const { model_run_id: model, tool_call_id: call } = done;
  return {
    ...(typeof model === "string" ? { model_run_id: model } : {}),
    ...(typeof call === "string" ? { tool_call_id: call } : {}),
  };
}

/**
 * Where an agent run sits in the operator's lists: waiting `approval` (a call a person must
 * approve) or `needs_human` (an outcome or an answer only a person can give), labelled with the
 * agent, the run and what it waits for.
 */
export function summarizeAgentRun(journal: AgentJournal): StateSummary {
  const waiting = journal.waiting;
  const task = waiting?.remote_task;
  const kind = task ? `task ${task.id} (${task.status})` : waiting?.kind;
  const what = waiting
    ? ` waits for ${kind}${waiting.tool ? ` of ${waiting.tool} ${waiting.tool_call_id}` : ""}`
    : "";
  const list =
    journal.status === "BLOCKED" && !task
      ? "approval"
      : journal.status === "NEEDS_HUMAN"
        ? "needs_human"
        : undefined;
  return {
    kind: AGENT_RUN_AGGREGATE,
    status: journal.status,
    label: `${journal.agent} ${journal.run_id}${what}`,
    ...(list ? { waiting: list } : {}),
    counts: {
      model_turns: journal.totals.model_turns,
      tool_calls: journal.totals.tool_calls,
    },
    ...(journal.tenant_id === undefined ? {} : { tenant: journal.tenant_id }),
  };
}
