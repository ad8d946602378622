import { isIP } from "node:net";
import type { TaskPushNotificationConfig } from "@a2a-js/sdk";
import { RequestMalformedError, TaskNotFoundError } from "@a2a-js/sdk/errors";
import type { PushNotificationStore } from "@a2a-js/sdk/server";
import { runIdOfTask } from "./task";

/**
 * Where an A2A task's push notifications go (A2A v1.0 `CreateTaskPushNotificationConfig` and the
 * Get/List/Delete that go with it, or a `SendMessage`'s `configuration.taskPushNotificationConfig`):
 * one record per task, its run's (./task.ts), kept durably (the state table's `a2a_push#<run id>`
 * item: ../../adapters/dynamodb/task-push-configs.ts), never in a function's memory. The record
 * belongs to the tenant that set its first config: another tenant's call finds no such task.
 * The delivery (./push-delivery.ts) keeps in the same record what it last delivered and what it
 * gave up on, for an operator.
 */

/** At most this many configs a task (each is POSTed every change of the task's state). */
export const PUSH_CONFIGS_PER_TASK = 5;
/** The most of a URL, a token, a credential, kept. */
const MAX_FIELD = 2048;
/** How many given-up deliveries a task's record keeps, newest last. */
export const PUSH_FAILURES_KEPT = 10;

/** One webhook of a task: its URL, the token sent back with it, how to authenticate. */
export interface PushConfig {
  readonly id: string;
  readonly url: string;
  readonly token?: string;
  readonly authentication?: { readonly scheme: string; readonly credentials: string };
}

/** A notification a webhook did not take after every attempt. */
export interface PushFailure {
  readonly config_id: string;
  readonly notification_id: string;
  readonly state: string;
  readonly at: string;
  readonly reason: string;
}

export interface TaskPushRecord {
  readonly tenant: string;
  readonly configs: readonly PushConfig[];
  /** The task state last delivered, and its notification's number (the next is `seq + 1`). */
  readonly delivered?: { readonly state: string; readonly seq: number };
  readonly failures: readonly PushFailure[];
  /** Bumped by each write, which is conditional on it (absent: the record is new). */
  readonly revision: number;
}

/** The records' store: a read, and a write conditional on the revision read. */
export interface TaskPushConfigs {
  read(runId: string): Promise<TaskPushRecord | undefined>;
  /** Write `next` if the stored revision is still `expected` (undefined: none stored); false if not. */
  write(runId: string, next: TaskPushRecord, expected: number | undefined): Promise<boolean>;
}

/** Rounds of read, change and conditional write before a change gives up. */
const ROUNDS = 5;

/**
 * Change a task's record: `change` gets the record as stored and answers the next one (undefined:
 * no write), re-read and changed again when another write came first.
 */
export async function updatePushRecord(
  configs: TaskPushConfigs,
  runId: string,
  change: (record: TaskPushRecord | undefined) => Omit<TaskPushRecord, "revision"> | undefined,
): Promise<TaskPushRecord | undefined> {
  for (let round = 1; round <= ROUNDS; round++) {
    const record = await configs.read(runId);
    const next = change(record);
    if (!next) return record;
    const written = { ...next, revision: (record?.revision ?? 0) + 1 };
    if (await configs.write(runId, written, record?.revision)) return written;
  }
  throw new Error(`the push configs of ${runId} changed ${ROUNDS} times while being written`);
}

/** The task records in memory: the twin of the state table's items (tests, the simulation). */
export class MemoryTaskPushConfigs implements TaskPushConfigs {
  readonly records = new Map<string, TaskPushRecord>();
  async read(runId: string) {
    return this.records.get(runId);
  }
  async write(runId: string, next: TaskPushRecord, expected: number | undefined) {
    if (this.records.get(runId)?.revision !== expected) return false;
    this.records.set(runId, structuredClone(next));
    return true;
  }
}

/**
 * Why a webhook URL is refused, or undefined when it is taken. A deployed stack POSTs only over
 * https to a public host: no loopback, link-local, private or shared address (a caller must not
 * make the stack POST into its network), by name (`localhost`, `*.internal`, ...) or literally;
 * a name is checked again where it resolves when it is called (./push-delivery.ts).
 * `allowLoopback` is the local stack's allowance (`A2A_PUSH_ALLOW_LOOPBACK`, never set by the
 * CDK stack): http or https to a loopback host (127.0.0.0/8, ::1, localhost) is then taken too.
 */
export function pushUrlProblem(url: string, allowLoopback: boolean): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `the push notification URL ${JSON.stringify(url.slice(0, 200))} is not a URL`;
  }
  if (url.length > MAX_FIELD) return `the push notification URL is over ${MAX_FIELD} characters`;
  if (parsed.username || parsed.password)
    return "the push notification URL carries credentials: give them as its authentication";
  const host = parsed.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  const loopback = isLoopbackHost(host);
  if (allowLoopback && loopback && (parsed.protocol === "http:" || parsed.protocol === "https:"))
    return undefined;
  if (parsed.protocol !== "https:")
    return `the push notification URL must be https (it is ${parsed.protocol.replace(":", "")})`;
  if (loopback || isInternalName(host) || (isIP(host) !== 0 && isPrivateAddress(host)))
    return `the push notification URL's host ${host} is loopback, link-local or private: the webhook must be reachable on the internet`;
  return undefined;
}

function isLoopbackHost(host: string): boolean {
  return (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    host === "::1" ||
    (isIP(host) === 4 && host.startsWith("127."))
  );
}

function isInternalName(host: string): boolean {
  return (
    isIP(host) === 0 &&
    (!host.includes(".") || /\.(internal|local|localdomain|home\.arpa|intranet|lan)$/.test(host))
  );
}

/** Whether an IP address is loopback, unspecified, link-local, private or shared (RFC 6598). */
export function isPrivateAddress(address: string): boolean {
  const host = address.toLowerCase();
  if (isIP(host) === 6) {
    // An IPv4-mapped address, as written or as the URL parser writes it (`::ffff:a00:1`).
    const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host)?.[1];
    if (dotted) return isPrivateAddress(dotted);
    const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
    if (hex) {
      const [high, low] = [Number.parseInt(hex[1] ?? "", 16), Number.parseInt(hex[2] ?? "", 16)];
      return isPrivateAddress(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`);
    }
    return host === "::" || host === "::1" || /^(fe[89ab]|f[cd])/.test(host);
  }
  const [a = 0, b = 0] = host.split(".").map(Number);
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 100 && b >= 64 && b <= 127) ||
    a >= 224
  );
}

/** A config as the caller gave it, checked: its URL, its token and authentication's sizes. */
function checkedConfig(given: TaskPushNotificationConfig, allowLoopback: boolean): PushConfig {
  const problem = pushUrlProblem(given.url, allowLoopback);
  if (problem) throw new RequestMalformedError(problem);
  if (given.token.length > MAX_FIELD)
    throw new RequestMalformedError(`the push notification token is over ${MAX_FIELD} characters`);
  const auth = given.authentication;
  if (
    auth &&
    (!/^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,63}$/.test(auth.scheme) || !auth.credentials)
  )
    throw new RequestMalformedError(
      "the push notification's authentication needs an HTTP scheme (Bearer, Basic, ...) and credentials",
    );
  if (auth && auth.credentials.length > MAX_FIELD)
    throw new RequestMalformedError(
      `the push notification credentials are over ${MAX_FIELD} characters`,
    );
  return {
    id: given.id,
    url: given.url,
    ...(given.token ? { token: given.token } : {}),
    ...(auth ? { authentication: { scheme: auth.scheme, credentials: auth.credentials } } : {}),
  };
}

function sdkConfigOf(taskId: string, config: PushConfig): TaskPushNotificationConfig {
  return {
    tenant: "",
    id: config.id,
    taskId,
    url: config.url,
    token: config.token ?? "",
    authentication: config.authentication,
  };
}

/**
 * The SDK's push notification store over the task records, for one caller's request: a record
 * another tenant set is "task not found", whatever the call. A new config's id is made when the
 * caller gave none; one with the id of a kept config replaces it.
 */
export function runPushStore(
  configs: TaskPushConfigs,
  caller: { readonly tenantId: string },
  options: { readonly allowLoopback: boolean; readonly newId: () => string },
): PushNotificationStore {
  const runOf = (taskId: string) => {
    const runId = runIdOfTask(taskId);
    if (!runId) throw new TaskNotFoundError(`Task not found: ${taskId}`);
    return runId;
  };
  const owned = (taskId: string, record: TaskPushRecord | undefined) => {
    if (record && record.tenant !== caller.tenantId)
      throw new TaskNotFoundError(`Task not found: ${taskId}`);
    return record;
  };
  return {
    save: async (taskId, _context, given) => {
      if (!given.id) given.id = options.newId();
      const config = checkedConfig(given, options.allowLoopback);
      await updatePushRecord(configs, runOf(taskId), (stored) => {
        const record = owned(taskId, stored);
        const others = (record?.configs ?? []).filter((c) => c.id !== config.id);
        if (others.length >= PUSH_CONFIGS_PER_TASK)
          throw new RequestMalformedError(
            `task ${taskId} has ${PUSH_CONFIGS_PER_TASK} push notification configs already: delete one first`,
          );
        return {
          tenant: caller.tenantId,
          configs: [...others, config],
          failures: record?.failures ?? [],
          ...(record?.delivered ? { delivered: record.delivered } : {}),
        };
      });
    },
    load: async (taskId) => {
      const record = owned(taskId, await configs.read(runOf(taskId)));
      return (record?.configs ?? []).map((c) => sdkConfigOf(taskId, c));
    },
    delete: async (taskId, _context, configId) => {
      await updatePushRecord(configs, runOf(taskId), (stored) => {
        const record = owned(taskId, stored);
        if (!record?.configs.some((c) => c.id === configId)) return undefined;
        return { ...record, configs: record.configs.filter((c) => c.id !== configId) };
      });
    },
  };
}
