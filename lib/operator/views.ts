/**
 * What the operator tools show, as plain data: the trace of a task, a workflow run, the dead
 * letters, the groups' queues and what waits for a person. The readers in this folder build these
 * views from the stack (DynamoDB Query/GetItem/BatchGetItem, SQS and CloudWatch reads); the CLI
 * prints them and the console page renders them. Nothing here calls AWS.
 */

import type { Feature } from "../../functions/roles/features";
import type { ListedWorkflow, ShownWorkflow } from "../../functions/roles/orchestrator/catalog";

/** What one consumer group did with one event. */
export type OutcomeKind = "applied" | "discarded" | "rejected" | "retrying" | "dead-lettered";

export interface GroupOutcome {
  readonly group: string;
  readonly outcome: OutcomeKind;
  /** Discard or reject reason (`expired`, `superseded`, ...) or the dead-letter reason. */
  readonly reason?: string;
  /** Last error of a retrying or dead-lettered event. */
  readonly error?: { readonly code: string; readonly message: string };
  /** How many times the queue had handed the message out (retrying / dead-lettered). */
  readonly attempts?: number;
  /** When the outcome was recorded (ISO 8601). */
  readonly at: string;
  /** True when the event reached the group through gap repair from the event store. */
  readonly repaired?: boolean;
  /**
   * Deliveries the group recognised as duplicates, where known: duplicates cost no write, so a
   * deployed stack does not record them; the local runtime observes them.
   */
  readonly duplicates?: number;
}

/** An external action's idempotency record, as the trace shows it beside its event. */
export interface SideEffectView {
  readonly key: string;
  readonly state: "pending" | "succeeded" | "failed" | "unknown";
  readonly attempts: number;
  readonly updatedAt: string;
  /** The task the key acts for, where the record names it. */
  readonly taskId?: string;
  /** The tenant of that task (its first event's), where a list for one tenant read it. */
  readonly tenant?: string;
}

/** One message of a trace: a stored stream event or an unsequenced message a group consumed. */
export interface TraceEvent {
  readonly eventId: string;
  readonly eventType: string;
  readonly aggregate: { readonly type: string; readonly id: string };
  /** Stream version; 0 for an unsequenced message (client message, command, sweeper message). */
  readonly version: number;
  readonly producer: string;
  readonly occurredAt: string;
  readonly correlationId: string;
  readonly taskId: string;
  readonly causationId?: string;
  /** The tenant the event belongs to, when it names one (events from before tenants do not). */
  readonly tenantId?: string;
  /** The schema version the stored event was written in, when older than its type's newest. */
  readonly storedSchemaVersion?: number;
  /**
   * For an agent's step command: what the step before it did (a model turn with its
   * `model_run_id` and the tools it asked for, or a tool call with its `tool_call_id`, tool and
   * outcome), seed 000 §15.
   */
  readonly agentStep?: string;
  /** The agent run that produced it (the envelope's `run_id`), and the run that one resumed. */
  readonly runId?: string;
  readonly resumedFrom?: string;
}

/** A workflow run in a trace: its parent run (for a child run) and the child runs it started. */
export interface TraceRun {
  readonly runId: string;
  readonly parentRunId?: string;
  readonly childRunIds: readonly string[];
}

export interface TraceNode {
  readonly event: TraceEvent;
  readonly outcomes: readonly GroupOutcome[];
  readonly sideEffects: readonly SideEffectView[];
  /** Dead-letter queues (by group) that hold this event now. */
  readonly deadLetters: readonly { readonly group: string; readonly queue: string }[];
  readonly children: readonly TraceNode[];
}

export interface TraceView {
  /** What was asked for: an event, task or correlation id. */
  readonly query: string;
  readonly correlationIds: readonly string[];
  readonly taskIds: readonly string[];
  /** The W3C trace ids its events continue (one, unless a producer began a second). */
  readonly traceIds?: readonly string[];
  /** The workflow runs its events belong to, each with its parent run and its child runs. */
  readonly runs?: readonly TraceRun[];
  /** Messages whose cause is not part of the trace (the root client message or command first). */
  readonly roots: readonly TraceNode[];
  /**
   * Messages of other traces this one made moot: a group discarded them as superseded (or
   * invalidated) after this trace began, on a stream this trace wrote to.
   */
  readonly related?: readonly TraceNode[];
}

/** One node of a workflow run, with the definition's role and what the run recorded of it. */
/** What carries a node out: a role (a task), a role per item of a list, a wait, a child run. */
export type NodeKind = "task" | "map" | "wait" | "child";

export interface RunNodeView {
  readonly id: string;
  readonly role: string;
  /** What kind of node it is (a task when absent). */
  readonly kind?: NodeKind;
  readonly state: string;
  readonly attempt: number;
  /** When the node was (last) assigned and when it ended (ISO 8601), from the run's timeline. */
  readonly startedAt?: string;
  readonly endedAt?: string;
  readonly durationMs?: number;
  readonly error?: { readonly code: string; readonly message: string };
  /** A RUNNING node: whether its agent has started on it (acknowledged), or it still waits in
   * the agent's queue; and how many times its assignment was sent again after its lease ran out. */
  readonly lease?: { readonly started: boolean; readonly redeliveries: number };
  /**
   * A RUNNING node as its agent reported it (seed 001 §2): QUEUED until the agent acknowledges
   * the assignment, RUNNING from its `node.started` (`since`), BLOCKED while it waits for an
   * external confirmation (`question`, until `confirmBy`).
   */
  readonly agent?: {
    readonly state: "QUEUED" | "RUNNING" | "BLOCKED";
    readonly since?: string;
    readonly confirmBy?: string;
    readonly question?: string;
  };
  /**
   * What the node was given, as a step role reads it (the run's input with each upstream output
   * taken under its node id), once it was released; and its output, once it has one.
   */
  readonly input?: Readonly<Record<string, unknown>>;
  readonly output?: unknown;
}

export interface RunEdgeView {
  readonly from: string;
  readonly to: string;
  /** A conditional edge's condition in words (`verdict = "pass"`), absent for plain edges. */
  readonly condition?: string;
  /** A loop's way back (its condition says until when, and how many rounds at most). */
  readonly loop?: boolean;
}

export interface RunView {
  readonly runId: string;
  readonly workflow: { readonly name: string; readonly version: number };
  readonly status: string;
  readonly generation: number;
  /** The run's input (what its start request gave). */
  readonly input?: unknown;
  readonly correlationId?: string;
  readonly taskId?: string;
  /** The run that started this one, for a child run. */
  readonly parentRunId?: string;
  /** The child runs its child nodes started (each node's current one). */
  readonly childRuns?: readonly { readonly nodeId: string; readonly runId: string }[];
  readonly nodes: readonly RunNodeView[];
  readonly edges: readonly RunEdgeView[];
  readonly timeline: readonly {
    readonly at: string;
    readonly event: string;
    readonly nodeId?: string;
    readonly generation?: number;
    readonly cause: string;
  }[];
}

/** One message in a dead-letter queue. */
export interface DeadLetterView {
  readonly group: string;
  /** `queue` (the group's consumer DLQ) or `buffer` (the dispatcher's DLQ). */
  readonly queue: "queue" | "buffer";
  readonly messageId: string;
  readonly eventId?: string;
  readonly eventType?: string;
  /** The FIFO message group: the order key (aggregate) the message belongs to. */
  readonly orderKey?: string;
  readonly code: string;
  readonly reason: string;
  readonly receiveCount?: number;
  /** When the message entered the dead-letter queue (ISO 8601). */
  readonly sentAt?: string;
  readonly correlationId?: string;
  readonly taskId?: string;
  /** The tenant the envelope names (absent: the default tenant, or a body that is no envelope). */
  readonly tenantId?: string;
}

/** One consumer group's queues. Undefined numbers are not known (no CloudWatch data). */
export interface GroupStatusView {
  readonly group: string;
  readonly depth: number;
  readonly inFlight: number;
  readonly oldestAgeSeconds?: number;
  readonly deadLetters: number;
  readonly bufferDepth?: number;
  readonly bufferDeadLetters?: number;
}

/** A state item listed by kind and status: a run, a conversation, a task. */
export interface ItemSummary {
  readonly kind: "run" | "conversation" | "task";
  readonly id: string;
  readonly status: string;
  readonly updatedAt: string;
  /** Short text for lists: a run's workflow, a conversation's last reply status, ... */
  readonly label?: string;
  /** When the state was first summarized: the lists' order (absent from a legacy index). */
  readonly listedAt?: string;
  /** In a list of what waits for a person: since when it has waited for that. */
  readonly waitingSince?: string;
  /** The tenant whose state it is (the default tenant's when its role records none). */
  readonly tenant?: string;
}

/** What waits for a person. */
export interface WaitingView {
  readonly heldReplies: readonly ItemSummary[];
  readonly unknownSideEffects: readonly SideEffectView[];
  /** Agent runs BLOCKED until a person approves or rejects a tool call. */
  readonly awaitingApproval: readonly ItemSummary[];
  readonly needsHuman: readonly ItemSummary[];
  readonly failedRuns: readonly ItemSummary[];
  /** Conversations whose newest turn was handed off to a person after a step failed for good. */
  readonly handedOff: readonly ItemSummary[];
}

export interface StatusView {
  /**
   * What the stack serves of the reference applications (functions/roles/features.ts): the runs
   * (and the sweeper, the failed nodes) are its with `runs`, the held replies and the
   * conversations handed off with `conversations`; what it does not serve is neither read nor
   * shown.
   */
  readonly features: readonly Feature[];
  readonly groups: readonly GroupStatusView[];
  /** Age of the newest stream record the relay read, in ms (CloudWatch IteratorAge). */
  readonly relayIteratorAgeMs?: number;
  readonly relayFailures: number;
  /**
   * When the lease sweeper last completed a sweep (CloudWatch, the last hour); absent when none
   * did or there is no CloudWatch data. A sweeper that fails leaves it behind.
   */
  readonly lastSweepAt?: string;
  readonly runsByStatus: Readonly<Record<string, number>>;
  readonly counts: {
    readonly heldReplies: number;
    readonly unknownSideEffects: number;
    readonly awaitingApproval: number;
    readonly needsHumanNodes: number;
    readonly failedNodes: number;
    readonly handedOff: number;
  };
}

/** A reply held for a person's review, with its draft. */
export interface HeldReplyView {
  readonly taskId: string;
  readonly conversationId: string;
  /** Why it was held. */
  readonly reason?: string;
  readonly draft?: string;
}

/**
 * An agent run that waits for a person, as its journal says (functions/core/agent/agent.ts):
 * BLOCKED on the approval of a tool call, or NEEDS_HUMAN on a write whose outcome could not be
 * learnt (`outcome`) or on an answer it could not give (`answer`).
 */
export interface AgentWaitView {
  readonly runId: string;
  /** The agent's group, e.g. `refund-review`. */
  readonly agent: string;
  readonly taskId: string;
  readonly status: string;
  readonly kind: "approval" | "outcome" | "answer" | "task";
  /** The tool call it waits on, its tool and the input the model gave it. */
  readonly toolCallId?: string;
  readonly tool?: string;
  readonly input?: unknown;
  /** A write's idempotency key (an unknown outcome). */
  readonly key?: string;
  readonly since: string;
  /** When an approval's deadline passes, or the outside work (`task`) is polled next. */
  readonly deadline?: string;
  /** For `task`: the outside system's work the call started (an MCP task), as last polled. */
  readonly remoteTask?: { readonly id: string; readonly status: string };
  /** An answer of the agent's shape (kind `answer`), when its answer schema is known. */
  readonly answerExample?: Readonly<Record<string, unknown>>;
  readonly reason: string;
}

export interface OverviewView {
  readonly runs: readonly ItemSummary[];
  readonly conversations: readonly ItemSummary[];
  readonly tasks: readonly ItemSummary[];
  readonly waiting: WaitingView;
  readonly status: StatusView;
  /** The held replies themselves (task, draft), where the console offers approve and reject. */
  readonly heldDrafts?: readonly HeldReplyView[];
  /** What the listed agent runs wait for, read from their journals. */
  readonly agentWaits?: readonly AgentWaitView[];
}

/** A workflow a start may name, and where it comes from. */
/** A workflow as the lists show it: name, scope (and tenant), versions (the catalog's). */
export type WorkflowSummary = ListedWorkflow;

/** One version of a workflow: its definition (graph, declared input) and its other versions. */
export type WorkflowView = ShownWorkflow;

/** What the console page reads; implemented over the stack by the readers in this folder. */
/**
 * Which states of a list: one tenant's, of one status, listed (a wait list: waiting) since and
 * before a time (ISO 8601 in UTC, as `listed_at`; `since` included, `before` not).
 */
export interface ListFilter {
  readonly tenant?: string | undefined;
  readonly status?: string | undefined;
  readonly since?: string | undefined;
  readonly before?: string | undefined;
}

/** One page of a list, and the `page` that continues it (absent on the last page). */
export interface ItemPage {
  readonly rows: readonly ItemSummary[];
  readonly next?: string;
}

export interface OpsSource {
  /**
   * The stack's features (functions/roles/features.ts): the console shows the runs, conversations
   * and tasks of those it has only, and says what it leaves out.
   */
  readonly features: readonly Feature[];
  /** With `tenant`, its runs, conversations, tasks and waits only (the queues are every tenant's). */
  overview(tenant?: string): Promise<OverviewView>;
  /**
   * A page of 50 runs, newest started first, as `filter` names them, after the page `after`
   * ended (a ListPageError when `after` is not a page's end).
   */
  runList(filter: ListFilter, after?: string): Promise<ItemPage>;
  /** Undefined when nothing is known of the id. */
  trace(id: string): Promise<TraceView | undefined>;
  run(runId: string): Promise<RunView | undefined>;
  /** Every workflow a start may name; with `tenant`, of that tenant's own only (else every tenant's). */
  workflows(tenant?: string): Promise<readonly WorkflowSummary[]>;
  /** A workflow as a start of `tenant` finds it, at `version` or its newest; undefined if none. */
  workflow(
    name: string,
    options?: { readonly tenant?: string; readonly version?: number },
  ): Promise<WorkflowView | undefined>;
  /** With `tenant`, the dead letters whose envelope is that tenant's only. */
  deadLetters(tenant?: string): Promise<readonly DeadLetterView[]>;
}
