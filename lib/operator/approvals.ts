import type { ApprovalRequest } from "../../functions/core/approval";
import { DAG_RUN_AGGREGATE } from "../../functions/core/sweeper";
import { heldReplyApproval } from "../../functions/roles/customer-support/reply-generation/review";
import {
  blockedApprovals,
  type OrchestratorState,
  planApprovals,
} from "../../functions/roles/orchestrator/state";
import { agentWaitOf, loadAgentRun } from "./agent-actions";
import { heldReplies, loadReply, stateData } from "./customer-support";
import { summaries } from "./lists";
import type { OpsStack } from "./stack";
import { knownDefinition } from "./workflow-actions";
import { compiledOf } from "./workflows";

/**
 * Everything that waits for a person's approval, whichever role holds it (the approval primitive,
 * functions/core/approval.ts), in one list: an agent's tool call (approve runs it), a held reply
 * (approve sends it), a content agent's confirmation (approve resumes it), a plan that names roles
 * that write (approve starts its child run; its input is the plan's nodes and those roles). Each
 * names the id and step that `agentbus approve|reject` take, the proposed action and its input.
 */

export interface ApprovalView extends ApprovalRequest {
  readonly kind: "tool_call" | "held_reply" | "confirmation" | "plan";
  /** What `agentbus approve|reject` take: an agent run, a held reply's task, a workflow run. */
  readonly id: string;
  /** Whether the step must be named (`--step`): not for a held reply. */
  readonly stepOption: boolean;
  readonly taskId?: string;
  /** The tenant of the state that waits (its list entry's). */
  readonly tenant: string;
}

/**
 * The newest `limit` of each kind of wait, newest first within each kind; with `tenant`, that
 * tenant's only.
 */
export async function pendingApprovals(
  stack: OpsStack,
  limit = 50,
  tenant?: string,
): Promise<ApprovalView[]> {
  const [listed, held] = await Promise.all([
    summaries(stack, { waiting: "approval" }, limit, { tenant }),
    heldReplies(stack, limit, tenant),
  ]);
  const fromListed = await Promise.all(
    listed.map(async (row) => {
      const views =
        row.kind === "run" ? await confirmationsOf(stack, row.id) : await toolCallOf(stack, row.id);
      return views.map((view) => ({ ...view, tenant: row.tenant }));
    }),
  );
  const fromHeld = await Promise.all(
    held.map(async (turn) =>
      (await heldReplyOf(stack, turn.task_id)).map((view) => ({ ...view, tenant: turn.tenant })),
    ),
  );
  return [...fromListed.flat(), ...fromHeld.flat()];
}

type Untenanted = Omit<ApprovalView, "tenant">;

async function toolCallOf(stack: OpsStack, runId: string): Promise<Untenanted[]> {
  const journal = await loadAgentRun(stack, runId);
  const wait = journal && agentWaitOf(journal);
  if (wait?.kind !== "approval" || !wait.toolCallId) return [];
  return [
    {
      kind: "tool_call",
      id: runId,
      stepOption: true,
      taskId: wait.taskId,
      step: wait.toolCallId,
      action: wait.tool ?? "?",
      input: wait.input,
      since: wait.since,
      ...(wait.deadline === undefined ? {} : { deadline: wait.deadline }),
    },
  ];
}

async function confirmationsOf(stack: OpsStack, runId: string): Promise<Untenanted[]> {
  const state = await stateData<OrchestratorState>(stack, DAG_RUN_AGGREGATE, runId);
  if (!state) return [];
  const confirmations = blockedApprovals(
    state,
    knownDefinition(state, compiledOf(stack.outputs)),
  ).map((request) => ({
    kind: "confirmation" as const,
    id: runId,
    stepOption: true,
    ...request,
  }));
  const plans = planApprovals(state).map((request) => ({
    kind: "plan" as const,
    id: runId,
    stepOption: true,
    ...request,
  }));
  return [...confirmations, ...plans];
}

async function heldReplyOf(stack: OpsStack, taskId: string): Promise<Untenanted[]> {
  const reply = await loadReply(stack, taskId);
  const request = reply && heldReplyApproval(reply);
  if (!request) return [];
  return [{ kind: "held_reply", id: taskId, stepOption: false, taskId, ...request }];
}

/**
 * The command that answers a wait, as it is typed; a step's names the wait by its `since` (a
 * workflow node waits more than once, a model may give each turn's tool calls the same ids: the
 * answer must not approve a later wait).
 */
export function approveCommandLine(view: ApprovalView, verdict: "approve" | "reject"): string {
  const step = view.stepOption ? ` --step ${view.step} --since ${view.since}` : "";
  return `agentbus ${verdict} ${view.id}${step}`;
}
