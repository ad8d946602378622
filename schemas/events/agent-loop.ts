import { IsoTime } from "../envelope";
import { OpaqueId } from "../ids";
import * as z from "../zod";
import { OperatorReason, Requester } from "./fields";

/**
 * The commands of an agent that loops over tools (functions/core/agent), whatever the agent:
 * each agent registers them under its own event types (the refund agent's
 * `refund_review.step.requested` and `refund_review.decision.requested`, ./refund.ts).
 *
 * - a step command: take the run's next step, saying what the step before it did (a model turn
 *   with its `model_run_id`, or a tool call with its `tool_call_id`), so that the trace shows
 *   every turn and call under the task;
 * - a decision command: a person's answer to what the run waits for (approve or reject a call
 *   that needs approval, say whether a write whose outcome could not be learnt was applied, give
 *   the answer of a run handed over for good), or the lease sweeper's past a deadline.
 */

/** The most tool calls one model turn of an agent may ask for (a turn asking for more runs none). */
export const MAX_TOOL_CALLS_PER_TURN = 32;
/** The longest tool name (what the model APIs accept). */
export const MAX_TOOL_NAME = 64;
/** The longest tool call id (the model's own; a person's decision names it). */
export const MAX_TOOL_CALL_ID = 128;
export const ToolName = z.string().check(z.maxLength(MAX_TOOL_NAME));
export const ToolCallId = z.string().check(z.maxLength(MAX_TOOL_CALL_ID));

/** A text's reference in an agent's content store (functions/core/agent/content.ts). */
const ContentRef = z
  .string()
  .check(z.regex(/^[0-9a-f]{64}$/, { message: "must be a content reference" }));

/** What the step before did (a journal step of functions/core/agent/agent.ts). */
export const AgentStepDone = z.object({
  step: z.int().check(z.nonnegative()),
  kind: z.enum(["start", "model", "tool", "person"]),
  model_run_id: z.optional(z.string().check(z.maxLength(256))),
  asked: z.optional(z.array(ToolName).check(z.maxLength(MAX_TOOL_CALLS_PER_TURN))),
  tool_call_id: z.optional(ToolCallId),
  tool: z.optional(ToolName),
  outcome: z.optional(z.string().check(z.maxLength(512))),
  key: z.optional(z.string().check(z.maxLength(512))),
  /**
   * A tool call's: the content reference (functions/core/agent/content.ts) of the model turn that
   * asked for it, whose `toolCalls` hold the call's input (the AG-UI run stream's TOOL_CALL_ARGS).
   */
  turn_ref: z.optional(ContentRef),
  /**
   * A tool call's: the content reference of the call's answer as the model was given it (the
   * tool's output, or the error it was told), the AG-UI streams' TOOL_CALL_RESULT.
   */
  result_ref: z.optional(ContentRef),
  input_tokens: z.optional(z.int().check(z.nonnegative())),
  output_tokens: z.optional(z.int().check(z.nonnegative())),
  latency_ms: z.optional(z.number().check(z.nonnegative())),
});

export const AgentStepRequestedPayload = z.object({
  run_id: OpaqueId,
  /** The step to take (the journal's step count + 1 when it was emitted). */
  step: z.int().check(z.positive()),
  done: AgentStepDone,
});
export type AgentStepRequested = z.output<typeof AgentStepRequestedPayload>;

export const AgentDecisionRequestedPayload = z.object({
  run_id: OpaqueId,
  /** The tool call decided on; none for `answer`. */
  tool_call_id: z.optional(z.string().check(z.minLength(1), z.maxLength(MAX_TOOL_CALL_ID))),
  /**
   * `deadline`: the lease sweeper's, for a run still BLOCKED past its approval's deadline;
   * `answer`: a person's answer for a run handed over (NEEDS_HUMAN waiting for an answer).
   */
  decision: z.enum(["approve", "reject", "applied", "not_applied", "answer", "deadline"]),
  /** For `applied`: what the outside system gave, as the tool's output; for `answer`: the answer. */
  output: z.optional(z.unknown()),
  reason: z.optional(OperatorReason),
  requested_by: Requester,
  /**
   * Since when the wait this decides has waited (its `since`, as `agentbus approvals` and the
   * console showed it): a model may give each turn's calls the same ids, so a decision given to
   * one turn's call must not decide a later turn's call of that id. Refused
   * (`agent.decision_refused`) when the run now waits on a call of that id since another time;
   * none: the call of that id the run waits on when the decision arrives.
   */
  waiting_since: z.optional(IsoTime),
});
export type AgentDecisionRequested = z.output<typeof AgentDecisionRequestedPayload>;
