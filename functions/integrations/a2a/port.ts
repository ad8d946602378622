import type { A2aFile } from "./files";

/**
 * Another system's agent, as a role calls it over the Agent2Agent protocol (A2A v1.0): its agent
 * card, `SendMessage` (streamed, so the task's id is known as soon as the agent made it),
 * `GetTask`, and `ListTasks` by context. The adapter (./sdk-agent.ts) speaks it with the official
 * SDK's client; the twin (./memory.ts) is an agent in memory with the same error contract.
 *
 * What `send` throws says what may have happened at the agent:
 * - TransientError `a2a.unavailable` / `a2a.throttled`: nothing reached it (connection refused,
 *   429, 401: the token is read again);
 * - UnknownOutcomeError `a2a.timeout` / `a2a.dropped`: the message may have reached it and been
 *   acted on (no answer in time, a connection dropped after sending, a 5xx); its `details.taskId`
 *   is the remote task's id when the agent had already said it;
 * - PermanentError `a2a.protocol_error` / `a2a.refused`: it answered with a JSON-RPC error, or
 *   refused the request (a 4xx other than 401, 408, 429). Nothing was done.
 * A task that ended `failed` or `rejected` is the agent's answer, returned as a result.
 */

/** What the card says of the agent, as the hub uses it. */
export interface A2aCard {
  readonly name: string;
  readonly description: string;
  readonly skills: readonly A2aSkill[];
  /** `sha256:<hex>` of the card's name, description and skills (what `pin` names). */
  readonly hash: string;
}

export interface A2aSkill {
  readonly id: string;
  readonly name: string;
  readonly description: string;
}

/** One message to the agent: text, data, or both. */
export interface A2aOutgoing {
  /** The message's id: the step's idempotency key for a write (an agent may dedupe by it). */
  readonly messageId: string;
  /** The context the task is made in: derived from the key, so the task can be found by it. */
  readonly contextId: string;
  readonly text?: string;
  readonly data?: Readonly<Record<string, unknown>>;
  readonly metadata: Readonly<Record<string, unknown>>;
  /** How long to wait for the task to end (or stop for input) before the outcome is unknown. */
  readonly timeoutMs: number;
}

/** The states of an A2A task, as the protocol names them. */
export type A2aTaskState =
  | "submitted"
  | "working"
  | "completed"
  | "failed"
  | "canceled"
  | "rejected"
  | "input-required"
  | "auth-required"
  | "unknown";

/** A remote task as it stands (or the agent's direct answer: a message, as `completed`). */
export interface A2aTaskView {
  /** Absent when the agent answered with a message and made no task. */
  readonly taskId?: string;
  readonly state: A2aTaskState;
  /** The artifacts' text parts (the status message's when there are none), joined by newlines. */
  readonly text: string;
  /** The artifacts' data parts, when there are any: the first, or all of them as a list. */
  readonly data?: unknown;
  /** The artifacts' file parts (the status message's when there are no artifacts), if any. */
  readonly files?: readonly A2aFile[];
}

export interface A2aAgentPort {
  /** The agent card, read once and kept (a failed read is tried again). */
  card(): Promise<A2aCard>;
  /** Sends a message and follows its task until it ends or stops for input (see above). */
  send(message: A2aOutgoing): Promise<A2aTaskView>;
  /** The task by its id; undefined when the agent does not know it. */
  getTask(taskId: string, timeoutMs: number): Promise<A2aTaskView | undefined>;
  /** The task made in a context; undefined when there is none, or the agent cannot list. */
  findTask(contextId: string, timeoutMs: number): Promise<A2aTaskView | undefined>;
}

/** States a task does not leave. */
export const FINAL_STATES: ReadonlySet<A2aTaskState> = new Set([
  "completed",
  "failed",
  "canceled",
  "rejected",
]);

/** States a task waits in for the caller (it is not working, and not ended). */
export const INTERRUPTED_STATES: ReadonlySet<A2aTaskState> = new Set([
  "input-required",
  "auth-required",
]);
