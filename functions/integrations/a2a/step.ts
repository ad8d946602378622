import { PermanentError, UnknownOutcomeError } from "../../core/errors";
import type { SideEffectStore } from "../../core/side-effects";
import { DEFAULT_STEP_ATTEMPTS, type StepContext } from "../../core/step-role";
import { writeOnce } from "../../core/write-once";
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
 */

export interface A2aStepDeclaration extends A2aCallDeclaration {
  /** @default "write" */
  readonly effect?: "read" | "write";
  /** For a write: the agent never acts twice on one message id, so a send again is safe. */
  readonly dedupes?: boolean;
  /** Deliveries an unknown outcome may take before the step fails. @default the step's attempts */
  readonly maxUnknownAttempts?: number;
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
  const exchange = new A2aExchange(port, declaration);
  return async (input, context) => {
    const { message, ...rest } = input;
    const content = {
      ...(typeof message === "string" ? { text: message } : {}),
      ...(Object.keys(rest).length > 0 || typeof message !== "string" ? { data: rest } : {}),
    };
    if ((declaration.effect ?? "write") === "read") return exchange.send(content, undefined);
    const key = stepKey(context);
    const outcome = await writeOnce<A2aOutput>({
      name: declaration.agent,
      call: () => exchange.send(content, key),
      query: () => exchange.learn(key),
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
    if (outcome.kind === "succeeded") return outcome.output;
    if (outcome.kind === "unknown")
      throw new UnknownOutcomeError(outcome.error.code, outcome.error.message, {
        details: { key },
      });
    throw new PermanentError(outcome.error.code, outcome.error.message, { details: { key } });
  };
}

/** The key of one assignment's message: the same for every delivery of it. */
export function stepKey(context: StepContext): string {
  const item = context.item ? `:${context.item.index}` : "";
  return `${context.taskId}:${context.runId}:${context.nodeId}:${context.generation}${item}`;
}
