import { ANSWER_SCHEMA } from "../../functions/core/agent/agent";
import { personAnswerOf } from "../../functions/core/agent/person";
import type * as z from "../../schemas/zod";
import { operatorModules } from "./groups";
import { schemaExample } from "./output-example";

/**
 * The answer a person gives an agent run handed over for good (`agentbus resolve <run> --as
 * answer`, the console's answer form), as the operator tools know it before anything is sent: the
 * schema of the run's agent's answer, from the role module whose group takes the run's decision
 * command (the `answer` of its model schemas, which is the agent's `output`). An answer is checked
 * against it as the run will check it (personAnswerOf), and a person is shown its shape. What the
 * agent's `accept` checks against the outside world (the refund agent: the payment system's
 * refund) only the run can tell: such an answer is refused there, and the run still waits.
 */

/** The answer schema of the agent whose decision command is `decisionType`, if a module has it. */
export function answerSchemaOf(decisionType: string): z.core.$ZodType | undefined {
  const module = operatorModules().find(
    (m) =>
      m.modelSchemas?.[ANSWER_SCHEMA] !== undefined &&
      m.descriptor.subscriptions.includes(decisionType),
  );
  return module?.modelSchemas?.[ANSWER_SCHEMA];
}

/** Why `output` is not an answer of that agent; undefined when it is, or its schema is unknown. */
export function answerProblem(decisionType: string, output: unknown): string | undefined {
  const schema = answerSchemaOf(decisionType);
  const read = schema && personAnswerOf(schema, output);
  return read && "problem" in read ? read.problem : undefined;
}

/** An answer of that agent's shape (placeholders for its texts), to show a person. */
export function answerExample(decisionType: string): Record<string, unknown> | undefined {
  const schema = answerSchemaOf(decisionType);
  return schema && schemaExample(schema);
}
