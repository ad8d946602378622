import type { AggregateRef, Envelope } from "../../../schemas";
import type { EmitSpec } from "../emit";
import type { StateSummary } from "../ports";
import type { DecideContext, Decision, Role } from "../role";
import { type AgentDefinition, type AgentJournal, type JournalStep, newJournal } from "./agent";
import { type AgentPorts, agentStep, type StepResult } from "./loop";
import { approvalExpired, personDecides } from "./person";

/**
 * An agent as a consumer group's role: each run is the aggregate `agent_run/<run id>`, and each
 * step is one delivery of the agent's step command on the run's own stream. The version gate
 * makes a redelivered step a duplicate, so a model turn or tool call whose step committed is never
 * asked or run again; a step that did not commit is taken again (a write tool then learns its
 * outcome by its key, ./tool-call.ts).
 */

export const AGENT_RUN_AGGREGATE = "agent_run";

export interface AgentRoleSpec {
  readonly group: string;
  readonly agent: AgentDefinition;
  /** The command that starts a run, the run's step command, and a person's decision. */
  readonly types: { readonly start: string; readonly step: string; readonly decision: string };
  /** The run a start command begins: its id and the first user message. */
  begin(event: Envelope): {
    readonly runId: string;
    readonly prompt: string;
    readonly subject: Readonly<Record<string, string>>;
  };
  /** The facts of a run that ended (COMPLETED, or FAILED by a deadline). */
  finish(journal: AgentJournal): EmitSpec[];
  /** The fact that a run waits for a person. */
  needsPerson(journal: AgentJournal): EmitSpec[];
  readonly ports: AgentPorts;
}

export function agentRole(spec: AgentRoleSpec): Role<AgentJournal> {
  const { types } = spec;
  const runOf = (event: Envelope): string =>
    event.event_type === types.start
      ? spec.begin(event).runId
      : (event.payload as { run_id: string }).run_id;
  return {
    group: spec.group,
    subscriptions: [types.start, types.step, types.decision],
    stateOf: (event): AggregateRef => ({ type: AGENT_RUN_AGGREGATE, id: runOf(event) }),
    summarize: summarizeAgentRun,
    async decide(state, event, context) {
      if (event.event_type === types.start) return start(spec, state, event, context.now);
      if (!state) return {};
      const expired = approvalExpired(spec.agent, state, context.now);
      if (expired) return outcome(spec, expired);
      if (event.event_type === types.decision) return decision(spec, state, event, context);
      return step(spec, state, event, context);
    },
  };
}

async function start(
  spec: AgentRoleSpec,
  state: AgentJournal | undefined,
  event: Envelope,
  now: Date,
): Promise<Decision<AgentJournal>> {
  if (state) return {};
  const { runId, prompt, subject } = spec.begin(event);
  const first = await spec.ports.content.put(JSON.stringify({ role: "user", text: prompt }));
  const journal = newJournal({
    runId,
    taskId: event.task_id,
    agent: spec.agent.name,
    subject,
    firstMessage: first,
    now,
  });
  return {
    state: journal,
    emit: [stepCommand(spec, journal, { step: 0, at: journal.started_at, kind: "start" })],
  };
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
  const result = await agentStep(spec.agent, state, spec.ports, {
    now: context.now,
    receiveCount: context.receiveCount,
    correlationId: event.correlation_id,
  });
  return outcome(spec, result);
}

async function decision(
  spec: AgentRoleSpec,
  state: AgentJournal,
  event: Envelope,
  context: DecideContext<AgentJournal>,
): Promise<Decision<AgentJournal>> {
  const answer = event.payload as {
    tool_call_id: string;
    decision: "approve" | "reject" | "applied" | "not_applied";
    output?: unknown;
    reason?: string;
    requested_by: string;
  };
  const result = await personDecides(
    spec.agent,
    state,
    { ...answer, by: answer.requested_by },
    spec.ports,
    context.now,
  );
  return outcome(spec, result);
}

/** What a step's result commits: the journal, and the next step, the end, or the wait. */
function outcome(spec: AgentRoleSpec, result: StepResult): Decision<AgentJournal> {
  const { journal } = result;
  if (result.next === "continue")
    return { state: journal, emit: [stepCommand(spec, journal, result.recorded)] };
  if (result.next === "end") return { state: journal, emit: spec.finish(journal) };
  return {
    state: journal,
    emit: spec.needsPerson(journal),
    dueAt: journal.waiting?.deadline ?? null,
  };
}

/** The run's next step command, saying what the step before did. */
function stepCommand(spec: AgentRoleSpec, journal: AgentJournal, done: JournalStep): EmitSpec {
  const { at: _at, tokens, ...rest } = done;
  return {
    type: spec.types.step,
    runId: journal.run_id,
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

/** Where an agent run sits in the operator's lists. */
export function summarizeAgentRun(journal: AgentJournal): StateSummary {
  const waiting = journal.waiting;
  return {
    kind: AGENT_RUN_AGGREGATE,
    status: journal.status,
    label: `${journal.agent} ${journal.run_id}`,
    ...(waiting
      ? { waiting: `${waiting.kind}${waiting.tool ? ` ${waiting.tool}` : ""}: ${waiting.reason}` }
      : {}),
    counts: {
      model_turns: journal.totals.model_turns,
      tool_calls: journal.totals.tool_calls,
    },
  };
}
