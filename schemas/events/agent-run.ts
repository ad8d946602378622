import { IsoTime } from "../envelope";
import { OpaqueId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import {
  Attempt,
  ItemIndex,
  LoopRef,
  MapItemRef,
  NodeId,
  NodeRefShape,
  OperatorReason,
  Requester,
} from "./fields";
import { outsideCommand, outsideFact, streamFact } from "./kinds";
import { RunInput } from "./run-input";
import { LeaseSeconds } from "./workflow";

/**
 * Agent runs as the orchestrator and the operator see them (seed 001 §2):
 *
 * - `node.started`: a step role's agent acknowledges an assignment when it starts on it (or resumes
 *   it after a confirmation). Published straight to the events bus when the request enters the
 *   agent's consumer, before the model call (unsequenced, aggregate dag_run/<run_id>, version 0):
 *   the node is RUNNING from then in the run's state and on the console.
 * - `node.blocked`: the agent cannot finish without an external confirmation; its agent run is
 *   BLOCKED until `confirm_by` (on the agent run's stream).
 * - `workflow.confirm.requested`: an operator answers a BLOCKED node (confirmed or refused).
 * - `<stem>.confirm.requested`: the orchestrator hands the answer, or the timeout, to the node's
 *   agent on the run's stream (the agent's command channel), with the assignment's context again;
 *   a step role that can be BLOCKED defines its own (`confirmEventType`, payload
 *   `NodeConfirmRequestedPayload`).
 * - `node.confirm.expired` / `node.dependency.expired`: the sweeper found a BLOCKED node past its
 *   confirmation deadline, or a node still waiting for its inputs past its dependency timeout.
 */

/** The agent role (consumer group) of a step role. */
const AgentRole = z.string().check(z.minLength(1), z.maxLength(64));

export const NodeStartedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  /** The agent role that started. */
  agent: AgentRole,
  lease_seconds: LeaseSeconds,
  /** True when the agent resumes a BLOCKED assignment after its confirmation. */
  resumed: z.optional(z.boolean()),
});
export type NodeStarted = z.infer<typeof NodeStartedPayload>;

/** What the agent asks to have confirmed, in its words. */
export const ConfirmationQuestion = z.string().check(z.minLength(1), z.maxLength(2000));

export const NodeBlockedPayload = z.object({
  ...NodeRefShape,
  agent: AgentRole,
  question: ConfirmationQuestion,
  /** When the wait ends without a confirmation (ExternalConfirmTimeout). */
  confirm_by: IsoTime,
  /** The map item whose assignment is BLOCKED (its index), for an item of a map node. */
  item: z.optional(ItemIndex),
});
export type NodeBlocked = z.infer<typeof NodeBlockedPayload>;

export const CONFIRM_ANSWERS = ["confirmed", "refused"] as const;

export const WorkflowConfirmRequestedPayload = z.object({
  run_id: OpaqueId,
  node_id: NodeId,
  answer: z.enum(CONFIRM_ANSWERS),
  /** What the operator confirms or why they refuse; handed to the agent with the answer. */
  note: z.optional(OperatorReason),
  requested_by: Requester,
  /**
   * Since when the wait this answers has waited (its `since`, as `agentbus approvals` and the
   * console showed it): a node waits more than once (a map's items one at a time, a plan proposed
   * again after a re-run), and an answer given to one wait must not answer the next. Refused
   * (`workflow.confirm_stale`) when the node now waits since another time; none: whatever the
   * node waits for when the answer arrives.
   */
  waiting_since: z.optional(IsoTime),
});
export type WorkflowConfirmRequested = z.infer<typeof WorkflowConfirmRequestedPayload>;

/** What the agent of a BLOCKED node is told: an operator's answer, or that the wait ran out. */
export const CONFIRM_OUTCOMES = ["confirmed", "refused", "timed_out"] as const;
export type ConfirmOutcome = (typeof CONFIRM_OUTCOMES)[number];

export const NodeConfirmRequestedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  outcome: z.enum(CONFIRM_OUTCOMES),
  question: ConfirmationQuestion,
  note: z.optional(OperatorReason),
  requested_by: z.optional(Requester),
  /** The assignment's context, handed to the agent again to resume with. */
  input: z.record(z.string(), z.unknown()),
  run_input: RunInput,
  /** The map item whose assignment it resumes, for an item of a map node. */
  item: z.optional(MapItemRef),
  /** The loop round of the assignment it resumes, inside a loop's body from round 2 on. */
  loop: z.optional(LoopRef),
});
export type NodeConfirmRequested = z.infer<typeof NodeConfirmRequestedPayload>;

export const NodeConfirmExpiredPayload = z.object({ ...NodeRefShape, confirm_by: IsoTime });
export type NodeConfirmExpired = z.infer<typeof NodeConfirmExpiredPayload>;

export const NodeDependencyExpiredPayload = z.object({
  ...NodeRefShape,
  /** When the node's wait for its inputs ran out. */
  due_at: IsoTime,
});
export type NodeDependencyExpired = z.infer<typeof NodeDependencyExpiredPayload>;

/** The confirmation command of a step role whose agent can be BLOCKED, from its stem. */
export function confirmEventType<S extends string>(stem: S): `${S}.confirm.requested` {
  return `${stem}.confirm.requested`;
}

export function defineAgentRunEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideFact,
      type: "node.started",
      heartbeat: true,
      description:
        "An agent started (or resumed) work on a node's assignment: the node is RUNNING (aggregate dag_run/<run_id>, version 0).",
      payload: NodeStartedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "node.blocked",
      description:
        "An agent needs an external confirmation to finish a node; its agent run is BLOCKED until confirm_by (on its agent_run stream).",
      payload: NodeBlockedPayload,
    }),
    registry.define({
      ...outsideCommand,
      type: "workflow.confirm.requested",
      description:
        "An operator confirms (or refuses) what the agent of a BLOCKED node asked (aggregate dag_run/<run_id>, version 0).",
      payload: WorkflowConfirmRequestedPayload,
    }),
    registry.define({
      ...outsideFact,
      type: "node.confirm.expired",
      description:
        "The sweeper found a BLOCKED node past its confirmation deadline (ExternalConfirmTimeout of seed 001).",
      payload: NodeConfirmExpiredPayload,
    }),
    registry.define({
      ...outsideFact,
      type: "node.dependency.expired",
      description:
        "The sweeper found a node still waiting for its inputs past its dependency timeout (DependencyTimeout of seed 001).",
      payload: NodeDependencyExpiredPayload,
    }),
  ] as const;
}
