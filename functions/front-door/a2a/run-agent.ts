import {
  type AgentCard,
  type CancelTaskRequest,
  type Message,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import {
  type A2ARequestHandler,
  AgentEvent,
  type AgentExecutionEvent,
  type AgentExecutor,
  DefaultExecutionEventBusManager,
  DefaultRequestHandler,
  type ExecutionEventBus,
  type PushNotificationSender,
  type PushNotificationStore,
  type RequestContext,
  type TaskStore,
} from "@a2a-js/sdk/server";
import type { Envelope, EventRegistry } from "../../../schemas";
import { approvalAnswered } from "../../core/approval-audit";
import type { Clock, EventPublisher, EventStore, IdSource } from "../../core/ports";
import type { StepA2a } from "../../core/steps";
import type { OrchestratorState } from "../../roles/orchestrator/state";
import type { AdmissionPorts, AdmissionSettings } from "../admission";
import { clientEnvelope, DAG_RUN } from "../api";
import type { Caller } from "../identity";
import type { TenantRunIndex } from "../run-list";
import type { CountedRun } from "../runs-in-flight";
import { loadStoredRun, type RunStreams, type StartRefusal } from "../stored-run";
import type { FrontDoorWorkflows } from "../workflows";
import { listTasks } from "./list-tasks";
import { runPushStore, type TaskPushConfigs } from "./push-configs";
import {
  artifactsOf,
  isTerminal,
  pendingApprovals,
  refusedStatus,
  refusedTask,
  runIdOfTask,
  taskOfRun,
  taskStatusOf,
} from "./task";

/**
 * An offered role as an A2A agent (@a2a-js/sdk's `DefaultRequestHandler`, with an executor and a
 * task store of AgentBus's own): a message starts a run of the role's workflow, and the task is
 * the run, read from its stored state (./task.ts). Nothing is kept in the function's memory: a
 * stream, a `GetTask`, a cancel or an answer reaches whichever instance takes it, as the run's
 * state is in the state table.
 *
 * - `SendMessage` / `SendStreamingMessage`: a new task puts `workflow.start.requested` on the
 *   commands bus (the run `run_<task id's letters>`, the caller's tenant and user), then follows
 *   the run's state until it ends or waits for an answer (`input-required`), sending each change;
 * - a message on an `input-required` task answers it: `approve` (or `yes`, `confirm`) or `reject`
 *   (`no`, `refuse`) in its text, or a data part `{"decision": "approve" | "reject", "reason"?}`,
 *   put as the `workflow.confirm.requested` an operator's `agentbus approve` sends; an operator's
 *   answer moves the task on the same way;
 * - `GetTask` reads the run; `CancelTask` puts `workflow.cancel.requested` and waits (at most
 *   `maxSeconds`) for the run to end; `SubscribeToTask` follows the run as a stream does.
 * - `ListTasks` lists the caller's tasks of the agent's workflow, newest first (./list-tasks.ts).
 *
 * Every read checks the run's tenant against the caller's token: another tenant's task is "task
 * not found", as one that does not exist.
 */

export interface A2aPorts {
  readonly store: Pick<EventStore, "load">;
  readonly publisher: EventPublisher;
  readonly registry: EventRegistry;
  readonly ids: IdSource;
  readonly clock: Clock;
  /** Wait `ms`, or less when the client went away. */
  sleep(ms: number): Promise<void>;
  /** Where tasks' push notification configs are kept; absent, the agents offer no push. */
  readonly pushConfigs?: TaskPushConfigs;
  /**
   * The runs' streams (the events table), where the orchestrator's refusal of a start says why;
   * absent, a refused start's task is `rejected` with no reason.
   */
  readonly runEvents?: RunStreams;
  /** What admits a start (../admission.ts), and the workflows a tenant may start. */
  readonly admission: AdmissionPorts & { readonly workflows?: FrontDoorWorkflows };
  /** Each tenant's runs by status (../run-list.ts), for `ListTasks`; absent, it is refused. */
  readonly runIndex?: TenantRunIndex;
}

export interface A2aSettings {
  /** How often a followed run's state is read. */
  readonly pollMs: number;
  /** How long one request follows a run before it answers what it has. */
  readonly maxSeconds: number;
  /** The local stack's allowance of loopback webhooks (./push-configs.ts `pushUrlProblem`). */
  readonly allowLoopbackPush?: boolean;
  /** The tenants' requests per minute and runs in flight, as the front door's (../limits.ts). */
  readonly limits: AdmissionSettings;
}

/** A task admitted (./admit.ts): its id, the run's input and the run counted against its tenant. */
export interface AdmittedTask {
  readonly taskId: string;
  readonly request: Record<string, unknown>;
  readonly run: CountedRun;
  /** Told as the task's start is put: a task whose start never was no longer counts (./serve.ts). */
  readonly starting?: () => void;
}

/** What one request works with: the caller (from the token), the agent, the ports. */
export interface A2aAgentContext {
  readonly caller: Caller;
  readonly role: string;
  readonly offered: StepA2a;
  readonly card: AgentCard;
  readonly ports: A2aPorts;
  readonly settings: A2aSettings;
  /** The task this request's message starts, admitted (./admit.ts); none for other calls. */
  readonly admitted?: AdmittedTask;
}

/** A task's run as stored: none (not the caller's, no such task), its state, or its refusal. */
type LoadedRun =
  | { found: false }
  | { found: true; runId: string; state?: OrchestratorState; refused?: StartRefusal };

/** The run of `taskId` if it is the caller's tenant's (../stored-run.ts); `found` false if not. */
async function loadRun(agent: A2aAgentContext, taskId: string): Promise<LoadedRun> {
  const runId = runIdOfTask(taskId);
  if (!runId) return { found: false };
  const { store, runEvents } = agent.ports;
  const run = await loadStoredRun({ store, streams: runEvents }, runId, agent.caller.tenantId);
  switch (run.kind) {
    case "not_found":
      return { found: false };
    case "refused":
      return { found: true, runId, refused: run.refusal };
    case "run":
      return { found: true, runId, state: run.state };
    case "unstored":
      return { found: true, runId };
  }
}

/** The task of a run found: a refused start's, or the run's. */
function taskOf(agent: A2aAgentContext, taskId: string, run: LoadedRun & { found: true }): Task {
  return run.refused
    ? refusedTask(taskId, run.refused, now(agent))
    : taskOfRun(taskId, run.state, now(agent));
}

const now = (agent: A2aAgentContext) => agent.ports.clock.now().toISOString();

/**
 * The task store over the runs' stored state: a task is read, never written beside its run. The
 * store lives for one request: the SDK saves each task it is about to send and loads it back to
 * send it, so within the request a saved task is what `load` answers (the task as the request
 * published it, not the run as it has moved on since); before any save, the run's state. The task
 * the request admitted is `submitted` from the start: the SDK is handed the message on it.
 */
export function runTaskStore(agent: A2aAgentContext): TaskStore {
  const published = new Map<string, Task>();
  const { admitted } = agent;
  if (admitted) published.set(admitted.taskId, taskOfRun(admitted.taskId, undefined, now(agent)));
  return {
    // The run's stored state is the task; what the SDK would keep besides (the messages of a
    // task's history) is the run's events, in the event store.
    save: async (task) => {
      published.set(task.id, task);
    },
    load: async (taskId) => {
      const saved = published.get(taskId);
      if (saved) return saved;
      const run = await loadRun(agent, taskId);
      return run.found && (run.state || run.refused) ? taskOf(agent, taskId, run) : undefined;
    },
    list: async (params) =>
      listTasks(
        {
          tenant: agent.caller.tenantId,
          workflow: agent.offered.workflow,
          states: agent.ports.admission.states,
          at: now(agent),
          ...(agent.ports.admission.workflows
            ? { workflows: agent.ports.admission.workflows }
            : {}),
          ...(agent.ports.runIndex ? { runIndex: agent.ports.runIndex } : {}),
        },
        params,
      ),
  };
}

/** Put one command about run `runId` on its bus (the caller's tenant and user); the command. */
async function putCommand(
  agent: A2aAgentContext,
  type: string,
  runId: string,
  payload: Record<string, unknown>,
): Promise<Envelope> {
  return putMessage(agent, type, { type: DAG_RUN, id: runId }, payload);
}

/** Put one message of the caller (its tenant and user) on its topic's bus; the message. */
async function putMessage(
  agent: A2aAgentContext,
  type: string,
  aggregate: { readonly type: string; readonly id: string },
  payload: Record<string, unknown>,
): Promise<Envelope> {
  const { ports, caller } = agent;
  const envelope = clientEnvelope(ports, caller, ports.ids.next(), { type, aggregate, payload });
  const topic = ports.registry.find(type)?.topic ?? "commands";
  const failures = await ports.publisher.publish(topic, [envelope]);
  if (failures.length > 0)
    throw new Error(`the bus did not take ${type} (${failures[0]?.code}); send it again`);
  return envelope;
}

/**
 * The caller's answer on the audit topic, as an operator's is (`operator.approval.answered`,
 * functions/core/approval-audit.ts): the task's run and step, the decision, its reason unless
 * the command declares it personal, the command; who answered is the record's tenant and user
 * and its `requested_by`, and it came through the front door.
 */
async function auditAnswer(agent: A2aAgentContext, command: Envelope): Promise<void> {
  const answered = approvalAnswered(command as unknown as Record<string, unknown>);
  if (!answered) return;
  const id = agent.ports.ids.next();
  const record = { type: "operator_action", id: `opact_${id}` };
  const payload = { ...answered, requested_by: requesterOf(agent.caller), via: "front-door" };
  try {
    await putMessage(agent, "operator.approval.answered", record, payload);
  } catch (error) {
    throw new Error(
      `the answer was sent (${command.event_id}), its audit record was not: ${(error as Error).message}`,
    );
  }
}

/** Who answers or cancels, as a command's `requested_by` names them (no spaces, no `@`). */
function requesterOf(caller: Caller): string {
  const who = caller.userId ?? caller.service ?? `a2a:${caller.tenantId}`;
  return who.replace(/[\s@]+/g, "_").slice(0, 128);
}

/** The run's input from a message: a data part's object as it is, else its text as `textInput`. */
export function runInputOf(message: Message, offered: StepA2a): Record<string, unknown> {
  for (const part of message.parts) {
    const value = part.content?.$case === "data" ? part.content.value : undefined;
    if (value !== null && typeof value === "object" && !Array.isArray(value))
      return value as Record<string, unknown>;
  }
  const text = textOf(message);
  if (!text)
    throw new RequestMalformedError("the message has no text and no data part (a JSON object)");
  return { [offered.textInput]: text };
}

function textOf(message: Message): string {
  return message.parts
    .flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : []))
    .join("\n")
    .trim();
}

/** The decision a message on an `input-required` task gives: approve or reject, and why. */
export function decisionOf(message: Message): { verdict: "approve" | "reject"; reason?: string } {
  for (const part of message.parts) {
    const value = part.content?.$case === "data" ? part.content.value : undefined;
    const decision = (value as { decision?: unknown } | undefined)?.decision;
    if (decision === "approve" || decision === "reject") {
      const reason = (value as { reason?: unknown }).reason;
      return { verdict: decision, ...(typeof reason === "string" ? { reason } : {}) };
    }
  }
  const text = textOf(message);
  const verdict = /^(approve[ds]?|yes|confirm(ed)?)\b/i.test(text)
    ? "approve"
    : /^(reject(ed)?|no|refuse[ds]?)\b/i.test(text)
      ? "reject"
      : undefined;
  if (!verdict)
    throw new RequestMalformedError(
      'the task waits for an answer: "approve" or "reject" (text), or a data part {"decision": ...}',
    );
  const reason = text.replace(/^\S+[\s:,.-]*/, "").trim();
  return { verdict, ...(reason ? { reason: reason.slice(0, 1000) } : {}) };
}

/**
 * The task's changes from the run's stored state, read every `pollMs`: a status update at each
 * change of state (an ended run's artifacts first), until the run ends, the task waits for an
 * answer (other than the one `answered`, which the orchestrator has yet to take; with `toTheEnd`,
 * through any), or `maxSeconds` pass.
 */
export async function* followRun(
  agent: A2aAgentContext,
  taskId: string,
  from: { state: TaskState; answered?: string; toTheEnd?: boolean },
): AsyncGenerator<AgentExecutionEvent> {
  const { ports, settings } = agent;
  const until = ports.clock.now().getTime() + settings.maxSeconds * 1000;
  let last = from.state;
  while (ports.clock.now().getTime() < until) {
    const run = await loadRun(agent, taskId);
    const state = run.found ? run.state : undefined;
    const status =
      run.found && run.refused
        ? refusedStatus(taskId, run.refused, now(agent))
        : taskStatusOf(taskId, state, now(agent));
    const pending = state ? pendingApprovals(state)[0]?.step : undefined;
    const waitsOnAnswer = pending !== undefined && pending === from.answered;
    if (status.state !== last && !waitsOnAnswer) {
      if (state && isTerminal(status.state))
        for (const artifact of artifactsOf(state))
          yield AgentEvent.artifactUpdate({
            taskId,
            contextId: taskId,
            artifact,
            append: false,
            lastChunk: true,
            metadata: undefined,
          });
      yield AgentEvent.statusUpdate({ taskId, contextId: taskId, status, metadata: undefined });
      last = status.state;
    }
    const waits = last === TaskState.TASK_STATE_INPUT_REQUIRED && !waitsOnAnswer;
    if (isTerminal(last) || (waits && !from.toTheEnd)) return;
    await ports.sleep(settings.pollMs);
  }
}

/** Starts the run of the task admitted, or answers the approval its task waits for. */
async function startOrAnswer(
  agent: A2aAgentContext,
  context: RequestContext,
): Promise<{ task: Task; answered?: string }> {
  const taskId = context.taskId;
  const runId = runIdOfTask(taskId);
  if (!runId) throw new TaskNotFoundError(`Task not found: ${taskId}`);
  if (agent.admitted?.taskId === taskId) {
    await startRun(agent, agent.admitted);
    return { task: taskOfRun(taskId, undefined, now(agent)) };
  }
  // A new task is started only once admitted (./admit.ts), never past the front door's limits.
  if (!context.task)
    throw new UnsupportedOperationError("the task was not admitted: send it again");
  const run = await loadRun(agent, taskId);
  const pending = run.found && run.state ? pendingApprovals(run.state)[0] : undefined;
  if (!pending)
    throw new UnsupportedOperationError(
      `Task ${taskId} waits for no answer: it is ${TaskState[context.task.status?.state ?? 0]}`,
    );
  const { verdict, reason } = decisionOf(context.userMessage);
  const command = await putCommand(agent, "workflow.confirm.requested", runId, {
    run_id: runId,
    node_id: pending.step,
    answer: verdict === "approve" ? "confirmed" : "refused",
    requested_by: requesterOf(agent.caller),
    ...(reason === undefined ? {} : { note: reason }),
    // The wait this answer was read against: refused if the node waits for another by then.
    waiting_since: pending.since,
  });
  await auditAnswer(agent, command);
  return { task: context.task, answered: pending.step };
}

/**
 * Put the admitted task's start on the bus; a start the bus did not take no longer counts
 * against its tenant's runs in flight (nothing retries it: the caller sends a new message).
 */
async function startRun(agent: A2aAgentContext, admitted: AdmittedTask): Promise<void> {
  const { runId } = admitted.run;
  admitted.starting?.();
  try {
    await putCommand(agent, "workflow.start.requested", runId, {
      run_id: runId,
      workflow_name: agent.offered.workflow,
      request: admitted.request,
    });
  } catch (error) {
    const { runs } = agent.ports.admission;
    await runs.remove(agent.caller.tenantId, [admitted.run]).catch(() => undefined);
    throw error;
  }
}

/** The executor: starts or answers, then sends the run's changes until it ends or waits again. */
export function runExecutor(agent: A2aAgentContext): AgentExecutor {
  return {
    execute: async (context: RequestContext, bus: ExecutionEventBus) => {
      try {
        const { task, answered } = await startOrAnswer(agent, context);
        bus.publish(AgentEvent.task(task));
        const from = {
          state: task.status?.state ?? TaskState.TASK_STATE_SUBMITTED,
          ...(answered ? { answered } : {}),
        };
        for await (const event of followRun(agent, context.taskId, from)) bus.publish(event);
      } finally {
        bus.finished();
      }
    },
    cancelTask: async (taskId: string) => {
      await cancelRun(agent, taskId);
    },
  };
}

/** Put the run's cancel on the bus: the task of a run that ended cannot be cancelled. */
async function cancelRun(agent: A2aAgentContext, taskId: string): Promise<Task> {
  const run = await loadRun(agent, taskId);
  if (!run.found || (!run.state && !run.refused))
    throw new TaskNotFoundError(`Task not found: ${taskId}`);
  const task = taskOf(agent, taskId, run);
  if (task.status?.state === TaskState.TASK_STATE_CANCELED) return task;
  if (isTerminal(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED))
    throw new TaskNotCancelableError(`Task not cancelable: ${taskId} already ended`);
  await putCommand(agent, "workflow.cancel.requested", run.runId, {
    run_id: run.runId,
    requested_by: requesterOf(agent.caller),
    reason: "cancelled by its A2A caller",
  });
  return task;
}

/**
 * The request handler: the SDK's, but a cancel and a subscription work from the run's stored
 * state (the SDK's own look for the task's executor in this process, which a later request never
 * finds).
 */
export function runAgentHandler(agent: A2aAgentContext): A2ARequestHandler {
  const push = pushOf(agent);
  const sdk = new DefaultRequestHandler(
    agent.card,
    runTaskStore(agent),
    runExecutor(agent),
    new DefaultExecutionEventBusManager(),
    push?.store,
    push?.sender,
  );
  return {
    getAgentCard: () => sdk.getAgentCard(),
    getAuthenticatedExtendedAgentCard: (p, c) => sdk.getAuthenticatedExtendedAgentCard(p, c),
    sendMessage: async (p, c) => {
      await checkMessage(agent, p.message);
      return sdk.sendMessage(p, c);
    },
    sendMessageStream: async function* (p, c) {
      await checkMessage(agent, p.message);
      yield* sdk.sendMessageStream(p, c);
    },
    getTask: (p, c) => sdk.getTask(p, c),
    listTasks: (p, c) => sdk.listTasks(p, c),
    createTaskPushNotificationConfig: (p, c) => sdk.createTaskPushNotificationConfig(p, c),
    getTaskPushNotificationConfig: (p, c) => sdk.getTaskPushNotificationConfig(p, c),
    listTaskPushNotificationConfigs: (p, c) => sdk.listTaskPushNotificationConfigs(p, c),
    deleteTaskPushNotificationConfig: (p, c) => sdk.deleteTaskPushNotificationConfig(p, c),
    cancelTask: (p: CancelTaskRequest) => cancelAndWait(agent, p.id),
    resubscribe: (p: SubscribeToTaskRequest) => subscribe(agent, p.id),
  };
}

/**
 * The push notification store and sender the SDK is given: the task records of ./push-configs.ts,
 * where push is offered; and a sender that sends nothing, since the notifications go out from the
 * event store's stream (./push-delivery.ts), not from the request that happens to see a change.
 */
function pushOf(
  agent: A2aAgentContext,
): { store: PushNotificationStore; sender: PushNotificationSender } | undefined {
  const configs = agent.ports.pushConfigs;
  if (!configs) return undefined;
  const store = runPushStore(configs, agent.caller, {
    allowLoopback: agent.settings.allowLoopbackPush === true,
    newId: () => agent.ports.ids.next(),
  });
  return { store, sender: { send: async () => {} } };
}

/**
 * Why a message on a task cannot be taken, before the SDK runs the executor (which could only say
 * that it failed): the task waits for no answer, or the message is none (a new task's message was
 * checked as it was admitted: ./admit.ts).
 * A task that is not the caller's, or that ended, the SDK refuses itself.
 */
async function checkMessage(agent: A2aAgentContext, message: Message | undefined): Promise<void> {
  if (!message?.taskId || message.taskId === agent.admitted?.taskId) return;
  const run = await loadRun(agent, message.taskId);
  if (!run.found || !run.state) return;
  const task = taskOfRun(message.taskId, run.state, now(agent));
  if (isTerminal(task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED)) return;
  if (pendingApprovals(run.state).length === 0)
    throw new UnsupportedOperationError(
      `Task ${message.taskId} waits for no answer: it is ${TaskState[task.status?.state ?? 0]}`,
    );
  decisionOf(message);
}

/** Cancel the task's run, and answer the task once the run ended (or as it is after `maxSeconds`). */
async function cancelAndWait(agent: A2aAgentContext, taskId: string): Promise<Task> {
  const task = await cancelRun(agent, taskId);
  const state = task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
  if (isTerminal(state)) return task;
  for await (const event of followRun(agent, taskId, { state, toTheEnd: true }))
    if (event.kind === "statusUpdate" && event.data.status && isTerminal(event.data.status.state))
      return { ...task, status: event.data.status };
  return task;
}

/**
 * A subscription: the task as it is, then its changes until it ends (through an input-required
 * one, which the caller or an operator answers meanwhile), or `maxSeconds` pass.
 */
async function* subscribe(agent: A2aAgentContext, taskId: string): AsyncGenerator<StreamResponse> {
  const run = await loadRun(agent, taskId);
  if (!run.found || (!run.state && !run.refused))
    throw new TaskNotFoundError(`Task not found: ${taskId}`);
  const task = taskOf(agent, taskId, run);
  yield { payload: { $case: "task", value: task } };
  const state = task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED;
  if (isTerminal(state)) return;
  for await (const event of followRun(agent, taskId, { state, toTheEnd: true })) {
    if (event.kind === "statusUpdate")
      yield { payload: { $case: "statusUpdate", value: event.data } };
    if (event.kind === "artifactUpdate")
      yield { payload: { $case: "artifactUpdate", value: event.data } };
  }
}
