import type { EventRegistry, EventTypeDefinition } from "../registry";
import * as z from "../zod";
import { NodeConfirmRequestedPayload } from "./agent-run";
import { Attempt, ItemIndex, LoopRef, MapItemRef, NodeRefShape } from "./fields";
import { streamCommand, streamFact } from "./kinds";
import {
  NodeFailedPayload,
  NodeFailure,
  NodeRequestedPayload,
  nodeCompletedPayload,
} from "./workflow";
import { NodeCancelRequestedPayload } from "./workflow-cancel";

/**
 * A workflow step carried out by any role (functions/core/dag/README.md, "How a role becomes a
 * step"). The orchestrator asks a step role on the run's stream with the role's own request type
 * (`<stem>.node.requested`, stem = the group with `-` as `_`): routing is by event type, so each
 * step role keeps its own rule, queue and FIFO groups. Every step role answers with the same two
 * facts, on the stream of its step run (one per run + node + generation): `step.completed` with
 * its output or `step.failed` with its error, each naming the role, so the orchestrator takes one
 * pair of types from every step role. A cancel (`<stem>.node.cancel.requested`) tells the role an
 * assignment no longer counts. A role may keep its own spellings of the same commands and answers
 * (`<stem>.requested`, `<stem>.completed`, ...), defined with its event types from the node
 * payloads of ./workflow.ts and ./agent-run.ts.
 * For a map node, each item of its list is an assignment of its own: the request carries the item
 * (`item`: index, count, value), and the answer and the cancel name it (`item`: its index).
 */

export const STEP_COMPLETED = "step.completed";
export const STEP_FAILED = "step.failed";

/** A consumer group's name, as a role names itself in its answers. */
export const StepRoleName = z
  .string()
  .check(z.regex(/^[a-z][a-z0-9-]{0,62}[a-z0-9]$/, { message: "must be a kebab-case group name" }));

/** A JSON object: what a step takes and answers. */
const StepObject = z.record(z.string(), z.unknown());

/** The orchestrator's request to a step role: the assignment, its upstream outputs, the run's input. */
export const StepRequestedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  /** Outputs of the upstream nodes whose edge into this node was taken, by node id. */
  input: StepObject,
  /** The run's input (the start request's). */
  run_input: StepObject,
  /** Set for an item of a map node: which item, of how many, and its value. */
  item: z.optional(MapItemRef),
  /** Set inside a loop's body from its second round on (as `<stem>.requested` has it). */
  loop: z.optional(LoopRef),
  /** Set when the assignment is sent again (as `<stem>.requested` has it). */
  redelivered: z.optional(z.literal(true)),
});
export type StepRequested = z.infer<typeof StepRequestedPayload>;

export const StepCompletedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  role: StepRoleName,
  /** The step's output, checked by the role against its declared output schema. */
  output: StepObject,
  /** The map item answered (its index), as the request named it. */
  item: z.optional(ItemIndex),
});
export type StepCompleted = z.infer<typeof StepCompletedPayload>;

export const StepFailedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  role: StepRoleName,
  error: NodeFailure,
  /** The map item answered (its index), as the request named it. */
  item: z.optional(ItemIndex),
});
export type StepFailed = z.infer<typeof StepFailedPayload>;

/** The commands the orchestrator sends a step role: its request, its cancel, its confirmation. */
export interface StepCommandTypes {
  readonly requested: string;
  readonly cancel: string;
  /** Only a role that can be BLOCKED on a confirmation takes one. */
  readonly confirm?: string;
}

/**
 * The commands of a step role that does not spell its own: derived from its group; with `waits`
 * (its steps may wait for outside work, BLOCKED until their next poll) its confirmation too.
 */
export function stepCommandTypes(group: string, waits = false): StepCommandTypes {
  const stem = group.replaceAll("-", "_");
  return {
    requested: `${stem}.node.requested`,
    cancel: `${stem}.node.cancel.requested`,
    ...(waits ? { confirm: `${stem}.node.confirm.requested` } : {}),
  };
}

/** A type and how its definition is made, once (registering is by identity). */
type Made = readonly [string, () => EventTypeDefinition];

/** The definitions made for step roles' commands and answers, once per type. */
const madeDefinitions = new Map<string, EventTypeDefinition>();

function once(made: readonly Made[]): EventTypeDefinition[] {
  return made.map(([type, make]) => {
    const known = madeDefinitions.get(type) ?? make();
    madeDefinitions.set(type, known);
    return known;
  });
}

/** How a step role's commands are defined, its request's payload given. */
function commandsMade(
  group: string,
  commands: StepCommandTypes,
  requestPayload: EventTypeDefinition["payload"],
): Made[] {
  const command = (type: string, description: string, payload: EventTypeDefinition["payload"]) =>
    [type, () => ({ ...streamCommand, type, description, payload })] as const;
  const { requested, cancel, confirm } = commands;
  return [
    command(
      requested,
      `The orchestrator assigns a node to the ${group} role (on the dag_run stream).`,
      requestPayload,
    ),
    command(
      cancel,
      `The orchestrator tells the ${group} role that its assignment of a node no longer counts (on the dag_run stream).`,
      NodeCancelRequestedPayload,
    ),
    ...(confirm === undefined
      ? []
      : [
          command(
            confirm,
            `The orchestrator tells the ${group} role how the wait of its BLOCKED node ended: confirmed, refused, or timed out (for a step waiting on outside work: its poll is due) (on the dag_run stream).`,
            NodeConfirmRequestedPayload,
          ),
        ]),
  ];
}

export function stepCommandDefinitions(group: string, waits = false): EventTypeDefinition[] {
  return once(commandsMade(group, stepCommandTypes(group, waits), StepRequestedPayload));
}

/** The answers of a step role that spells its own (`<stem>.completed`, `<stem>.failed`). */
export interface StepAnswerTypes {
  readonly completed: string;
  readonly failed: string;
}

/**
 * The definitions of a step role's own spellings as an orchestrator that holds none of the
 * role's code knows them: the hub's node payloads (a completion's output any JSON object). The
 * role's module defines the same types with its own payloads, which check more; an orchestrator's
 * function takes these only where its bundle defines none of them.
 */
export function ownStepDefinitions(
  group: string,
  commands: StepCommandTypes,
  answers: StepAnswerTypes | undefined,
): EventTypeDefinition[] {
  const made = commandsMade(group, commands, NodeRequestedPayload);
  if (answers !== undefined)
    made.push(
      [
        answers.completed,
        () => ({
          ...streamFact,
          type: answers.completed,
          description: `The ${group} role completed a node (on the stream of its run).`,
          payload: nodeCompletedPayload(StepObject),
        }),
      ],
      [
        answers.failed,
        () => ({
          ...streamFact,
          type: answers.failed,
          description: `The ${group} role gave up on a node (on the stream of its run).`,
          payload: NodeFailedPayload,
        }),
      ],
    );
  return once(made);
}

export function defineStepEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...streamFact,
      type: "step.completed",
      description:
        "A step role completed a node, its output checked against its schema (on the stream of its step run).",
      payload: StepCompletedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "step.failed",
      description:
        "A step role gave up on a node: bad input, an output that does not fit its schema, a refusal or retries spent (on the stream of its step run).",
      payload: StepFailedPayload,
    }),
  ] as const;
}
