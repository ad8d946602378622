import { type ListTasksRequest, type ListTasksResponse, type Task, TaskState } from "@a2a-js/sdk";
import { RequestMalformedError, UnsupportedOperationError } from "@a2a-js/sdk/errors";
import { tenantOf } from "../../../schemas";
import { RUN_STATUSES, type RunStatus } from "../../core/dag/run";
import type { StateReader } from "../../core/ports";
import type { OrchestratorState } from "../../roles/orchestrator/state";
import {
  DEFAULT_RUN_PAGE,
  type ListedRun,
  listRuns,
  positionOfCursor,
  RunCursorError,
  type RunListQuery,
  runCursor,
  type TenantRunIndex,
  workflowNamesOf,
} from "../run-list";
import { DAG_RUN } from "../runs-in-flight";
import type { FrontDoorWorkflows } from "../workflows";
import { runIdOfTask, taskIdOfRun, taskOfRun, taskStateOf } from "./task";

/**
 * A2A's `ListTasks` for one offered agent: the caller's tenant's tasks of the agent's workflow,
 * newest first, each mapped as `GetTask` maps its run (./task.ts), from the list `GET /v1/runs`
 * reads (../run-list.ts: the by-tenant-status index, then the runs' states). A task is a run an
 * A2A message started (its id made from the task's), so the runs the front door or an operator
 * started are not listed.
 *
 * - `status`: a task state is the run statuses it comes from (`completed`: COMPLETED and PARTIAL;
 *   `submitted`, `working`, `input-required`: RUNNING, told apart by the state read), so the index
 *   reads only those partitions; `rejected` (a refused start has no listed state) lists none.
 * - `contextId`: a task's context is its own id, so it names one task: that run is read alone.
 * - `pageToken`: the `GET /v1/runs` cursor; one that is not, or another tenant's, is invalid
 *   params. `pageSize` 1 to 100 (the SDK checks it), 50 without.
 * - `includeArtifacts`: an ended task's artifacts only when asked; `historyLength`: a task keeps
 *   no history here (the run's events are its history), so every length gives none.
 * - `statusTimestampAfter` is refused: a task's status time is when it is read (GetTask's too),
 *   the run keeps no time of its last change to filter by.
 * - `totalSize` is the page's count: counting every task would read every run the tenant has.
 */

/** What a list reads with: the caller's tenant, the agent's workflow, the index and the states. */
export interface TaskListPorts {
  readonly tenant: string;
  /** The workflow the agent's messages start (its name or alias). */
  readonly workflow: string;
  readonly workflows?: FrontDoorWorkflows;
  readonly runIndex?: TenantRunIndex;
  readonly states: StateReader;
  /** The time the tasks are read (their status timestamps). */
  readonly at: string;
}

/** The run statuses each task state comes from (./task.ts `taskStateOf`). */
const RUN_STATUSES_OF: Readonly<Partial<Record<TaskState, readonly RunStatus[]>>> = {
  [TaskState.TASK_STATE_SUBMITTED]: ["RUNNING"],
  [TaskState.TASK_STATE_WORKING]: ["RUNNING"],
  [TaskState.TASK_STATE_INPUT_REQUIRED]: ["RUNNING"],
  [TaskState.TASK_STATE_COMPLETED]: ["COMPLETED", "PARTIAL"],
  [TaskState.TASK_STATE_FAILED]: ["FAILED"],
  [TaskState.TASK_STATE_CANCELED]: ["CANCELLED"],
};

/** One page of the caller's tasks of the agent (see top). */
export async function listTasks(
  ports: TaskListPorts,
  params: ListTasksRequest,
): Promise<ListTasksResponse> {
  const { runIndex } = ports;
  if (!runIndex) throw new UnsupportedOperationError("listing tasks is not offered here");
  if (params.statusTimestampAfter)
    throw new UnsupportedOperationError(
      "statusTimestampAfter is not supported: a task's status time is when it is read",
    );
  const pageSize = params.pageSize ?? DEFAULT_RUN_PAGE;
  const includeArtifacts = params.includeArtifacts === true;
  const show = (run: ListedRun) => taskOf(ports, run, includeArtifacts);
  const query = taskQueryOf(ports, params, pageSize);
  const page = params.contextId
    ? { runs: (await taskByContext(ports, params.contextId, query)).map(show) }
    : await listRuns({ runIndex, states: ports.states }, ports.tenant, query, show);
  const tasks = [...page.runs];
  return {
    tasks,
    nextPageToken: "next" in page && page.next ? runCursor(ports.tenant, page.next) : "",
    pageSize,
    totalSize: tasks.length,
  };
}

/** The list query of a `ListTasks`: its statuses, the agent's workflow, its page. */
function taskQueryOf(
  ports: TaskListPorts,
  params: ListTasksRequest,
  pageSize: number,
): RunListQuery {
  const state = params.status ?? TaskState.TASK_STATE_UNSPECIFIED;
  const statuses =
    state === TaskState.TASK_STATE_UNSPECIFIED ? RUN_STATUSES : (RUN_STATUSES_OF[state] ?? []);
  const names = workflowNamesOf(ports.workflow, ports.workflows);
  const keep = (runId: string, run: OrchestratorState) =>
    taskIdOfRun(runId) !== undefined &&
    names.has(run.run.workflow.name) &&
    (state === TaskState.TASK_STATE_UNSPECIFIED || taskStateOf(run) === state);
  let after: RunListQuery["after"];
  try {
    if (params.pageToken) after = positionOfCursor(params.pageToken, ports.tenant);
  } catch (error) {
    if (error instanceof RunCursorError) throw new RequestMalformedError(error.message);
    throw error;
  }
  return { statuses, keep, limit: pageSize, ...(after ? { after } : {}) };
}

/** The one task a context names (its own id), if it is the caller's and on the list. */
async function taskByContext(
  ports: TaskListPorts,
  contextId: string,
  query: RunListQuery,
): Promise<ListedRun[]> {
  const runId = runIdOfTask(contextId);
  if (!runId || query.statuses.length === 0) return [];
  const [stored] = await ports.states.loadStates([{ type: DAG_RUN, id: runId }]);
  const state = stored?.data as OrchestratorState | null | undefined;
  const listed =
    state &&
    tenantOf(state) === ports.tenant &&
    query.statuses.includes(state.run.status) &&
    (query.keep?.(runId, state) ?? true);
  return listed ? [{ runId, listedAt: stored?.listing?.listedAt ?? "", state }] : [];
}

function taskOf(ports: TaskListPorts, run: ListedRun, includeArtifacts: boolean): Task {
  const taskId = taskIdOfRun(run.runId) ?? run.runId;
  const task = taskOfRun(taskId, run.state, ports.at);
  return includeArtifacts ? task : { ...task, artifacts: [] };
}
