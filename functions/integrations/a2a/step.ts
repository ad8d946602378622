import { PermanentError, UnknownOutcomeError } from "../../core/errors";
import type { SideEffectStore } from "../../core/side-effects";
import { DEFAULT_STEP_ATTEMPTS, type StepContext, StepWaiting } from "../../core/step-role";
import {
  DEFAULT_WORKING_LIMIT_SECONDS,
  nextPollAt,
  type StillGoingOn,
  type WriteOutcome,
  writeOnce,
} from "../../core/write-once";
import { type A2aCallDeclaration, A2aExchange, type A2aOutput } from "./message";
import type { A2aAgentPort } from "./port";

/**
 * Another system's A2A agent as a workflow node: the handler of a step role (`steps.run` of a
 * role module, functions/core/step-role.ts) that sends the node's input to the agent and completes
 * with its answer. The input's `message` (a string) is the message's text, its other fields the
 * data part. A write is sent once per assignment under the key
 * `<task>:<run>:<node>:<generation>` (`:<item>` for an item of a map node) through the
 * side-effect ledger (functions/core/write-once.ts), learnt as ./message.ts says; a re-run of the
 * node is a new generation, so a new message. The step fails with the agent's refusal
 * (`a2a.task_failed`, ...) or, when the outcome stays unknown after `maxUnknownAttempts`
 * deliveries, with `a2a.outcome_unknown` naming the key: a person learns what happened and
 * resolves the node (functions/core/dag, `resolve`).
 *
 * In a role that declares `waits` (its steps may wait), a write whose remote task is still
 * `submitted` or `working` when the call ends (the agent said so, or the call's time ran out
 * after the agent named its task) keeps the task's id with the ledger's record and waits: the
 * handler throws StepWaiting with the next poll (`nextPollAt`: the task's age / 4, 5 s .. 15 min),
 * the node is BLOCKED until then, and the handler run again polls the task (`tasks/get`), never
 * sending again: completed -> its output; failed, rejected, canceled, input-required ->
 * refused; still going on `taskLimitSeconds` after it was sent -> `a2a.outcome_unknown`.
 */

export interface A2aStepDeclaration extends A2aCallDeclaration {
  /** @default "write" */
  readonly effect?: "read" | "write";
  /** For a write: the agent never acts twice on one message id, so a send again is safe. */
  readonly dedupes?: boolean;
  /** Deliveries an unknown outcome may take before the step fails. @default the step's attempts */
  readonly maxUnknownAttempts?: number;
  /**
   * In a role that `waits`: how long the remote task may go on before the step's outcome is
   * unknown, in seconds. @default DEFAULT_WORKING_LIMIT_SECONDS (24 h)
   */
  readonly taskLimitSeconds?: number;
}

export type A2aStepHandler = (
  input: Readonly<Record<string, unknown>>,
  context: StepContext,
) => Promise<A2aOutput>;

/** The agent behind `port` as a step's handler; its writes are recorded in `ledger`. */
export function a2aStep(
  port: A2aAgentPort,
  ledger: SideEffectStore,
  declaration: A2aStepDeclaration,
): A2aStepHandler {
  const limit = declaration.taskLimitSeconds ?? DEFAULT_WORKING_LIMIT_SECONDS;
  if (!Number.isInteger(limit) || limit < 1)
    throw new Error(
      `a2aStep ${declaration.agent}: taskLimitSeconds must be a positive integer, got ${limit}`,
    );
  const exchange = new A2aExchange(port, declaration);
  return async (input, context) => {
    const { message, ...rest } = input;
    const content = {
      ...(typeof message === "string" ? { text: message } : {}),
      ...(Object.keys(rest).length > 0 || typeof message !== "string" ? { data: rest } : {}),
    };
    if ((declaration.effect ?? "write") === "read") return exchange.send(content, undefined);
    const key = stepKey(context);
    const waits = context.mayWait === true;
    const outcome = await writeOnce<A2aOutput>({
      name: declaration.agent,
      call: (started) =>
        waits && started
          ? exchange.sendAndWait(content, key, started)
          : exchange.send(content, key),
      query: () => exchange.learn(key),
      ...(waits
        ? { resume: (taskId: string) => exchange.resume(taskId), workingLimitSeconds: limit }
        : {}),
      ...(declaration.dedupes ? { resendSafeWithinSeconds: Number.POSITIVE_INFINITY } : {}),
      ledger,
      key,
      taskId: context.taskId,
      kind: `a2a:${declaration.agent}`,
      now: context.now,
      receiveCount: context.receiveCount,
      maxUnknownAttempts: declaration.maxUnknownAttempts ?? DEFAULT_STEP_ATTEMPTS,
      unknownCode: "a2a.outcome_unknown",
    });
    return outputOf(outcome, declaration.agent, key, context.now);
  };
}

/** The step's output, or what it throws: waiting, refused, or unknown. */
function outputOf(
  outcome: WriteOutcome<A2aOutput> | StillGoingOn,
  agent: string,
  key: string,
  now: Date,
): A2aOutput {
  if (outcome.kind === "succeeded") return outcome.output;
  if (outcome.kind === "working")
    throw new StepWaiting(
      "a2a.task_working",
      `the A2A agent ${agent}'s task ${outcome.operation} is ${outcome.status}`,
      nextPollAt(outcome, now),
      { key, taskId: outcome.operation },
    );
  if (outcome.kind === "unknown")
    throw new UnknownOutcomeError(outcome.error.code, outcome.error.message, {
      details: { key },
    });
  throw new PermanentError(outcome.error.code, outcome.error.message, { details: { key } });
}

/** The key of one assignment's message: the same for every delivery of it. */
export function stepKey(context: StepContext): string {
  const item = context.item ? `:${context.item.index}` : "";
  return `${context.taskId}:${context.runId}:${context.nodeId}:${context.generation}${item}`;
}
