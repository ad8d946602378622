import * as z from "../../../schemas/zod";
import { Identifier, MAX_MAP_ITEMS } from "./definition";

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

export const ITEM_STATES = ["PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"] as const;

/** One item of a RUNNING map node: its own assignment (attempt, generation) and outcome. */
export const MapItemRunSchema = z.object({
  state: z.enum(ITEM_STATES),
  attempt: z.int().check(z.nonnegative()),
  assigned_generation: z.optional(z.int().check(z.nonnegative())),
  output: z.optional(z.unknown()),
  error: z.optional(NodeErrorSchema),
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
  /** The items of a RUNNING map node, in list order (dropped when the node ends: its output
   * holds their results). */
  items: z.optional(z.array(MapItemRunSchema).check(z.maxLength(MAX_MAP_ITEMS))),
  /** Under join "quorum" or "first-wins": the upstreams whose outputs make the node's input. */
  joined: z.optional(z.array(Identifier)),
});

/** A loop's progress, by the id of its last node: the round running, and how it ended. */
export const LoopRunSchema = z.object({
  round: z.int().check(z.positive()),
  /** "condition": `until` held; "max_rounds": the last round ended without it. */
  ended: z.optional(z.enum(["condition", "max_rounds"])),
  /** The outputs of the body's nodes in the round before (what the next round works from). */
  previous: z.optional(z.record(Identifier, z.unknown())),
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
  /** The loops that ran a round again or ended, by their last node. */
  loops: z.optional(z.record(Identifier, LoopRunSchema)),
});

export type NodeState = z.output<typeof NodeStateSchema>;
export type RunStatus = z.output<typeof RunStatusSchema>;
export type NodeError = z.output<typeof NodeErrorSchema>;
export type NodeRun = z.output<typeof NodeRunSchema>;
export type DagRun = z.output<typeof DagRunSchema>;
export type MapItemRun = z.output<typeof MapItemRunSchema>;
export type LoopRun = z.output<typeof LoopRunSchema>;

/** A map item's assignment: which item, of how many, and its value from the list. */
export interface ItemRef {
  readonly index: number;
  readonly count: number;
  readonly value: unknown;
}

/** What an assignment inside a loop's body gets from round 2 on. */
export interface LoopRef {
  /** The loop's last node (the loop's id). */
  readonly exit: string;
  readonly round: number;
  /** The body's outputs of the round before, by node id. */
  readonly previous: Readonly<Record<string, unknown>>;
}

/** How a child run ended, as its run's result says (`RunResult` of the child). */
export interface ChildEnd {
  readonly status: "COMPLETED" | "PARTIAL" | "FAILED" | "CANCELLED";
  readonly outputs?: Readonly<Record<string, unknown>>;
  /** Why a child that never ran was refused (its workflow unknown, its plan invalid, ...): the
   * node fails with this error instead of `dag.child_failed`. */
  readonly error?: NodeError;
}

/** What a child run runs: a workflow by name (and version), or a plan an upstream produced. */
export type ChildWorkflowRef =
  | { readonly name: string; readonly version?: number }
  | { readonly plan: unknown };

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
      /** Set on each item of a map node: one assignment per item. */
      readonly item?: ItemRef;
      /** Set inside a loop's body from round 2 on. */
      readonly loop?: LoopRef;
      /** Set when the same assignment is sent again (its lease ran out). */
      readonly redelivered?: true;
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
      /** The map item whose assignment it is. */
      readonly item?: number;
    }
  | {
      /** A wait node waits: for a timer (`until`, or `after_seconds` from now), or for the
       * signal `signal` with that time as its deadline. The orchestrator reports the time with
       * `onWaitTimer` and a signal with `onSignal`. */
      readonly type: "wait.start";
      readonly run_id: string;
      readonly node_id: string;
      readonly attempt: number;
      readonly generation: number;
      readonly until?: string;
      readonly after_seconds?: number;
      readonly signal?: string;
    }
  | {
      /** Start the child run `child_run_id` (a start for a child run that exists changes
       * nothing); its end comes back with `onChildEnded`. */
      readonly type: "child.start";
      readonly run_id: string;
      readonly node_id: string;
      readonly attempt: number;
      readonly generation: number;
      readonly child_run_id: string;
      readonly workflow: ChildWorkflowRef;
      readonly input: unknown;
    }
  | {
      /** Cancel the child run of a node whose assignment no longer counts. */
      readonly type: "child.cancel";
      readonly run_id: string;
      readonly node_id: string;
      readonly attempt: number;
      readonly generation: number;
      readonly child_run_id: string;
      readonly reason: NodeCancelReason;
    };

/** Why an assignment no longer counts (`node.cancel`). */
export type NodeCancelReason =
  | "rerun"
  | "run_cancelled"
  | "reset"
  | "resolved"
  /** Another upstream of a first-wins join won. */
  | "first_wins"
  /** Its map node failed: more items failed than it tolerates. */
  | "map_failed";

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
  | {
      readonly type: "node.skipped";
      readonly node_id: string;
      /** Set when a first-wins join dropped the node: `winner` released the join. */
      readonly reason?: "first_wins";
      readonly winner?: string;
    }
  | {
      readonly type: "map.started";
      readonly node_id: string;
      readonly generation: number;
      readonly items: number;
    }
  | {
      readonly type: "item.released";
      readonly node_id: string;
      readonly item: number;
      readonly attempt: number;
      readonly generation: number;
    }
  | {
      readonly type: "item.completed" | "item.failed" | "item.cancelled";
      readonly node_id: string;
      readonly item: number;
      readonly generation: number;
    }
  | {
      readonly type: "wait.started";
      readonly node_id: string;
      readonly generation: number;
      readonly until?: string;
      readonly after_seconds?: number;
      readonly signal?: string;
    }
  | {
      /** A signal found no node waiting for its key. */
      readonly type: "signal.unmatched";
      readonly signal: string;
    }
  | {
      readonly type: "child.started";
      readonly node_id: string;
      readonly generation: number;
      readonly child_run_id: string;
    }
  | {
      /** The loop's body runs again: `node_id` is its first node, `exit` its last. */
      readonly type: "loop.round";
      readonly node_id: string;
      readonly exit: string;
      readonly round: number;
      readonly generation: number;
    }
  | {
      readonly type: "loop.ended";
      readonly exit: string;
      readonly rounds: number;
      readonly reason: "condition" | "max_rounds";
    }
  | {
      readonly type: "delivery.ignored";
      readonly node_id: string;
      /** The map item the delivery was for. */
      readonly item?: number;
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
  "map.started",
  "item.released",
  "item.completed",
  "item.failed",
  "item.cancelled",
  "wait.started",
  "signal.unmatched",
  "child.started",
  "loop.round",
  "loop.ended",
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
