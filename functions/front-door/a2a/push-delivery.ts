import { A2A_CONTENT_TYPE, StreamResponse, TaskState } from "@a2a-js/sdk";
import { type Envelope, EnvelopeBase } from "../../../schemas";
import { describe } from "../../core/errors";
import { checkpointOn } from "../../core/gate-records";
import type { Clock, EventStore } from "../../core/ports";
import type { OrchestratorState } from "../../roles/orchestrator/state";
import { DAG_RUN } from "../api";
import {
  PUSH_FAILURES_KEPT,
  type PushConfig,
  type PushFailure,
  pushUrlProblem,
  type TaskPushConfigs,
  updatePushRecord,
} from "./push-configs";
import {
  checkedLookup,
  httpPost,
  PushDestinationRefused,
  type PushRequest,
  type ResolveHost,
  resolveHost,
} from "./push-transport";
import { taskIdOfRun, taskOfRun } from "./task";

/**
 * Push notifications from the outbox: the stored events that move an A2A task (./push-events.ts),
 * which the relay sends the push function's FIFO queue in their run's message group (read by
 * functions/handlers/a2a-push.ts, never by the request that started a run), name the runs that
 * moved; for each run of an A2A task with push configs, the task is read from the run's state
 * (./task.ts, as `GetTask` reads it), and when its state is not the one last delivered, the task
 * (a v1.0 `StreamResponse` holding it) is POSTed to each config's URL:
 *
 * - headers: `Content-Type: application/a2a+json`; the config's token as
 *   `X-A2A-Notification-Token` (the receiver checks it is the one it set); its authentication as
 *   `Authorization: <scheme> <credentials>`; `X-A2A-Notification-Id: <task id>:<n>`, the n-th
 *   state delivered, also in the task's `metadata.agentbus.notification_id`: a notification sent
 *   again (a retry, a batch read again) has the same id, so a receiver drops what it has.
 * - at least once: a POST that fails (no answer in `timeoutMs`, an answer other than 2xx, a
 *   redirect, which is never followed) is sent again after `backoffMs`, doubled each time, up to
 *   `attempts` in all; then it is recorded as failed on the task's record (`failures`, the last
 *   PUSH_FAILURES_KEPT) and reported, and the state counts as delivered: a webhook that is down
 *   misses it rather than holding its task's later states back.
 * - runs are delivered side by side, so a slow webhook holds up no other task's (only the batch);
 *   a run whose tables fail names its messages to be received again, and only its.
 * - an event an orchestrator applies to the run (a step role's report) is stored before the run's
 *   state has it: the run is read again every `pollMs` until its state applied the event (the
 *   run's checkpoint of the event's stream), at most `applyWaitMs`.
 * - a deployed stack POSTs only where `pushUrlProblem` allows, and to a name only at an address
 *   it resolved and checked for that connection (./push-transport.ts: a name that resolves into
 *   the network is refused at each delivery, and one that changes its answer cannot slip past).
 */

export interface PushDeliveryPorts {
  readonly store: Pick<EventStore, "load">;
  readonly configs: TaskPushConfigs;
  readonly clock: Clock;
  sleep(ms: number): Promise<void>;
  /**
   * POST a notification over a connection whose socket resolves the host with `init.lookup`; the
   * answer's status (throws when none came). Default: node:http / node:https (./push-transport.ts).
   */
  post?(url: string, init: PushRequest): Promise<number>;
  /** The addresses a host name resolves to, once per connection. Default: the system's resolver. */
  resolve?: ResolveHost;
}

/**
 * A message of the push function's queue as SQS hands it over (an SQS record): the relay sent a
 * stored event's envelope (JSON, its claim when large: the payload is not read here) in its run's
 * message group.
 */
export interface RelayedEvent {
  readonly messageId: string;
  readonly body: string;
  readonly attributes: { readonly MessageGroupId?: string };
}

export interface PushDeliverySettings {
  readonly attempts: number;
  readonly backoffMs: number;
  readonly timeoutMs: number;
  readonly pollMs: number;
  readonly applyWaitMs: number;
  /** The local stack's allowance of loopback webhooks (./push-configs.ts `pushUrlProblem`). */
  readonly allowLoopback: boolean;
}

export const PUSH_DELIVERY_DEFAULTS: PushDeliverySettings = {
  attempts: 3,
  backoffMs: 1000,
  timeoutMs: 5000,
  pollMs: 250,
  applyWaitMs: 3000,
  allowLoopback: false,
};

/** What one run's delivery did: the state sent, each config's outcome. */
export interface RunPushOutcome {
  readonly runId: string;
  readonly notificationId: string;
  readonly state: string;
  readonly delivered: readonly string[];
  readonly failed: readonly PushFailure[];
}

/** A message to receive again, and why: its run's tables failed, or it is no stored event. */
export interface RetriedMessage {
  readonly messageId: string;
  readonly runId: string;
  readonly reason: string;
}

/** What one batch did: each run's delivery, and the messages to receive again. */
export interface PushBatchOutcome {
  readonly outcomes: RunPushOutcome[];
  readonly retried: RetriedMessage[];
}

/** A run's messages in a batch, in order: the newest event read before any unreadable message. */
interface RunMessages {
  readonly ids: string[];
  newest?: Envelope;
  /** The first message that is no stored event: it and those after it are received again. */
  unreadable?: { readonly at: number; readonly reason: string };
}

/** The batch's messages by run (their message group, else the envelope's order key). */
export function runsMoved(messages: readonly RelayedEvent[]): Map<string, RunMessages> {
  const runs = new Map<string, RunMessages>();
  for (const message of messages) {
    const read = envelopeOf(message.body);
    const runId =
      message.attributes.MessageGroupId ?? (read.ok ? read.envelope.order_key : "(no group)");
    const run = runs.get(runId) ?? { ids: [] };
    runs.set(runId, run);
    run.ids.push(message.messageId);
    if (run.unreadable) continue;
    if (read.ok) run.newest = read.envelope;
    else run.unreadable = { at: run.ids.length - 1, reason: read.reason };
  }
  return runs;
}

/** A message's body as the envelope of a stored event, or why it is not one. */
function envelopeOf(
  body: string,
): { ok: true; envelope: Envelope } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    return { ok: false, reason: `not JSON: ${error instanceof Error ? error.message : error}` };
  }
  const parsed = EnvelopeBase.safeParse(json);
  if (!parsed.success)
    return { ok: false, reason: `not an envelope: ${parsed.error.issues[0]?.message ?? ""}` };
  const { order_key, ...rest } = parsed.data;
  return { ok: true, envelope: { ...rest, order_key: order_key ?? rest.aggregate.id } };
}

/**
 * Deliver the state of every A2A task whose run moved in `messages`, run by run side by side. A
 * run whose delivery throws (a table failed) has all its messages received again; a message that
 * is no stored event, it and the rest of its run's (a FIFO group keeps its order); no other.
 */
export async function deliverTaskPushes(
  messages: readonly RelayedEvent[],
  ports: PushDeliveryPorts,
  settings: PushDeliverySettings,
): Promise<PushBatchOutcome> {
  const runs = [...runsMoved(messages)];
  const settled = await Promise.allSettled(
    runs.map(([runId, run]) =>
      run.newest && taskIdOfRun(runId)
        ? deliverRunPush(runId, run.newest, ports, settings)
        : undefined,
    ),
  );
  const outcomes: RunPushOutcome[] = [];
  const retried: RetriedMessage[] = [];
  settled.forEach((result, i) => {
    const [runId, run] = runs[i] ?? ["", { ids: [] }];
    const again = (ids: readonly string[], reason: string) =>
      retried.push(...ids.map((messageId) => ({ messageId, runId, reason })));
    if (result.status === "rejected") again(run.ids, describe(result.reason).message);
    else if (run.unreadable) again(run.ids.slice(run.unreadable.at), run.unreadable.reason);
    if (result.status === "fulfilled" && result.value) outcomes.push(result.value);
  });
  return { outcomes, retried };
}

/** One run: its task's state, sent to its configs when it is not the one last delivered. */
async function deliverRunPush(
  runId: string,
  event: Envelope,
  ports: PushDeliveryPorts,
  settings: PushDeliverySettings,
): Promise<RunPushOutcome | undefined> {
  const record = await ports.configs.read(runId);
  const taskId = taskIdOfRun(runId);
  if (!record || record.configs.length === 0 || !taskId) return undefined;
  const state = await runStateAfter(runId, event, ports, settings);
  if (!state) return undefined;
  const at = ports.clock.now().toISOString();
  const task = taskOfRun(taskId, state, at);
  const taskState = TaskState[task.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED];
  if (record.delivered?.state === taskState) return undefined;
  const seq = (record.delivered?.seq ?? 0) + 1;
  const notificationId = `${taskId}:${seq}`;
  task.metadata = {
    ...task.metadata,
    agentbus: { ...task.metadata?.agentbus, notification_id: notificationId },
  };
  const body = JSON.stringify(StreamResponse.toJSON({ payload: { $case: "task", value: task } }));
  const results = await Promise.all(
    record.configs.map((config) => postWithRetries(config, notificationId, body, ports, settings)),
  );
  const failed = results.flatMap((reason, i) => {
    const config = record.configs[i];
    return reason && config
      ? [{ config_id: config.id, notification_id: notificationId, state: taskState, at, reason }]
      : [];
  });
  await updatePushRecord(ports.configs, runId, (stored) =>
    stored && (stored.delivered?.seq ?? 0) < seq
      ? {
          ...stored,
          delivered: { state: taskState, seq },
          failures: [...stored.failures, ...failed].slice(-PUSH_FAILURES_KEPT),
        }
      : undefined,
  );
  const delivered = record.configs.filter((_, i) => !results[i]).map((c) => c.id);
  return { runId, notificationId, state: taskState, delivered, failed };
}

/** The run's state once it applied `event` (or as it is after `applyWaitMs`). */
async function runStateAfter(
  runId: string,
  event: Envelope,
  ports: PushDeliveryPorts,
  settings: PushDeliverySettings,
): Promise<OrchestratorState | undefined> {
  const until = ports.clock.now().getTime() + settings.applyWaitMs;
  const ownStream = event.aggregate.type === DAG_RUN && event.aggregate.id === runId;
  for (;;) {
    const loaded = await ports.store.load({ state: { type: DAG_RUN, id: runId } });
    const applied = checkpointOn(loaded.state?.gate, event.aggregate) >= event.aggregate.version;
    if (ownStream || applied || ports.clock.now().getTime() >= until)
      return loaded.state?.data as OrchestratorState | undefined;
    await ports.sleep(settings.pollMs);
  }
}

/** POST one notification, again after a backoff while it fails: undefined, or why it failed. */
async function postWithRetries(
  config: PushConfig,
  notificationId: string,
  body: string,
  ports: PushDeliveryPorts,
  settings: PushDeliverySettings,
): Promise<string | undefined> {
  const headers: Record<string, string> = {
    "content-type": A2A_CONTENT_TYPE,
    "x-a2a-notification-id": notificationId,
    ...(config.token ? { "x-a2a-notification-token": config.token } : {}),
    ...(config.authentication
      ? { authorization: `${config.authentication.scheme} ${config.authentication.credentials}` }
      : {}),
  };
  let reason = "";
  const refused = pushUrlProblem(config.url, settings.allowLoopback);
  if (refused) return refused;
  const post = ports.post ?? httpPost;
  const lookup = checkedLookup(ports.resolve ?? resolveHost, settings.allowLoopback);
  for (let attempt = 1; attempt <= settings.attempts; attempt++) {
    if (attempt > 1) await ports.sleep(settings.backoffMs * 2 ** (attempt - 2));
    try {
      const status = await post(config.url, {
        headers,
        body,
        timeoutMs: settings.timeoutMs,
        lookup,
      });
      if (status >= 200 && status < 300) return undefined;
      reason = `the webhook answered ${status}`;
    } catch (error) {
      if (error instanceof PushDestinationRefused) return error.message;
      reason = `the webhook did not answer: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  return `${reason} (${settings.attempts} attempts)`;
}
