import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { A2A_CONTENT_TYPE, StreamResponse, TaskState } from "@a2a-js/sdk";
import type { Envelope } from "../../../schemas";
import type { Clock, EventStore } from "../../core/ports";
import type { OrchestratorState } from "../../roles/orchestrator/state";
import { DAG_RUN } from "../api";
import {
  isPrivateAddress,
  PUSH_FAILURES_KEPT,
  type PushConfig,
  type PushFailure,
  pushUrlProblem,
  type TaskPushConfigs,
  updatePushRecord,
} from "./push-configs";
import { taskIdOfRun, taskOfRun } from "./task";

/**
 * Push notifications from the outbox: the events the event store holds (read from its table's
 * stream by functions/handlers/a2a-push.ts, never by the request that started a run) name the
 * runs that moved; for each run of an A2A task with push configs, the task is read from the run's
 * state (./task.ts, as `GetTask` reads it), and when its state is not the one last delivered, the
 * task (a v1.0 `StreamResponse` holding it) is POSTed to each config's URL:
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
 * - runs are delivered side by side, so a slow webhook holds up no other task's (only the batch).
 * - an event an orchestrator applies to the run (a step role's report) reaches the stream before
 *   the run's state has it: the run is read again every `pollMs` until its state applied the event
 *   (the run's checkpoint of the event's stream), at most `applyWaitMs`.
 * - a deployed stack POSTs only where `pushUrlProblem` allows, and to a name only where it resolves
 *   to public addresses (a name that resolves into the network is refused at each delivery).
 */

export interface PushDeliveryPorts {
  readonly store: Pick<EventStore, "load">;
  readonly configs: TaskPushConfigs;
  readonly clock: Clock;
  sleep(ms: number): Promise<void>;
  /** POST a notification; the answer's status (throws when none came). Default: fetch. */
  post?(url: string, init: PushRequest): Promise<number>;
  /** The addresses a host name resolves to. Default: the system's resolver. */
  resolve?(host: string): Promise<string[]>;
}

export interface PushRequest {
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly timeoutMs: number;
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

/** The newest stored event of each A2A task's run among `events` (by its order key, the run). */
export function runsMoved(events: readonly Envelope[]): Map<string, Envelope> {
  const moved = new Map<string, Envelope>();
  for (const event of events) {
    const runId = event.order_key;
    if (taskIdOfRun(runId)) moved.set(runId, event);
  }
  return moved;
}

/** Deliver the state of every A2A task whose run moved in `events`, run by run side by side. */
export async function deliverTaskPushes(
  events: readonly Envelope[],
  ports: PushDeliveryPorts,
  settings: PushDeliverySettings,
): Promise<RunPushOutcome[]> {
  const moved = [...runsMoved(events)];
  const outcomes = await Promise.all(
    moved.map(([runId, event]) => deliverRunPush(runId, event, ports, settings)),
  );
  return outcomes.flatMap((o) => (o ? [o] : []));
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
  const stream = `${event.aggregate.type}#${event.aggregate.id}`;
  for (;;) {
    const loaded = await ports.store.load({ state: { type: DAG_RUN, id: runId } });
    const applied = (loaded.state?.gate?.checkpoints[stream] ?? 0) >= event.aggregate.version;
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
  for (let attempt = 1; attempt <= settings.attempts; attempt++) {
    if (attempt > 1) await ports.sleep(settings.backoffMs * 2 ** (attempt - 2));
    try {
      const refused = await destinationProblem(config.url, ports, settings.allowLoopback);
      if (refused) return refused;
      const post = ports.post ?? fetchPost;
      const status = await post(config.url, { headers, body, timeoutMs: settings.timeoutMs });
      if (status >= 200 && status < 300) return undefined;
      reason = `the webhook answered ${status}`;
    } catch (error) {
      reason = `the webhook did not answer: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  return `${reason} (${settings.attempts} attempts)`;
}

/** Why the URL is not called now: refused as a config would be, or its name resolves inward. */
async function destinationProblem(
  url: string,
  ports: PushDeliveryPorts,
  allowLoopback: boolean,
): Promise<string | undefined> {
  const problem = pushUrlProblem(url, allowLoopback);
  if (problem) return problem;
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  if (allowLoopback || isIP(host) !== 0) return undefined;
  const resolve = ports.resolve ?? resolveHost;
  const inward = (await resolve(host)).filter(isPrivateAddress);
  return inward.length > 0
    ? `the push notification URL's host ${host} resolves to ${inward.join(", ")}, inside the network`
    : undefined;
}

async function resolveHost(host: string): Promise<string[]> {
  return (await lookup(host, { all: true })).map((a) => a.address);
}

async function fetchPost(url: string, init: PushRequest): Promise<number> {
  const response = await fetch(url, {
    method: "POST",
    headers: init.headers,
    body: init.body,
    redirect: "manual",
    signal: AbortSignal.timeout(init.timeoutMs),
  });
  await response.body?.cancel();
  return response.status;
}
