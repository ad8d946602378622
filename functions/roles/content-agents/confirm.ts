import * as z from "../../../schemas/zod";
import type { ApprovalRequest, Envelope } from "../../kit";
import {
  type AgentRun,
  ConfirmationQuestion,
  confirmEventType,
  type NodeBlocked,
  type NodeConfirmRequested,
  type NodeRequested,
  payloadOf,
  transition,
  withRunId,
} from "../../kit";
import { failedDecision } from "./answers";
import { CONTENT_ROLE_EVENTS } from "./events";
import { itemIndexOf, type NodeRef } from "./ids";
import type { ContentAgent, ContentDecision } from "./settings";

/**
 * BLOCKED agent runs (seed 001 §2: RUNNING --TaskBlocked--> BLOCKED, then ExternalUnblocked ->
 * RUNNING or ExternalConfirmTimeout -> FAILED).
 *
 * The model may answer `{"needs_confirmation": {"question": ...}}` instead of the role's output
 * when the work cannot be finished without a confirmation from outside (a source, an editor).
 * The agent run then goes BLOCKED with `confirm_by = now + confirmSeconds`, the question kept as
 * its error (code `agent_run.confirmation_required`, class unknown_outcome), and is stored, so the
 * assignment is held open; `node.blocked` tells the orchestrator. The orchestrator answers on the
 * run's stream with `<stem>.confirm.requested`, carrying the assignment's input again:
 * - confirmed: ExternalUnblocked -> RUNNING, and the model is called again with the original
 *   request, the question and the confirmation (the context is re-injected); it completes,
 *   fails, or asks again (BLOCKED with a new deadline).
 * - refused: ExternalUnblocked -> RUNNING -> TaskFailed, code `agent_run.confirmation_refused`
 *   (business), answered `<stem>.failed`.
 * - timed_out (the sweeper found confirm_by passed): ExternalConfirmTimeout -> FAILED, code
 *   `agent_run.confirm_timeout`, answered `<stem>.failed`.
 * A confirmation for an agent run that is not BLOCKED (already answered, cancelled, unknown)
 * changes nothing. A repeated request for a BLOCKED assignment answers `node.blocked` again.
 *
 * A confirmation is a use of the approval primitive (functions/core/approval.ts): the proposed
 * action is the agent's resumption with the question answered, the deadline `confirm_by` fails it.
 *
 * Confirmed and refused resume the agent run (ExternalUnblocked -> RUNNING): a new run, under the
 * run id the confirmation's processing has, which what it answers carries. A timeout resumes
 * nothing: the agent run ends FAILED as the run that blocked it left it.
 */

export const CONFIRMATION_REQUIRED = "agent_run.confirmation_required";
export const CONFIRMATION_REFUSED = "agent_run.confirmation_refused";

/** The model's answer when it needs an external confirmation first. */
export const ConfirmationNeeded = z.strictObject({
  needs_confirmation: z.strictObject({ question: ConfirmationQuestion }),
});

/** The question, when the model's answer asks for a confirmation. */
export function questionOf(value: unknown): string | undefined {
  const parsed = ConfirmationNeeded.safeParse(value);
  return parsed.success ? parsed.data.needs_confirmation.question : undefined;
}

/** The assignment a request or a confirmation names, as a request to work from. */
export function requestOf(payload: NodeRequested | NodeConfirmRequested): NodeRequested {
  const { run_id, node_id, generation, attempt, input, run_input, item, loop } = payload;
  return {
    run_id,
    node_id,
    generation,
    attempt,
    input,
    run_input,
    ...(item ? { item } : {}),
    ...(loop ? { loop } : {}),
  };
}

/** RUNNING -TaskBlocked-> BLOCKED until now + the agent's confirmation window. */
export function block(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
  question: string,
  now: Date,
): ContentDecision {
  const blocked = transition(run, "TaskBlocked", {
    now,
    confirmSeconds: agent.confirmSeconds,
    error: { code: CONFIRMATION_REQUIRED, errorClass: "unknown_outcome", message: question },
  });
  return blockedDecision(agent, request, blocked);
}

/** The stored BLOCKED run and its `node.blocked` (also sent again for a repeated request). */
export function blockedDecision(
  agent: ContentAgent,
  request: NodeRef,
  run: AgentRun,
): ContentDecision {
  const item = itemIndexOf(request);
  const payload: NodeBlocked = {
    run_id: request.run_id,
    node_id: request.node_id,
    generation: request.generation,
    agent: agent.role,
    question: run.error?.message.slice(0, 2000) || "a confirmation",
    confirm_by: run.confirm_by ?? run.updated_at,
    ...(item === undefined ? {} : { item }),
  };
  return { state: run, emit: [{ type: "node.blocked", payload, orderKey: request.run_id }] };
}

/** What a BLOCKED agent run waits for, as the approval primitive has it; undefined otherwise. */
export function confirmationApproval(run: AgentRun): ApprovalRequest | undefined {
  if (run.state !== "BLOCKED") return undefined;
  return {
    step: run.node_id ?? run.agent_run_key,
    action: `resume ${run.role}`,
    input: { question: run.error?.message ?? "a confirmation" },
    since: run.updated_at,
    ...(run.confirm_by === undefined ? {} : { deadline: run.confirm_by }),
    onDeadline: "fail",
  };
}

/** What the model is told on resuming: its question and the confirmation. */
export function confirmationText(confirm: NodeConfirmRequested): string {
  const who = confirm.requested_by ? ` by ${confirm.requested_by}` : "";
  return `You asked for a confirmation: ${confirm.question}\nConfirmation received${who}: ${confirm.note ?? "confirmed"}\nFinish the work now and answer with the output asked for.`;
}

/**
 * A confirmation command for the agent run: timed out and refused end it FAILED here; confirmed
 * resumes it (`resume` runs the model again with the confirmation). Nothing when not BLOCKED.
 * `runId` is the run a resume is (confirmed or refused).
 */
export async function decideConfirm(
  agent: ContentAgent,
  existing: AgentRun | undefined,
  event: Envelope,
  { now, runId }: { readonly now: Date; readonly runId: string },
  resume: (run: AgentRun, confirm: NodeConfirmRequested) => Promise<ContentDecision>,
): Promise<ContentDecision> {
  const confirm = payloadOf(event, confirmEventType(CONTENT_ROLE_EVENTS[agent.role].stem));
  // Only a run that waits for the confirmation takes it (a repeat, or one too late, does nothing).
  if (!existing || !confirmationApproval(existing)) return {};
  const request = requestOf(confirm);
  if (confirm.outcome === "timed_out")
    return failedDecision(
      agent,
      request,
      transition(existing, "ExternalConfirmTimeout", {
        now,
        reason: `no confirmation by ${existing.confirm_by}: ${confirm.question}`.slice(0, 1024),
      }),
    );
  const by = confirm.requested_by ? ` by ${confirm.requested_by}` : "";
  const running = transition(withRunId(existing, runId), "ExternalUnblocked", {
    now,
    reason: `${confirm.outcome}${by}`.slice(0, 1024),
  });
  if (confirm.outcome === "refused")
    return failedDecision(
      agent,
      request,
      transition(running, "TaskFailed", {
        now,
        error: {
          code: CONFIRMATION_REFUSED,
          errorClass: "business",
          message: `refused${by}: ${confirm.note ?? confirm.question}`.slice(0, 4096),
        },
      }),
    );
  return resume(running, confirm);
}
