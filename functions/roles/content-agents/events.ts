import * as z from "../../../schemas/zod";
import {
  confirmEventType,
  defineEventType,
  NodeCancelRequestedPayload,
  NodeConfirmRequestedPayload,
  NodeFailedPayload,
  NodeRequestedPayload,
  nodeCompletedPayload,
  type PayloadTypes,
  runInputBounds,
  streamCommand,
  streamFact,
} from "../../kit";

/**
 * The content-production application's event types (seed 001 §6), defined once, when this file
 * is first imported; each content agent's module lists them in its `events`. Each content agent
 * (consumer group = its role) spells the step commands and answers of the hub's workflows
 * (functions/core/dag/README.md) with its own event-name stem:
 *
 * - `<stem>.requested`: the orchestrator assigns a node to the agent (on the run's stream);
 * - `<stem>.cancel.requested`: the assignment no longer counts (run cancelled, node re-run, ...);
 * - `<stem>.confirm.requested`: how the confirmation a BLOCKED node waits for ended;
 * - `<stem>.completed` / `<stem>.failed`: the agent's outcome, on the stream of its agent run.
 *
 * The commands carry the run's input as the content request (below); the payloads are otherwise
 * the hub's node payloads.
 */

/** The content workflows a start names by kind (each its newest started version: ./workflows.ts). */
export const WORKFLOW_KINDS = ["quick-news", "long-form"] as const;
export type WorkflowKind = (typeof WORKFLOW_KINDS)[number];

/** The longest topic hint. */
export const TOPIC_HINT_MAX_LENGTH = 2000;

/**
 * What the operator asks for (a content run's input, what the content agents read as
 * `run_input`): a topic hint; extra fields travel to the agents, within a run input's bounds.
 */
export const ContentRequest = z
  .looseObject({
    topic_hint: z.string().check(z.minLength(1), z.maxLength(TOPIC_HINT_MAX_LENGTH)),
  })
  .check(...runInputBounds<{ topic_hint: string }>());
export type ContentRequest = z.infer<typeof ContentRequest>;

// Outputs of the content roles: what each agent's model must answer (`…Answer`), and what its
// completion carries (`…Output`). They differ only where a field was added after completions
// without it were written: a completion may lack it, a model's answer may not.

const ShortText = (max: number) => z.string().check(z.minLength(1), z.maxLength(max));

/** The most claims topic selection hands to the fact check (one map item each). */
export const MAX_CLAIMS = 12;
/** A claim to check: one short sentence. */
export const Claim = ShortText(300);

export const TopicSelectionOutput = z.object({
  topic: ShortText(500),
  angle: ShortText(500),
  sources: z.array(ShortText(500)).check(z.minLength(1), z.maxLength(20)),
  /** The claims the article will rest on, each checked on its own (absent in older answers). */
  claims: z.optional(z.array(Claim).check(z.maxLength(MAX_CLAIMS))),
});
export const TopicSelectionAnswer = z.object({
  ...TopicSelectionOutput.shape,
  claims: z.array(Claim).check(z.minLength(1), z.maxLength(MAX_CLAIMS)),
});
/** A fact check's verdict: on the topic's claims as a whole, or on the one claim of a map item. */
export const FactCheckOutput = z.object({
  verdict: z.enum(["pass", "fail"]),
  checked_claims: z.int().check(z.nonnegative()),
  notes: ShortText(4000),
});
export const WritingOutput = z.object({
  title: ShortText(300),
  body: ShortText(50_000),
});
/**
 * A review's decision and the text it settles on: `approved`, and when it is not, `notes` saying
 * what to change (the writer's next round works from them); `final_title` and `final_body` are
 * the article as the reviewer would publish it (absent in older answers).
 */
export const ReviewOutput = z.object({
  approved: z.boolean(),
  edits: z.int().check(z.nonnegative()),
  final_title: ShortText(300),
  final_body: z.optional(ShortText(50_000)),
  notes: z.optional(ShortText(2000)),
});
export const ReviewAnswer = z
  .object({ ...ReviewOutput.shape, final_body: ShortText(50_000) })
  .check(
    z.refine((review) => review.approved || review.notes !== undefined, {
      message: "a review that does not approve says why in notes",
      path: ["notes"],
    }),
  );
export type TopicSelectionOutput = z.infer<typeof TopicSelectionOutput>;
export type FactCheckOutput = z.infer<typeof FactCheckOutput>;
export type WritingOutput = z.infer<typeof WritingOutput>;
export type ReviewOutput = z.infer<typeof ReviewOutput>;

/**
 * The content roles: agent role (consumer group) -> event-name stem, the schema of its
 * completion's output, and the schema its model's answer must fit.
 */
export const CONTENT_ROLE_EVENTS = {
  "topic-selection": {
    stem: "topic_selection",
    output: TopicSelectionOutput,
    answer: TopicSelectionAnswer,
  },
  "fact-check": { stem: "fact_check", output: FactCheckOutput, answer: FactCheckOutput },
  writing: { stem: "writing", output: WritingOutput, answer: WritingOutput },
  review: { stem: "review", output: ReviewOutput, answer: ReviewAnswer },
} as const;
export type ContentRole = keyof typeof CONTENT_ROLE_EVENTS;
export const CONTENT_ROLES = Object.keys(CONTENT_ROLE_EVENTS) as ContentRole[];

/** The event-name stem of each content role (`fact_check` for `fact-check`, ...). */
export type ContentStem<R extends ContentRole = ContentRole> =
  (typeof CONTENT_ROLE_EVENTS)[R]["stem"];

/**
 * The event types of a content role: the orchestrator's commands to its agent (`requested`, and
 * `cancel` when an assignment no longer counts) and the agent's outcomes. Typed by the role's
 * stem, so the types defined from them keep their names in the type system.
 */
export interface ContentEventTypes<S extends string = ContentStem> {
  readonly requested: `${S}.requested`;
  readonly cancel: `${S}.cancel.requested`;
  readonly completed: `${S}.completed`;
  readonly failed: `${S}.failed`;
}

export function contentEventTypes<R extends ContentRole>(
  role: R,
): ContentEventTypes<ContentStem<R>> {
  const { stem } = CONTENT_ROLE_EVENTS[role];
  return {
    requested: `${stem}.requested`,
    cancel: `${stem}.cancel.requested`,
    completed: `${stem}.completed`,
    failed: `${stem}.failed`,
  };
}

/** A node's assignment to a content agent: the hub's, its run input the content request. */
export const ContentNodeRequestedPayload = z.extend(NodeRequestedPayload, {
  /** The run's input (the operator's request). */
  run_input: ContentRequest,
});
export type ContentNodeRequested = z.infer<typeof ContentNodeRequestedPayload>;

/** The answer to a content agent's BLOCKED node: the hub's, its run input the content request. */
export const ContentConfirmRequestedPayload = z.extend(NodeConfirmRequestedPayload, {
  run_input: ContentRequest,
});
export type ContentConfirmRequested = z.infer<typeof ContentConfirmRequestedPayload>;

/**
 * A content role's commands and outcomes. Defined in a loop over the roles, its types share one
 * payload type each in the type system: `<stem>.completed` carries any role's output there.
 */
function defineContentRoleEvents(role: ContentRole) {
  const { output, stem } = CONTENT_ROLE_EVENTS[role];
  const types = contentEventTypes(role);
  return [
    defineEventType({
      ...streamCommand,
      type: types.requested,
      description: `The orchestrator assigns a ${role} node to the ${role} agent (on the dag_run stream).`,
      payload: ContentNodeRequestedPayload,
    }),
    defineEventType({
      ...streamFact,
      type: types.completed,
      description: `The ${role} agent completed a node (on its agent_run stream).`,
      payload: nodeCompletedPayload(output),
    }),
    defineEventType({
      ...streamFact,
      type: types.failed,
      description: `The ${role} agent gave up on a node: retries exhausted, a permanent error, a business refusal or a model output that needs a human (on its agent_run stream).`,
      payload: NodeFailedPayload,
    }),
    defineEventType({
      ...streamCommand,
      type: types.cancel,
      description: `The orchestrator tells the ${role} agent that its assignment of a node no longer counts (run cancelled or node re-run; on the dag_run stream): a request for it still queued is discarded, a run in progress ends CANCELLED.`,
      payload: NodeCancelRequestedPayload,
    }),
    defineEventType({
      ...streamCommand,
      type: confirmEventType(stem),
      description: `The orchestrator tells the ${role} agent how the confirmation its BLOCKED node waits for ended: confirmed, refused or timed out (on the dag_run stream), with the assignment's context.`,
      payload: ContentConfirmRequestedPayload,
    }),
  ] as const;
}

/** The content application's event types, in the order defined. */
export const CONTENT_EVENT_TYPES = CONTENT_ROLES.flatMap(defineContentRoleEvents);

declare module "../../kit" {
  interface EventPayloads extends PayloadTypes<(typeof CONTENT_EVENT_TYPES)[number]> {}
}
