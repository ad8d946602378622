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
  type NodeRef,
  NodeRefShape,
  OperatorReason,
  Requester,
} from "./fields";
import { outsideCommand, outsideFact, streamFact } from "./kinds";
import { RunInput } from "./run-input";

/**
 * A workflow run (seed 001 §6) on the bus.
 *
 * - Operator commands enter from outside a stream (unsequenced, version 0, de-duplicated by event
 *   id): start a run, re-run from a node, reset a FAILED node, nudge a run whose work was held
 *   back by backpressure. A scheduled sweeper reports expired node leases the same way, and a
 *   step role busy with a long call reports `node.heartbeat` to extend its node's lease.
 * - The orchestrator appends to the run's own stream (aggregate `dag_run`, id = run_id): one
 *   request command per released node (its step role's: ./step.ts), and
 *   `workflow.completed|partial|failed` when the run ends (or `workflow.rejected` when it refuses
 *   a request).
 * - Each step role appends its outcome to the stream of its own run of the assignment (one per
 *   run_id + node_id + generation). A role that spells its own commands and outcomes (an
 *   application's) builds their payloads from the node payloads here.
 * Every command and outcome of one run carries `order_key = run_id`, so one run's traffic is
 * serialized within each consumer group.
 */

export { NodeId } from "./fields";
export { RUN_INPUT_MAX_BYTES, RunInput } from "./run-input";

/**
 * What a start may name: a workflow compiled into the orchestrator, a workflow the stack was
 * given, or one registered at run time; kebab-case, so never a run id. A name the orchestrator
 * does not know is refused with `workflow.rejected`, so an operator sees the refusal on the bus
 * instead of a dead-lettered message.
 */
export const WORKFLOW_NAME_PATTERN = /^[a-z][a-z0-9-]{0,63}$/;
const WorkflowName = z
  .string()
  .check(
    z.regex(WORKFLOW_NAME_PATTERN, { message: "must be kebab-case, max 64" }),
    z.describe(
      "a workflow's name (kebab-case): one compiled into the orchestrator, a workflow the stack was given, or one registered at run time",
    ),
  );

/** workflow.start.requested v1 (still accepted from clients: read as v2). */
export const WorkflowStartRequestedV1Payload = z.object({
  run_id: OpaqueId,
  workflow: WorkflowName,
  request: RunInput,
});
export type WorkflowStartRequestedV1 = z.infer<typeof WorkflowStartRequestedV1Payload>;

/**
 * workflow.start.requested v2: `workflow` renamed `workflow_name` (it names a definition);
 * `request` is the run's input, checked by the orchestrator against the workflow's declared input.
 */
export const WorkflowStartRequestedPayload = z.object({
  run_id: OpaqueId,
  workflow_name: WorkflowName,
  request: RunInput,
});
/** An operator's request about one node of a run: re-run it, or reset it when FAILED. */
export const WorkflowRerunRequestedPayload = z.object({
  run_id: OpaqueId,
  node_id: NodeId,
  reason: z.optional(OperatorReason),
  /** Absent in commands from clients that do not say (the audit trail keeps the producer). */
  requested_by: z.optional(Requester),
});
export const WorkflowResetRequestedPayload = WorkflowRerunRequestedPayload;
export const WorkflowReleaseRequestedPayload = z.object({ run_id: OpaqueId });
export const NodeLeaseExpiredPayload = z.object({
  ...NodeRefShape,
  /** When the lease ran out (the sweeper's view). */
  expired_at: z.optional(IsoTime),
});

/** The most a heartbeat may extend a node's lease by, in seconds. */
export const MAX_HEARTBEAT_LEASE_SECONDS = 3600;
/** The node's lease runs at least this long from the orchestrator's receipt of the message. */
export const LeaseSeconds = z.int().check(z.minimum(1), z.maximum(MAX_HEARTBEAT_LEASE_SECONDS));
export const NodeHeartbeatPayload = z.object({ ...NodeRefShape, lease_seconds: LeaseSeconds });

export const ErrorClassSchema = z.enum(["transient", "permanent", "business", "unknown_outcome"]);
export const NodeFailure = z.object({
  code: z.string().check(z.minLength(1), z.maxLength(256)),
  errorClass: ErrorClassSchema,
  message: z.string().check(z.maxLength(4096)),
});
export type NodeFailure = z.infer<typeof NodeFailure>;

export const NodeRequestedPayload = z.object({
  ...NodeRefShape,
  attempt: Attempt,
  /** Outputs of the upstream nodes whose edge into this node was taken, by node id. */
  input: z.record(z.string(), z.unknown()),
  /** The run's input (the start request's). */
  run_input: RunInput,
  /** Set for an item of a map node: which item, of how many, and its value. */
  item: z.optional(MapItemRef),
  /** Set inside a loop's body from its second round on: the round and the round before's outputs. */
  loop: z.optional(LoopRef),
  /**
   * Set when the assignment is sent again (its lease ran out): an earlier copy may be on the
   * stream unseen, so the agent reads its stream before this one (Role.beginsState).
   */
  redelivered: z.optional(z.literal(true)),
});
export type NodeRequested = z.infer<typeof NodeRequestedPayload>;

/** The map item an answer is for (its index), as the request named it. */
const AnsweredItem = { item: z.optional(ItemIndex) };
/** A node's completion with `output`, for a role that spells its own outcomes. */
export const nodeCompletedPayload = <O extends z.ZodMiniType>(output: O) =>
  z.object({ ...NodeRefShape, output, ...AnsweredItem });
export const NodeFailedPayload = z.object({ ...NodeRefShape, error: NodeFailure, ...AnsweredItem });
export type NodeCompleted<O = unknown> = NodeRef & { output: O; item?: number };
export type NodeFailed = z.infer<typeof NodeFailedPayload>;

export const NodeErrorResult = z.object({
  code: z.string().check(z.minLength(1), z.maxLength(128)),
  message: z.string().check(z.maxLength(4096)),
  error_class: z.optional(ErrorClassSchema),
});
/** At most one entry per node of a run (a workflow definition has at most 1,000 nodes). */
const NodeIds = z.array(z.string().check(z.maxLength(128))).check(z.maxLength(1000));
/** The DAG executor's run result (`runResult`). */
export const RunResultSchema = z.object({
  status: z.enum(["RUNNING", "COMPLETED", "FAILED", "PARTIAL", "CANCELLED"]),
  outputs: z.record(z.string(), z.unknown()),
  completed: NodeIds,
  degraded: NodeIds,
  failed: z
    .array(
      z.object({ node_id: z.string().check(z.maxLength(128)), error: z.optional(NodeErrorResult) }),
    )
    .check(z.maxLength(1000)),
  cancelled: NodeIds,
  skipped: NodeIds,
});
/**
 * A child run's parent: the run, the child node and the generation of the node's assignment. A
 * child run carries `parent_run_id` and `parent_node_id` on the events about itself (its end,
 * a refusal of its start).
 */
export const ParentShape = {
  parent_run_id: z.optional(OpaqueId),
  parent_node_id: z.optional(NodeId),
};
export const WorkflowEndedPayload = z.object({
  run_id: OpaqueId,
  result: RunResultSchema,
  ...ParentShape,
});
export type WorkflowEnded = z.infer<typeof WorkflowEndedPayload>;

export const WORKFLOW_REQUESTS = [
  "start",
  "rerun",
  "reset",
  "release",
  "cancel",
  "resolve",
  "confirm",
  "signal",
] as const;
export const WorkflowRejectedPayload = z.object({
  run_id: OpaqueId,
  request: z.enum(WORKFLOW_REQUESTS),
  node_id: z.optional(NodeId),
  code: z.string().check(z.minLength(1), z.maxLength(256)),
  message: z.string().check(z.maxLength(4096)),
  ...ParentShape,
});
export type WorkflowRejected = z.infer<typeof WorkflowRejectedPayload>;

export type WorkflowStartRequested = z.infer<typeof WorkflowStartRequestedPayload>;
export type WorkflowRerunRequested = z.infer<typeof WorkflowRerunRequestedPayload>;
export type WorkflowResetRequested = z.infer<typeof WorkflowResetRequestedPayload>;
export type WorkflowReleaseRequested = z.infer<typeof WorkflowReleaseRequestedPayload>;
export type NodeLeaseExpired = z.infer<typeof NodeLeaseExpiredPayload>;
export type NodeHeartbeat = z.infer<typeof NodeHeartbeatPayload>;

export function defineWorkflowEvents(registry: EventRegistry) {
  return [
    ...defineRunCommands(registry),
    ...defineLeaseEvents(registry),
    ...defineRunEndEvents(registry),
  ] as const;
}

/** What an operator (or a scheduler) asks of a run. */
function defineRunCommands(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideCommand,
      type: "workflow.start.requested",
      description:
        "Start a run of the named workflow (sent by an operator; aggregate dag_run/<run_id>, version 0).",
      payload: WorkflowStartRequestedV1Payload,
    }),
    registry.define({
      ...outsideCommand,
      schemaVersion: 2,
      type: "workflow.start.requested",
      description:
        "Start a run of the named workflow, with its input (sent by an operator; aggregate dag_run/<run_id>, version 0).",
      payload: WorkflowStartRequestedPayload,
      upcast: (previous) => {
        const { workflow, ...rest } = previous as WorkflowStartRequestedV1;
        return { ...rest, workflow_name: workflow };
      },
    }),
    registry.define({
      ...outsideCommand,
      type: "workflow.rerun.requested",
      description: "Re-run a node of a run and everything below it, under a new generation.",
      payload: WorkflowRerunRequestedPayload,
    }),
    registry.define({
      ...outsideCommand,
      type: "workflow.reset.requested",
      description:
        "Manual reset of a FAILED node (seed 001 ManualReset): run it and its descendants again under a new generation.",
      payload: WorkflowResetRequestedPayload,
    }),
    registry.define({
      ...outsideCommand,
      type: "workflow.release.requested",
      description:
        "Release the READY nodes of a run that backpressure held back (sent by a scheduler or an operator).",
      payload: WorkflowReleaseRequestedPayload,
    }),
  ] as const;
}

/** A node's lease: the sweeper reports it expired, a busy agent extends it. */
function defineLeaseEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...outsideFact,
      type: "node.lease.expired",
      description:
        "The sweeper found a node of a run RUNNING past its lease (the TaskHung entry of seed 001).",
      payload: NodeLeaseExpiredPayload,
    }),
    registry.define({
      ...outsideFact,
      type: "node.heartbeat",
      heartbeat: true,
      description:
        "A step role is still working on a node (a long model call): the orchestrator extends the node's lease (aggregate dag_run/<run_id>, version 0).",
      payload: NodeHeartbeatPayload,
    }),
  ] as const;
}

function defineRunEndEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...streamFact,
      type: "workflow.completed",
      description: "Every node of the run completed (or was degraded or skipped).",
      payload: WorkflowEndedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.partial",
      description: "The run ended with some nodes completed and others failed or cancelled.",
      payload: WorkflowEndedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.failed",
      description: "The run ended without any node completed.",
      payload: WorkflowEndedPayload,
    }),
    registry.define({
      ...streamFact,
      type: "workflow.rejected",
      description:
        "The orchestrator refused an operator request (unknown workflow, unknown run or node, re-run or reset not possible).",
      payload: WorkflowRejectedPayload,
    }),
  ] as const;
}
