import type { EventPayloads, NodeFailed, NodeRequested } from "../../kit";
import {
  type AgentRun,
  classifyFailure,
  MODEL_INVALID_OUTPUT,
  ModelOutputInvalidError,
  OperatorStopError,
  type RunError,
  transition,
} from "../../kit";
import type { ContentEventTypes, FactCheckOutput } from "./events";
import { itemIndexOf, type NodeRef } from "./ids";
import type { ContentAgent, ContentDecision } from "./settings";

/**
 * What a content agent answers: `<role>.completed` with the model's output, `<role>.failed` with
 * the run's error (or a retry, rethrown for the queue to redeliver), and the same answer again for
 * a repeated request of an assignment already answered.
 */

export const FACT_CHECK_REJECTED = "fact_check.rejected";

/**
 * The answer an ended agent run gave, sent again for a repeated request of its assignment: the
 * DAG counts one answer per assignment, so a second one changes nothing, and a lost one arrives.
 * A CANCELLED run answers nothing (the DAG no longer waits for it).
 */
export function answerAgain(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
): ContentDecision {
  if (run.state === "COMPLETED") return completedDecision(agent, request, run, run.output);
  if (run.state === "FAILED" || run.state === "NEEDS_HUMAN")
    return failedDecision(agent, request, run);
  return {};
}

/** The decision for a valid model reply: completed, or a fact check's business refusal. */
export function answerOf(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
  output: unknown,
  now: Date,
): ContentDecision {
  if (agent.role === "fact-check" && (output as FactCheckOutput).verdict === "fail") {
    const notes = (output as FactCheckOutput).notes;
    const error: RunError = {
      code: FACT_CHECK_REJECTED,
      errorClass: "business",
      message: `fact check failed: ${notes}`.slice(0, 4096),
    };
    return failedDecision(agent, request, transition(run, "TaskFailed", { now, error }));
  }
  const completed = transition(run, "TaskCompleted", { now, output });
  return completedDecision(agent, request, completed, output);
}

/**
 * The decision for a failed model call: rethrows what the queue should redeliver, otherwise
 * ends the run (FAILED or NEEDS_HUMAN) and answers `<role>.failed`.
 */
export function failureOf(
  agent: ContentAgent,
  request: NodeRequested,
  started: AgentRun,
  error: unknown,
  now: Date,
): ContentDecision {
  const run =
    error instanceof ModelOutputInvalidError
      ? retried(started, error.attempts - 1, now, correctedReply())
      : started;
  // Stopped by an operator: no model call started; the queue hands the request out again, and
  // once the orchestrator's cancel of the run has come it is discarded `cancelled`.
  if (error instanceof OperatorStopError) throw error;
  let trigger = classifyFailure(error, run);
  // A model call has no side effect to confirm: an unknown outcome is retried like a
  // transient error, and fails the run once the budget is spent.
  if (trigger === "TaskBlocked")
    trigger = run.attempt < run.max_attempts ? "RetryScheduled" : "TaskFailed";
  if (trigger === "RetryScheduled") throw error;
  return failedDecision(agent, request, transition(run, trigger, { now, error }));
}

function nodeRefOf(request: NodeRef): NodeRef & { readonly item?: number } {
  const { run_id, node_id, generation } = request;
  const item = itemIndexOf(request);
  return { run_id, node_id, generation, ...(item === undefined ? {} : { item }) };
}

/** A content agent's output, as `<role>.completed` carries it. */
type CompletedOutput = EventPayloads[ContentEventTypes["completed"]]["output"];

function completedDecision(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
  output: unknown,
): ContentDecision {
  // The model's answer, checked against the role's output schema when it was made (and by the
  // registry again when it is emitted).
  const payload = { ...nodeRefOf(request), output: output as CompletedOutput };
  return {
    state: run,
    emit: [{ type: agent.types.completed, payload, orderKey: request.run_id }],
  };
}

export function failedDecision(
  agent: ContentAgent,
  request: NodeRef,
  run: AgentRun,
): ContentDecision {
  const error = run.error ?? {
    code: "agent_run.failed",
    errorClass: "permanent" as const,
    message: `${agent.role} failed`,
  };
  const payload: NodeFailed = { ...nodeRefOf(request), error };
  return { state: run, emit: [{ type: agent.types.failed, payload, orderKey: request.run_id }] };
}

/** Record `count` attempts that ended in a retry: RUNNING -RetryScheduled-> READY -> RUNNING. */
export function retried(run: AgentRun, count: number, now: Date, error: RunError): AgentRun {
  let next = run;
  for (let i = 0; i < count && next.attempt < next.max_attempts; i++) {
    next = transition(next, "RetryScheduled", { now, error });
    next = transition(next, "DependenciesSatisfied", { now });
  }
  return next;
}

export function correctedReply(): RunError {
  return {
    code: MODEL_INVALID_OUTPUT,
    errorClass: "permanent",
    message: "the model's reply did not match the output schema; asked again with the issues",
  };
}
