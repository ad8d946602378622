import * as z from "../../../schemas/zod";
import { type ApprovalRequest, approvalDue, deadlineDecision, ruleOnApproval } from "../approval";
import { PermanentError } from "../errors";
import { closeByPerson } from "../write-once";
import {
  type AgentDefinition,
  type AgentJournal,
  type AnyTool,
  answeredByPerson,
  decisionOn,
  latestStep,
  moved,
  type PersonDecision,
  recorded,
  withDecision,
} from "./agent";
import { type AgentPorts, closeTurn, type StepResult } from "./loop";

/**
 * A person's answer to what a run waits for:
 * - BLOCKED on an `approval` (the approval primitive, ../approval.ts): `approve` runs the call on
 *   the next step; `reject` tells the model the call was refused, with who and why. A deadline
 *   that passes first decides as the tool says (`onDeadline`: reject the call, or fail the run).
 * - NEEDS_HUMAN on an `outcome` (a write whose outcome could not be learnt): `applied` with the
 *   outside system's output, or `not_applied`; the side-effect record is closed with it and the
 *   model is told. The key is never run again either way.
 * - BLOCKED on a `task` (outside work a call started, ./task-wait.ts): nothing to decide; refused.
 * - NEEDS_HUMAN on an `answer` (its turn budget spent, or too many bad turns): `answer`, with the
 *   run's answer as `output`, checked as the model's would be; the run ends COMPLETED with it.
 * A decision names its call by id, and a model may give each turn's calls the same ids: it is
 * about the call of that id pending now, never an earlier turn's (./agent.ts decisionOn). It also
 * names the wait it was given to (`waiting_since`, the wait's `since` as it was shown): one given
 * to an earlier wait on a call of that id (turn 1's `call_1`, decided otherwise since) is refused,
 * never taken for the wait of turn 2's `call_1`, which its author was not shown. The same
 * decision again, before or after its call ran, changes nothing (the journal's `decisions`
 * remember it, by the call's turn and id); the other decision on a call already decided is
 * refused with the one taken. Anything else is refused with a PermanentError that says what the run waits for.
 * Undefined: nothing changes (the decision was already taken).
 */

export interface PersonAnswer {
  /** The call decided on (none for an `answer`). */
  readonly tool_call_id?: string;
  readonly decision: PersonDecision["decision"];
  readonly output?: unknown;
  readonly by: string;
  readonly reason?: string;
  /** Since when the wait decided on waited, as its author was shown it; none: the wait now. */
  readonly waiting_since?: string;
}

export async function personDecides(
  agent: AgentDefinition,
  journal: AgentJournal,
  answer: PersonAnswer,
  ports: AgentPorts,
  now: Date,
): Promise<StepResult | undefined> {
  const { waiting } = journal;
  const refuse = (why: string) =>
    new PermanentError("agent.decision_refused", `run ${journal.run_id}: ${why}`, {
      details: { run_id: journal.run_id, status: journal.status, waiting: waiting?.kind },
    });
  const decision: PersonDecision = {
    decision: answer.decision,
    by: answer.by,
    at: now.toISOString(),
    ...(answer.reason ? { reason: answer.reason } : {}),
  };
  if (answer.decision === "answer")
    return answerGiven(agent, journal, { ...decision, output: answer.output }, refuse, now);
  const taken = decisionOn(journal, answer.tool_call_id ?? "", answer.decision);
  if (answer.decision === "approve" || answer.decision === "reject") {
    const ruling = ruleOnApproval(
      // A call decided waits no more, whatever the run waits for now.
      taken ? undefined : approvalOf(agent, journal),
      taken && { ...taken, verdict: taken.decision as "approve" | "reject" },
      answer.decision,
      answer.tool_call_id ?? "",
    );
    if (ruling.kind === "repeat") return undefined;
    if (ruling.kind === "refuse")
      throw refuse(taken ? ruling.why : (waitProblem(journal, answer) ?? ruling.why));
    // A call of that id waits for this approval, but the decision may be for an earlier wait.
    const stale = waitProblem(journal, answer);
    if (stale) throw refuse(stale);
    return approvalDecided(journal, decision, now);
  }
  if (taken?.decision === answer.decision) return undefined;
  const problem = taken
    ? `${answer.tool_call_id} was already decided: ${taken.decision} by ${taken.by}`
    : waitProblem(journal, answer);
  if (problem) throw refuse(problem);
  const tool = agent.tools.find((t) => t.name === waiting?.tool) as AnyTool;
  return outcomeDecided(journal, tool, decision, answer.output, ports, now, refuse);
}

/** Why the run does not wait for this answer; undefined when it does. */
function waitProblem(journal: AgentJournal, answer: PersonAnswer): string | undefined {
  const { waiting } = journal;
  if (waiting?.kind === "answer")
    return answer.decision === "answer"
      ? undefined
      : `it waits for a person's answer (answer, with the run's answer as its output), not ${answer.decision}`;
  if (!waiting?.tool_call_id) return `it waits for no decision (${journal.status})`;
  if (waiting.kind === "task")
    return `it waits for ${waiting.remote_task?.id} at the outside system (${waiting.remote_task?.status}), polled next at ${waiting.deadline}; a person is asked if it goes on past its limit`;
  if (waiting.tool_call_id !== answer.tool_call_id)
    return `it waits for a decision on ${waiting.tool_call_id}, not ${answer.tool_call_id}`;
  if (answer.waiting_since !== undefined && answer.waiting_since !== waiting.since)
    return `the decision was given to what ${answer.tool_call_id} waited for since ${answer.waiting_since}; it now waits for ${waiting.kind === "approval" ? "an approval" : "an outcome"} of ${waiting.tool} ${waiting.tool_call_id} since ${waiting.since}, which the decision's author was not shown`;
  const allowed = waiting.kind === "approval" ? ["approve", "reject"] : ["applied", "not_applied"];
  if (!allowed.includes(answer.decision))
    return `it waits for ${waiting.kind === "approval" ? "an approval: approve or reject" : "an outcome: applied or not_applied"}, not ${answer.decision}`;
  return undefined;
}

/**
 * A person gives the answer a run handed over for good (NEEDS_HUMAN on an `answer`) did not: it
 * is checked as the model's would be (`output`, then `accept`) and the run ends COMPLETED with
 * it. The same again, on a run a person's answer ended, changes nothing.
 */
async function answerGiven(
  agent: AgentDefinition,
  journal: AgentJournal,
  { output, ...decision }: PersonDecision & { readonly output: unknown },
  refuse: (why: string) => PermanentError,
  now: Date,
): Promise<StepResult | undefined> {
  if (answeredByPerson(journal)) return undefined;
  const { waiting } = journal;
  if (journal.status !== "NEEDS_HUMAN" || waiting?.kind !== "answer")
    throw refuse(
      waiting
        ? `it waits for ${waiting.kind === "approval" ? "an approval" : "an outcome"} of ${waiting.tool_call_id}, not an answer`
        : `it waits for no decision (${journal.status})`,
    );
  const read = personAnswerOf(agent.output, output);
  if ("problem" in read) throw refuse(read.problem);
  const rejected = await agent.accept?.(read.answer, journal);
  if (rejected !== undefined) throw refuse(`the answer was not accepted: ${rejected}`);
  const next = recorded(journal, { kind: "person", outcome: `answer by ${decision.by}` }, now, {
    status: moved(journal, "HumanResolved"),
    output: read.answer,
    error_turns: 0,
  });
  const done = withoutWaiting(next);
  return { journal: done, next: "end", recorded: latestStep(done) };
}

/**
 * A person's answer (`output`) read as the agent's answer (`schema`: its `output`, kept as the
 * `answer` of its model schemas), or why it does not fit: the run's check, and the operator's
 * before it sends one (lib/operator/agent-answer.ts). What `accept` checks against the outside
 * world only the run can tell.
 */
export function personAnswerOf<O>(
  schema: z.core.$ZodType<O>,
  output: unknown,
): { readonly answer: O } | { readonly problem: string } {
  const parsed = z.safeParse(schema, output);
  if (parsed.success) return { answer: parsed.data };
  const issues = z.issueLines(parsed.error, "(output)").join("; ");
  return { problem: `a person's answer must fit the agent's answer: ${issues}` };
}

/** What a run BLOCKED on a tool call's approval waits for, as the approval primitive has it. */
export function approvalOf(
  agent: AgentDefinition,
  journal: AgentJournal,
): ApprovalRequest | undefined {
  const { waiting } = journal;
  if (journal.status !== "BLOCKED" || waiting?.kind !== "approval" || !waiting.tool_call_id)
    return undefined;
  const tool = agent.tools.find((t) => t.name === waiting.tool);
  return {
    step: waiting.tool_call_id,
    action: waiting.tool ?? "",
    input: waiting.input,
    since: waiting.since,
    ...(waiting.deadline === undefined ? {} : { deadline: waiting.deadline }),
    onDeadline: tool?.approval?.onDeadline ?? "reject",
  };
}

/** An approval's deadline passed before a decision: reject the call, or fail the run. */
export function approvalExpired(
  agent: AgentDefinition,
  journal: AgentJournal,
  now: Date,
): StepResult | undefined {
  const pending = approvalOf(agent, journal);
  if (!pending || !approvalDue(pending, now)) return undefined;
  if (pending.onDeadline === "fail") {
    const reason = `no decision on ${pending.action} by ${pending.deadline}`;
    const failed = {
      ...journal,
      status: moved(journal, "ExternalConfirmTimeout"),
      failure: { code: "agent.approval_expired", message: reason },
      updated_at: now.toISOString(),
    };
    return {
      journal: failed,
      next: "end",
      recorded: latestStep(failed),
    };
  }
  const { verdict, ...rest } = deadlineDecision(pending, now);
  return approvalDecided(journal, { decision: verdict, ...rest }, now);
}

function approvalDecided(journal: AgentJournal, decision: PersonDecision, now: Date): StepResult {
  const id = journal.waiting?.tool_call_id;
  const call = journal.pending.find((p) => p.id === id) ?? { id: id ?? "" };
  const pending = journal.pending.map((p) => (p.id === id ? { ...p, decision } : p));
  const next = recorded(
    journal,
    {
      kind: "person",
      tool_call_id: id,
      tool: journal.waiting?.tool,
      outcome: `${decision.decision} by ${decision.by}`,
    },
    now,
    {
      pending,
      decisions: withDecision(journal, call, decision),
      status: moved(journal, "ExternalUnblocked"),
      waiting: undefined,
    },
  );
  return { journal: withoutWaiting(next), next: "continue", recorded: latestStep(next) };
}

async function outcomeDecided(
  journal: AgentJournal,
  tool: AnyTool,
  decision: PersonDecision,
  output: unknown,
  ports: AgentPorts,
  now: Date,
  refuse: (why: string) => PermanentError,
): Promise<StepResult> {
  const waiting = journal.waiting;
  const key = waiting?.key ?? "";
  const write = { ledger: ports.sideEffects, key, now };
  let content: unknown;
  if (decision.decision === "applied") {
    const parsed = tool.output.safeParse(output);
    if (!parsed.success)
      throw refuse(
        `the output of an applied ${tool.name} must fit its schema: ${z.issueLines(parsed.error, "(output)").join("; ")}`,
      );
    content = parsed.data;
    await closeByPerson(write, { applied: true, output: content });
  } else {
    const message = `not applied, by ${decision.by}${decision.reason ? `: ${decision.reason}` : ""}`;
    content = { error: "tool.not_applied", message };
    await closeByPerson(write, { applied: false, error: { code: "tool.not_applied", message } });
  }
  const ref = await ports.content.put(JSON.stringify(content));
  const isError = decision.decision !== "applied";
  const call = journal.pending.find((p) => p.id === waiting?.tool_call_id) ?? {
    id: waiting?.tool_call_id ?? "",
  };
  const pending = journal.pending.map((p) =>
    p.id === waiting?.tool_call_id ? { ...p, decision, result: { ref, is_error: isError } } : p,
  );
  const ready = { ...journal, status: moved(journal, "HumanRetry") };
  const running = moved(ready, "DependenciesSatisfied");
  const next = recorded(
    ready,
    {
      kind: "person",
      tool_call_id: waiting?.tool_call_id,
      tool: tool.name,
      outcome: `${decision.decision} by ${decision.by}`,
      key,
    },
    now,
    {
      pending,
      decisions: withDecision(journal, call, decision),
      status: running,
      failure: undefined,
    },
  );
  const closed = await closeTurn(withoutWaiting(next), ports);
  const result = { journal: closed, next: "continue" as const, recorded: latestStep(next) };
  if (isError) return result;
  // What the person says the outside system did is what it did: the write took effect.
  return { ...result, wrote: { ...wroteBy(tool, waiting), key, output: content } };
}

function wroteBy(tool: AnyTool, waiting: AgentJournal["waiting"]) {
  return { tool: tool.name, tool_call_id: waiting?.tool_call_id ?? "", input: waiting?.input };
}

/** The journal without its `waiting` and `failure` (left out, as a JSON round trip would). */
function withoutWaiting(journal: AgentJournal): AgentJournal {
  const { waiting: _w, failure: _f, ...rest } = journal;
  return rest;
}
