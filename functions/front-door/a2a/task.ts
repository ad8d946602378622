import { Role, type Task, TaskState, type TaskStatus } from "@a2a-js/sdk";
import type { ApprovalRequest } from "../../core/approval";
import {
  blockedApprovals,
  type OrchestratorState,
  planApprovals,
} from "../../roles/orchestrator/state";
import type { StartRefusal } from "../stored-run";

/**
 * An A2A task is a workflow run (functions/roles/orchestrator): its state is the run's stored
 * state, read, never kept beside it. The task's id is the one the A2A server gives a new task (a
 * UUID); the run's id is made from it, one to one: `run_` and the UUID with each digit written as
 * a letter (`0`..`9` as `g`..`p`), so the id carries no run of digits an opaque id refuses, and
 * `GET /v1/runs/{id}` shows the same run.
 *
 * | run                                                     | task state       |
 * | ------------------------------------------------------- | ---------------- |
 * | not stored yet (the start is on its way)                 | `submitted`      |
 * | RUNNING, no node started                                 | `submitted`      |
 * | RUNNING, a node BLOCKED on a confirmation or a plan's approval | `input-required` |
 * | RUNNING otherwise                                        | `working`        |
 * | COMPLETED, PARTIAL (its degraded nodes in the metadata)  | `completed`      |
 * | FAILED                                                   | `failed`         |
 * | CANCELLED                                                | `canceled`       |
 * | its start refused (the state null, `workflow.rejected`)  | `rejected`       |
 *
 * An ended run's artifacts are its nodes' outputs, one per node that has one (a data part).
 */

const TASK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DIGIT_LETTERS = "ghijklmnop";

/** The run of a task id; undefined for an id no task of this server has. */
export function runIdOfTask(taskId: string): string | undefined {
  if (!TASK_ID.test(taskId)) return undefined;
  return `run_${taskId.replace(/[0-9]/g, (d) => DIGIT_LETTERS[Number(d)] ?? d)}`;
}

/** The task id of a run an A2A task started; undefined for any other run. */
export function taskIdOfRun(runId: string): string | undefined {
  if (!runId.startsWith("run_")) return undefined;
  const taskId = runId.slice(4).replace(/[g-p]/g, (l) => String(DIGIT_LETTERS.indexOf(l)));
  return runIdOfTask(taskId) === runId ? taskId : undefined;
}

/** What waits for a person (or the caller) in a RUNNING run: a BLOCKED node, a plan. */
export function pendingApprovals(state: OrchestratorState): ApprovalRequest[] {
  if (state.run.status !== "RUNNING") return [];
  return [...blockedApprovals(state), ...planApprovals(state)];
}

/** The task state of a run (see the table above); a run not stored yet is `submitted`. */
export function taskStateOf(state: OrchestratorState | undefined): TaskState {
  if (!state) return TaskState.TASK_STATE_SUBMITTED;
  switch (state.run.status) {
    case "COMPLETED":
    case "PARTIAL":
      return TaskState.TASK_STATE_COMPLETED;
    case "FAILED":
      return TaskState.TASK_STATE_FAILED;
    case "CANCELLED":
      return TaskState.TASK_STATE_CANCELED;
    default:
      if (pendingApprovals(state).length > 0) return TaskState.TASK_STATE_INPUT_REQUIRED;
      return Object.values(state.run.nodes).some(
        (n) => n.state !== "PENDING" && n.state !== "READY",
      )
        ? TaskState.TASK_STATE_WORKING
        : TaskState.TASK_STATE_SUBMITTED;
  }
}

/** Whether the state ends the task (the run ended, or never started). */
export function isTerminal(state: TaskState): boolean {
  return (
    state === TaskState.TASK_STATE_COMPLETED ||
    state === TaskState.TASK_STATE_FAILED ||
    state === TaskState.TASK_STATE_CANCELED ||
    state === TaskState.TASK_STATE_REJECTED
  );
}

/** The status of a task whose run's start was refused: `rejected`, and why. */
export function refusedStatus(taskId: string, refusal: StartRefusal, at: string): TaskStatus {
  const state = TaskState.TASK_STATE_REJECTED;
  const text = `the run's start was refused: ${refusal.code} ${refusal.message}`.trim();
  return { state, timestamp: at, message: agentMessage(taskId, state, at, { text }) };
}

/** The task of a run whose start was refused: rejected, no artifacts, the refusal in its metadata. */
export function refusedTask(taskId: string, refusal: StartRefusal, at: string): Task {
  return {
    id: taskId,
    contextId: taskId,
    status: refusedStatus(taskId, refusal, at),
    artifacts: [],
    history: [],
    metadata: { agentbus: { run_id: runIdOfTask(taskId), refused: { ...refusal } } },
  };
}

/** A message from the agent on a task's status: its text, and what it is about as data. */
function agentMessage(
  taskId: string,
  state: TaskState,
  at: string,
  text: { text: string; data?: Record<string, unknown> },
): TaskStatus["message"] {
  return {
    messageId: `${taskId}:${state}:${at}`,
    contextId: taskId,
    taskId,
    role: Role.ROLE_AGENT,
    parts: [
      {
        content: { $case: "text", value: text.text },
        metadata: undefined,
        filename: "",
        mediaType: "text/plain",
      },
    ],
    metadata: text.data === undefined ? undefined : { agentbus: text.data },
    extensions: [],
    referenceTaskIds: [],
  };
}

/**
 * The task's status: its state, and a message from the agent when it says something: what an
 * input-required task waits for (the question, the step, the deadline), why a run failed.
 */
export function taskStatusOf(
  taskId: string,
  state: OrchestratorState | undefined,
  at: string,
): TaskStatus {
  const taskState = taskStateOf(state);
  const text = state ? statusText(taskState, state) : undefined;
  return {
    state: taskState,
    timestamp: at,
    message: text ? agentMessage(taskId, taskState, at, text) : undefined,
  };
}

function statusText(
  taskState: TaskState,
  state: OrchestratorState,
): { text: string; data?: Record<string, unknown> } | undefined {
  if (taskState === TaskState.TASK_STATE_INPUT_REQUIRED) {
    const [pending] = pendingApprovals(state);
    if (!pending) return undefined;
    const question = (pending.input as { question?: unknown } | undefined)?.question;
    return {
      text: `${typeof question === "string" ? question : pending.action}: answer approve or reject`,
      data: {
        step: pending.step,
        action: pending.action,
        input: pending.input,
        deadline: pending.deadline,
      },
    };
  }
  if (taskState === TaskState.TASK_STATE_FAILED) {
    const failed = Object.entries(state.run.nodes).filter(([, n]) => n.error);
    const why = failed.map(([id, n]) => `${id}: ${n.error?.code} ${n.error?.message ?? ""}`.trim());
    return { text: `the run failed${why.length > 0 ? ` (${why.join("; ")})` : ""}` };
  }
  return undefined;
}

/** The task of a run: its status, its artifacts once it ended, the run's id and status. */
export function taskOfRun(taskId: string, state: OrchestratorState | undefined, at: string): Task {
  const status = taskStatusOf(taskId, state, at);
  return {
    id: taskId,
    contextId: taskId,
    status,
    artifacts: state && isTerminal(status.state) ? artifactsOf(state) : [],
    history: [],
    metadata: {
      agentbus: {
        run_id: runIdOfTask(taskId),
        ...(state ? { run_status: state.run.status, workflow: state.run.workflow } : {}),
      },
    },
  };
}

/** An ended run's artifacts: each node's output, named by the node. */
export function artifactsOf(state: OrchestratorState): Task["artifacts"] {
  return Object.entries(state.run.nodes).flatMap(([id, node]) =>
    node.output === undefined
      ? []
      : [
          {
            artifactId: id,
            name: id,
            description: `the output of node ${id}`,
            parts: [
              {
                content: { $case: "data" as const, value: node.output },
                metadata: undefined,
                filename: "",
                mediaType: "application/json",
              },
            ],
            metadata: undefined,
            extensions: [],
          },
        ],
  );
}
