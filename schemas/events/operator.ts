import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { outsideFact } from "./kinds";

/** Who asked: an operator's name or role (from AGENTBUS_OPERATOR or the user running the CLI). */
export const OperatorName = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(128),
    z.regex(/^[^\s@]+$/, { message: "an operator name without spaces or @" }),
  );

export const OperatorActionPayload = z.object({
  /** What was done, e.g. `dlq.redrive`. */
  action: z.string().check(z.regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/)),
  /** What it was done to: a consumer group, a run, a side-effect key, ... */
  target: z.string().check(z.minLength(1), z.maxLength(256)),
  requested_by: OperatorName,
  reason: z.optional(z.string().check(z.maxLength(1000))),
  /** What changed, in numbers and ids (no message bodies: they may carry personal data). */
  outcome: z.object({
    count: z.int().check(z.nonnegative()),
    event_ids: z.array(z.string().check(z.maxLength(64))).check(z.maxLength(100)),
    failed: z.int().check(z.nonnegative()),
  }),
});
export type OperatorAction = z.output<typeof OperatorActionPayload>;

/** The audit trail of what operators did by hand (redrive, replay, republish, ...). */
export function defineOperatorEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideFact,
      type: "operator.action.recorded",
      description:
        "An operator's repair action and what it changed (who, when, why): the audit trail of manual work (aggregate operator_action/<id>, version 0).",
      payload: OperatorActionPayload,
    }),
  ] as const;
}
