import {
  type AgentJournal,
  answeredByPerson,
  decisionOn,
  type PersonDecision,
} from "../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { opaqueIdProblem } from "../../schemas/ids";
import { answerExample, answerProblem } from "./agent-answer";
import { stateData } from "./customer-support";
import { inTenant, tenantProblem } from "./operator-command";
import type { OpsStack } from "./stack";
import type { Decided, SupportCommand } from "./support-actions";
import type { AgentWaitView, ItemSummary, WaitingView } from "./views";

/**
 * A person's answer to what an agent run waits for (functions/core/agent/person.ts): approve or
 * reject a tool call that needs approval, say whether a write whose outcome could not be learnt
 * was applied, or give the answer of a run handed over for good (its turn budget spent). Checked
 * against the run's stored journal before anything is sent: a run of another tenant than the one
 * the operator named is refused, a decision the run already took is reported (`already`), the
 * other decision on it or one the run does not wait for is refused (`refused`, naming what it
 * waits for), and so is an answer that does not fit the agent's answer (./agent-answer.ts). A
 * decision on a call names the wait it was given to (`waiting_since`): a model may give each
 * turn's calls the same ids, and a decision given to one turn's call must not decide a later
 * turn's; one given to a wait that is no longer the run's is refused.
 * Shared by the CLI and the console.
 */

export type StepDecision = PersonDecision["decision"];

export function loadAgentRun(stack: OpsStack, runId: string): Promise<AgentJournal | undefined> {
  return stateData<AgentJournal>(stack, AGENT_RUN_AGGREGATE, runId);
}

/** How many of each list's newest waiting runs the overview reads the journals of. */
export const AGENT_WAITS_READ = 20;

/** Whether a stored `agent_run` item is an agent loop's journal (a content agent's run is not). */
function isJournal(data: unknown): data is AgentJournal {
  const j = data as Partial<AgentJournal> | undefined;
  return typeof j?.run_id === "string" && typeof j.agent === "string" && Array.isArray(j.window);
}

/** What a BLOCKED or NEEDS_HUMAN run waits for; undefined for a run that waits for nothing. */
export function agentWaitOf(journal: AgentJournal): AgentWaitView | undefined {
  const { waiting, status } = journal;
  if (!waiting || (status !== "BLOCKED" && status !== "NEEDS_HUMAN")) return undefined;
  const optional = {
    toolCallId: waiting.tool_call_id,
    tool: waiting.tool,
    key: waiting.key,
    deadline: waiting.deadline,
  };
  const example = waiting.kind === "answer" ? answerExample(journal.decision_type) : undefined;
  return {
    runId: journal.run_id,
    agent: journal.agent,
    taskId: journal.task_id,
    status,
    kind: waiting.kind,
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
    ...(waiting.input === undefined ? {} : { input: waiting.input }),
    ...(waiting.remote_task === undefined ? {} : { remoteTask: waiting.remote_task }),
    ...(example === undefined ? {} : { answerExample: example }),
    since: waiting.since,
    reason: waiting.reason,
  };
}

/**
 * What the agent runs listed as awaiting approval or NEEDS_HUMAN wait for, from their journals:
 * at most `limit` of each list (its newest waits), one GetItem each. Items that are not an agent
 * loop's journal (a content agent's run) and runs that no longer wait are left out.
 */
export async function agentWaits(
  stack: OpsStack,
  waiting: Pick<WaitingView, "awaitingApproval" | "needsHuman">,
  limit = AGENT_WAITS_READ,
): Promise<AgentWaitView[]> {
  const listed = (items: readonly ItemSummary[]) => items.slice(0, limit).map((i) => i.id);
  const ids = [...new Set([...listed(waiting.awaitingApproval), ...listed(waiting.needsHuman)])];
  const journals = await Promise.all(ids.map((id) => loadAgentRun(stack, id)));
  return journals.flatMap((journal) => {
    const wait = isJournal(journal) ? agentWaitOf(journal) : undefined;
    return wait ? [wait] : [];
  });
}

/** What a person's decision says besides the decision, and the tenant the operator meant. */
export interface StepDecisionFields {
  readonly reason?: string;
  readonly output?: unknown;
  readonly requestedBy: string;
  /** The tenant the operator named (`--tenant`): a run of another is refused. */
  readonly tenant?: string;
  /**
   * Since when the call's wait decided on has waited, as the operator was shown it (`agentbus
   * approvals`, the console): refused when the run now waits on the call since another time.
   * None: the wait the stored run shows when the decision is checked, which the command then names.
   */
  readonly waitingSince?: string;
}

/**
 * Whether `decision` applies to the run: on call `callId` (an approval, an unknown outcome), or,
 * with no call, a person's `answer` for a run handed over for good; the command to send if it does.
 */
export function stepDecision(
  journal: AgentJournal | undefined,
  runId: string,
  callId: string | undefined,
  decision: StepDecision,
  fields: StepDecisionFields,
): Decided {
  if (!journal) return { refused: `no agent run ${runId}` };
  const foreign = tenantProblem(fields.tenant, journal.tenant_id, `run ${runId}`);
  if (foreign) return { refused: foreign };
  if (callId === undefined || decision === "answer")
    return answerDecision(journal, runId, callId, decision, fields);
  const taken = decisionOn(journal, callId, decision);
  const already = `${callId} of ${runId} was already decided: ${taken?.decision} by ${taken?.by}`;
  if (taken?.decision === decision) return { already };
  if (taken) return { refused: already };
  const waiting = journal.waiting;
  if (waiting?.kind === "answer")
    return { refused: `run ${runId} waits for a person's answer, not a decision on ${callId}` };
  if (waiting?.tool_call_id !== callId)
    return {
      refused: waiting?.tool_call_id
        ? `run ${runId} waits for a decision on ${waiting.tool_call_id}, not ${callId}`
        : `run ${runId} waits for no decision (it is ${journal.status})`,
    };
  const waitingSince = fields.waitingSince ?? waiting.since;
  if (waitingSince !== waiting.since)
    return {
      refused: `run ${runId} no longer waits for what was answered (${callId} waiting since ${waitingSince}): it now waits on ${callId} since ${waiting.since} (see agentbus approvals)`,
    };
  const allowed: readonly StepDecision[] =
    waiting.kind === "approval" ? ["approve", "reject"] : ["applied", "not_applied"];
  if (!allowed.includes(decision))
    return {
      refused: `run ${runId} waits for ${waiting.kind === "approval" ? "an approval (approve or reject)" : "an outcome (applied or not_applied)"} of ${callId}, not ${decision}`,
    };
  // The decision names the wait it was given to, so that it never decides a later one.
  const what = { tool_call_id: callId, decision, waiting_since: waitingSince };
  return decisionCommand(journal, runId, what, fields);
}

/** A person's answer for a run NEEDS_HUMAN waiting for one (functions/core/agent/person.ts). */
function answerDecision(
  journal: AgentJournal,
  runId: string,
  callId: string | undefined,
  decision: StepDecision,
  fields: StepDecisionFields,
): Decided {
  const given = answeredByPerson(journal);
  if (given) return { already: `${runId} was already answered: ${given.outcome}` };
  const waiting = journal.waiting;
  if (waiting?.kind !== "answer")
    return {
      refused: waiting?.tool_call_id
        ? `run ${runId} waits for a decision on ${waiting.tool_call_id} (--step ${waiting.tool_call_id}), not an answer`
        : `run ${runId} waits for no decision (it is ${journal.status})`,
    };
  if (decision !== "answer" || callId !== undefined)
    return {
      refused: `run ${runId} waits for a person's answer (resolve ${runId} --as answer --output JSON, no step), not ${decision}${callId ? ` on ${callId}` : ""}`,
    };
  if (fields.output === undefined)
    return { refused: `an answer for run ${runId} needs its output: the run's answer, as JSON` };
  const problem = answerProblem(journal.decision_type, fields.output);
  if (problem) return { refused: `run ${runId}: ${problem}` };
  return decisionCommand(journal, runId, { decision }, fields);
}

function decisionCommand(
  journal: AgentJournal,
  runId: string,
  what: {
    readonly tool_call_id?: string;
    readonly decision: StepDecision;
    readonly waiting_since?: string;
  },
  fields: StepDecisionFields,
): Decided {
  const conversationId = journal.subject.conversation_id ?? "";
  const command: SupportCommand = {
    type: journal.decision_type,
    aggregate: { type: AGENT_RUN_AGGREGATE, id: runId },
    taskId: journal.task_id,
    conversationId,
    orderKey: runId,
    payload: {
      run_id: runId,
      ...what,
      requested_by: fields.requestedBy,
      ...(fields.reason === undefined ? {} : { reason: fields.reason }),
      ...(fields.output === undefined ? {} : { output: fields.output }),
    },
  };
  // In the run's tenant, so that what the decision causes stays there.
  return { command: inTenant(command, journal.tenant_id) };
}

/** Read the run and decide (see stepDecision). */
export async function stepDecisionCheck(
  stack: OpsStack,
  runId: string,
  callId: string | undefined,
  decision: StepDecision,
  fields: StepDecisionFields,
): Promise<Decided> {
  const problem = opaqueIdProblem(runId);
  if (problem) return { refused: `${JSON.stringify(runId)} is not a run id (${problem})` };
  return stepDecision(await loadAgentRun(stack, runId), runId, callId, decision, fields);
}
