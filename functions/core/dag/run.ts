import * as z from "../../../schemas/zod";
import { Identifier } from "./definition";

/**
 * A DAG run, the aggregate the engine transforms: node and run states, the schema a stored run
 * is read with, and what a transition returns (the next run, the commands to send, the events
 * that record what happened, the READY nodes held back).
 */

export const NODE_STATES = [
  "PENDING",
  "READY",
  "RUNNING",
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "DEGRADED",
  "SKIPPED",
] as const;
export const RUN_STATUSES = ["RUNNING", "COMPLETED", "FAILED", "PARTIAL", "CANCELLED"] as const;

export const NodeStateSchema = z.enum(NODE_STATES);
export const RunStatusSchema = z.enum(RUN_STATUSES);

export const NodeErrorSchema = z.object({
  code: z.string().check(z.minLength(1)),
  message: z.string(),
  error_class: z.optional(z.enum(["transient", "permanent", "business", "unknown_outcome"])),
});

export const NodeRunSchema = z.object({
  state: NodeStateSchema,
  /** Incoming edges whose upstream has not ended yet (the in-degree counter). */
  remaining_upstreams: z.int().check(z.nonnegative()),
  /** How many times the node was assigned, over all generations (1 on the first assignment). */
  attempt: z.int().check(z.nonnegative()),
  /** The run generation of the node's current assignment; absent until assigned (again). */
  assigned_generation: z.optional(z.int().check(z.nonnegative())),
  output: z.optional(z.unknown()),
  error: z.optional(NodeErrorSchema),
});

export const DagRunSchema = z.object({
  run_id: z.string().check(z.minLength(1), z.maxLength(256)),
  workflow: z.object({ name: Identifier, version: z.int().check(z.positive()) }),
  status: RunStatusSchema,
  /** Incremented by each partial re-run: deliveries for an older assignment are stale. */
  generation: z.int().check(z.nonnegative()),
  /** The run's input, handed to the root nodes. */
  input: z.unknown(),
  nodes: z.record(Identifier, NodeRunSchema),
});

export type NodeState = z.output<typeof NodeStateSchema>;
export type RunStatus = z.output<typeof RunStatusSchema>;
export type NodeError = z.output<typeof NodeErrorSchema>;
export type NodeRun = z.output<typeof NodeRunSchema>;
export type DagRun = z.output<typeof DagRunSchema>;

export type DagCommand =
  | {
      readonly type: "node.assign";
      readonly run_id: string;
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
      /** Outputs of the upstreams whose edge into this node was taken, by node id. */
      readonly input: Readonly<Record<string, unknown>>;
      /** The run's input (what the roots work from). */
      readonly run_input: unknown;
    }
  | {
      /** An assignment no longer counts: stop its work (re-run or run cancelled), or close the
       * FAILED one a person reset or resolved. */
      readonly type: "node.cancel";
      readonly run_id: string;
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
      readonly reason: NodeCancelReason;
    };

/** Why an assignment no longer counts (`node.cancel`). */
export type NodeCancelReason = "rerun" | "run_cancelled" | "reset" | "resolved";

export type IgnoredReason = "duplicate" | "stale_generation" | "not_running";

export type DagEvent =
  | { readonly type: "run.started"; readonly generation: number }
  | { readonly type: "node.ready"; readonly node_id: string; readonly generation: number }
  | {
      readonly type: "node.released";
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
    }
  | {
      /** The same assignment sent again: its outcome was unknown when its lease ran out. */
      readonly type: "node.redelivered";
      readonly node_id: string;
      readonly role: string;
      readonly attempt: number;
      readonly generation: number;
    }
  | { readonly type: "node.completed"; readonly node_id: string; readonly generation: number }
  | {
      /** A person supplied the output of a FAILED node: it counts as COMPLETED with that output. */
      readonly type: "node.resolved";
      readonly node_id: string;
      readonly generation: number;
    }
  | {
      readonly type: "node.degraded";
      readonly node_id: string;
      readonly generation: number;
      readonly error: NodeError;
    }
  | {
      readonly type: "node.failed";
      readonly node_id: string;
      readonly generation: number;
      readonly error: NodeError;
    }
  | {
      readonly type: "node.cancelled";
      readonly node_id: string;
      readonly reason: "upstream_failed" | "run_cancelled";
      /** The failed or cancelled upstream(s) that decided it. */
      readonly upstreams?: readonly string[];
    }
  | { readonly type: "node.skipped"; readonly node_id: string }
  | {
      readonly type: "delivery.ignored";
      readonly node_id: string;
      readonly outcome: "completed" | "failed";
      readonly generation: number;
      readonly reason: IgnoredReason;
      readonly state: NodeState;
    }
  | {
      readonly type: "run.rerun";
      readonly from: string;
      readonly generation: number;
      readonly nodes: readonly string[];
    }
  | {
      readonly type: "run.completed" | "run.partial" | "run.failed" | "run.cancelled";
      readonly result: RunResult;
    };

/** Every DagEvent type (a stored timeline is read with this list). */
export const DAG_EVENT_TYPES = [
  "run.started",
  "node.ready",
  "node.released",
  "node.redelivered",
  "node.completed",
  "node.resolved",
  "node.degraded",
  "node.failed",
  "node.cancelled",
  "node.skipped",
  "delivery.ignored",
  "run.rerun",
  "run.completed",
  "run.partial",
  "run.failed",
  "run.cancelled",
] as const satisfies readonly DagEvent["type"][];
export const DagEventTypeSchema = z.enum(DAG_EVENT_TYPES);
type UnlistedEventType = Exclude<DagEvent["type"], (typeof DAG_EVENT_TYPES)[number]>;
/** Does not compile while a DagEvent type is missing from DAG_EVENT_TYPES. */
export const DAG_EVENT_TYPES_COMPLETE: [UnlistedEventType] extends [never] ? true : never = true;

export const HeldNodeSchema = z.object({
  node_id: z.string(),
  role: z.string(),
  reason: z.enum(["global_cap", "role_cap", "queue_depth"]),
});
export type HeldNode = Readonly<z.output<typeof HeldNodeSchema>>;
export type HeldReason = HeldNode["reason"];

/** What a release pass may use: queue depth per role and the depth at which release stops. */
export interface Capacity {
  /** Messages waiting in each role's queue (missing roles count as 0). */
  readonly queueDepth?: Readonly<Record<string, number>>;
  /** New work for a role is released only while its depth (plus what this pass released) is
   * below this. Without a threshold there is no queue-depth gate. */
  readonly threshold?: number;
}

export interface Transition {
  readonly run: DagRun;
  readonly commands: readonly DagCommand[];
  readonly events: readonly DagEvent[];
  readonly held: readonly HeldNode[];
}

export interface RunResult {
  readonly status: RunStatus;
  /** Outputs of COMPLETED and DEGRADED nodes, by node id. */
  readonly outputs: Readonly<Record<string, unknown>>;
  readonly completed: readonly string[];
  readonly degraded: readonly string[];
  readonly failed: readonly { readonly node_id: string; readonly error?: NodeError }[];
  readonly cancelled: readonly string[];
  readonly skipped: readonly string[];
}

/** Node states a node does not leave (until a re-run resets it). */
export const TERMINAL: ReadonlySet<NodeState> = new Set([
  "COMPLETED",
  "FAILED",
  "CANCELLED",
  "DEGRADED",
  "SKIPPED",
]);
/** Node states of a run that is not over yet. */
export const LIVE: ReadonlySet<NodeState> = new Set(["PENDING", "READY", "RUNNING"]);

export const isTerminalNodeState = (state: NodeState): boolean => TERMINAL.has(state);
