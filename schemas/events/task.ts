import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { outsideFact, streamFact } from "./kinds";

/**
 * The task lifecycle of the reference workflow: one task aggregate whose stream records
 * accepted -> planned -> generated -> delivered, plus client feedback that enters from outside
 * the event store (unsequenced).
 */
export const TaskAcceptedPayload = z.object({
  title: z.string().check(z.minLength(1), z.maxLength(200)),
});
/** plan.created v1: the steps as bare titles. Stored v1 events are read as v2 (upcast). */
export const PlanCreatedV1Payload = z.object({
  steps: z
    .array(z.string().check(z.minLength(1), z.maxLength(200)))
    .check(z.minLength(1), z.maxLength(20)),
});
const PlanStep = z.object({
  title: z.string().check(z.minLength(1), z.maxLength(200)),
  /** The tool the step calls, when it calls one. */
  tool: z.optional(z.string().check(z.regex(/^[a-z][a-z0-9_.-]{0,63}$/))),
});
/** plan.created v2: each step is an object (its title, and the tool it calls if any). */
export const PlanCreatedPayload = z.object({
  steps: z.array(PlanStep).check(z.minLength(1), z.maxLength(20)),
});
export const AnswerGeneratedPayload = z.object({
  answer_ref: z.string().check(z.minLength(1), z.maxLength(128)),
});
export const NotificationSentPayload = z.object({
  channel: z.string().check(z.minLength(1), z.maxLength(64)),
});
export const FeedbackReceivedPayload = z.object({
  rating: z.int().check(z.minimum(1), z.maximum(5)),
  comment: z.optional(z.string().check(z.maxLength(2000))),
});

export type TaskAccepted = z.infer<typeof TaskAcceptedPayload>;
export type PlanCreated = z.infer<typeof PlanCreatedPayload>;
export type PlanCreatedV1 = z.infer<typeof PlanCreatedV1Payload>;
export type AnswerGenerated = z.infer<typeof AnswerGeneratedPayload>;
export type NotificationSent = z.infer<typeof NotificationSentPayload>;
export type FeedbackReceived = z.infer<typeof FeedbackReceivedPayload>;

/** The task events; each definition is returned, so its payload type can be read from it. */
export function defineTaskEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...streamFact,
      type: "task.accepted",
      description: "A task was accepted for work.",
      payload: TaskAcceptedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "plan.created",
      description: "A plan for the task was made.",
      payload: PlanCreatedV1Payload,
    }),
    registry.define({
      ...streamFact,
      schemaVersion: 2,
      type: "plan.created",
      description: "A plan for the task was made (each step an object: title, tool).",
      payload: PlanCreatedPayload,
      upcast: (previous) => ({
        steps: (previous as PlanCreatedV1).steps.map((title) => ({ title })),
      }),
    }),
    registry.define({
      ...streamFact,
      type: "answer.generated",
      description: "An answer for the task was generated.",
      payload: AnswerGeneratedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "notification.sent",
      description: "The answer was delivered to the user.",
      payload: NotificationSentPayload,
    }),
    registry.define({
      ...outsideFact,
      type: "task.feedback.received",
      description: "A user rated a task (sent by a client; not from an event stream).",
      payload: FeedbackReceivedPayload,
    }),
  ] as const;
}
