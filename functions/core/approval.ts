/**
 * Human approval, the primitive every role uses when a step must wait for a person (seed 000
 * §14.4): a step proposes an action, a person approves or rejects it (with who and why), and a
 * deadline decides when nobody does. The state that waits keeps an `ApprovalRequest`; a person's
 * answer is ruled on by `ruleOnApproval`, the same way in every use:
 *
 * - an agent's tool call that needs approval (./agent/loop.ts, ./agent/person.ts): the run is
 *   BLOCKED; approve runs the call, reject tells the model; the deadline rejects or fails the run;
 * - a reply held for review (reply generation): approve sends it (with an edited text, when
 *   given), reject drops it; no deadline;
 * - a workflow node's confirmation (a step role's agent, through the orchestrator): the agent run
 *   is BLOCKED on a question; approve resumes it with the confirmation, reject fails it, the
 *   deadline fails it.
 *
 * The rule: a decision on an approval that is pending applies; the decision already taken, again,
 * changes nothing (a redelivered or repeated command); anything else (the other decision after
 * one was taken, a step that is not the one pending, nothing pending) is refused with why.
 */

export type ApprovalVerdict = "approve" | "reject";

export interface ApprovalRequest {
  /** What waits: a tool call's id, a node's id, `reply`. */
  readonly step: string;
  /** What happens on approval: a tool's name, `send_reply`, `resume <agent>`. */
  readonly action: string;
  /** The proposed action's input, as a person is shown it. */
  readonly input?: unknown;
  /** Since when it waits (ISO 8601). */
  readonly since: string;
  /** When the deadline decides (ISO 8601); none: it waits until a person decides. */
  readonly deadline?: string;
  /** What the deadline decides: reject the action, or fail what waits. */
  readonly onDeadline?: "reject" | "fail";
}

export interface ApprovalDecision {
  readonly verdict: ApprovalVerdict;
  /** Who decided: a person's name, or `deadline`. */
  readonly by: string;
  readonly reason?: string;
  readonly at: string;
}

export type ApprovalRuling =
  | { readonly kind: "apply" }
  | { readonly kind: "repeat"; readonly taken: ApprovalDecision }
  | { readonly kind: "refuse"; readonly why: string };

/** The ruling on `verdict` for `step`, given what is pending and what was decided already. */
export function ruleOnApproval(
  pending: ApprovalRequest | undefined,
  taken: ApprovalDecision | undefined,
  verdict: ApprovalVerdict,
  step: string,
): ApprovalRuling {
  if (taken?.verdict === verdict && (pending === undefined || pending.step === step))
    return { kind: "repeat", taken };
  if (taken !== undefined)
    return { kind: "refuse", why: `${step} was already decided: ${taken.verdict} by ${taken.by}` };
  if (pending === undefined) return { kind: "refuse", why: "no approval is pending" };
  if (pending.step !== step)
    return { kind: "refuse", why: `the approval pending is for ${pending.step}, not ${step}` };
  return { kind: "apply" };
}

/** Whether the deadline of a pending approval has passed at `now`. */
export function approvalDue(pending: ApprovalRequest | undefined, now: Date): boolean {
  return pending?.deadline !== undefined && now.getTime() >= Date.parse(pending.deadline);
}

/** The decision a passed deadline takes: a reject, by `deadline`. */
export function deadlineDecision(pending: ApprovalRequest, now: Date): ApprovalDecision {
  return {
    verdict: "reject",
    by: "deadline",
    reason: `no decision by ${pending.deadline}`,
    at: now.toISOString(),
  };
}
