import { AgentBusError } from "./errors";

/**
 * External side effects (seed 000 §3.2, §11.4): an action outside AgentBus (sending a reply,
 * paying a refund) is done under a business idempotency key `<task_id>:<action>:<logical_attempt>`
 * that every retry of the same action reuses.
 *
 * - `SideEffectStore` records what is known about each key (the side-effects table). States:
 *
 *       pending ──► succeeded        (the channel confirmed it: by the send call or by a query)
 *          │ ──────► failed          (the channel refused it: permanent)
 *          └──────► unknown ──► succeeded | failed | unknown (a later attempt learnt more, or not)
 *
 *   `succeeded` and `failed` are final: a transition out of them is refused with
 *   `SideEffectTransitionError`. Marking a final record again with the same state is a no-op that
 *   returns the stored record unchanged (two workers may both learn the same outcome).
 *   `claim` creates the record as `pending` with attempts 1 when absent, else returns it with
 *   attempts increased by one; the record is created and counted atomically.
 *
 * - The outside system itself is an integration's port (the reply channel's, the payments'):
 *   a call under the key (a system with idempotency keys does not apply the same key twice), a
 *   query by the key after an unclear outcome. Errors: an UnknownOutcomeError (the call may or
 *   may not have happened: query, never mint a new key), a PermanentError (refused for good), a
 *   TransientError (not applied, try later).
 */

export type SideEffectState = "pending" | "succeeded" | "failed" | "unknown";

export interface SideEffectError {
  readonly code: string;
  readonly message: string;
}

/** What a succeeded action gave: a channel's delivery id, or a tool's output as JSON text. */
export interface SideEffectResult {
  readonly delivery_id?: string;
  readonly output_json?: string;
}

export interface SideEffectRecord {
  readonly key: string;
  readonly state: SideEffectState;
  /** How many times the key has been claimed (1 on the first claim). */
  readonly attempts: number;
  readonly created_at: string;
  readonly updated_at: string;
  readonly result?: SideEffectResult;
  readonly error?: SideEffectError;
  readonly task_id: string;
  /** What kind of action the key stands for (`reply`, `refund`, ...). */
  readonly kind: string;
  /**
   * The outside system's id of the long-running work the call started (an MCP task's id), kept
   * as soon as it answered with it: a later attempt asks about that work, never starts another.
   */
  readonly operation?: string;
}

export interface SideEffectMeta {
  readonly task_id: string;
  readonly kind: string;
}

export interface SideEffectStore {
  /** Create `pending` (attempts 1) if absent, else count one more attempt; returns the record. */
  claim(key: string, meta: SideEffectMeta, now: Date): Promise<SideEffectRecord>;
  /** pending | unknown -> succeeded (succeeded -> succeeded is a no-op). */
  markSucceeded(key: string, result: SideEffectResult, now: Date): Promise<SideEffectRecord>;
  /** pending | unknown -> failed (failed -> failed is a no-op). */
  markFailed(key: string, error: SideEffectError, now: Date): Promise<SideEffectRecord>;
  /** pending | unknown -> unknown. */
  markUnknown(key: string, error: SideEffectError, now: Date): Promise<SideEffectRecord>;
  /** pending | unknown: keeps the id of the long-running work the call started (`operation`). */
  markStarted(key: string, operation: string, now: Date): Promise<SideEffectRecord>;
  /** The record of `key` as stored (strongly consistent), undefined when never claimed. */
  get(key: string): Promise<SideEffectRecord | undefined>;
}

/** The states each transition may start from. */
export const TRANSITIONS_FROM: Readonly<
  Record<"succeeded" | "failed" | "unknown", readonly SideEffectState[]>
> = {
  succeeded: ["pending", "unknown"],
  failed: ["pending", "unknown"],
  unknown: ["pending", "unknown"],
};

/** A transition the state machine does not allow (for example out of `succeeded`). */
export class SideEffectTransitionError extends AgentBusError {
  readonly key: string;
  readonly from: SideEffectState | undefined;
  readonly to: SideEffectState;
  constructor(key: string, from: SideEffectState | undefined, to: SideEffectState) {
    super(
      "permanent",
      from === undefined ? "side_effect.not_found" : "side_effect.invalid_transition",
      from === undefined
        ? `side effect ${key} cannot become ${to}: it was never claimed`
        : `side effect ${key} cannot go from ${from} to ${to}`,
      { details: { key, from, to } },
    );
    this.key = key;
    this.from = from;
    this.to = to;
  }
}

/** The idempotency key of one logical action of a task: `<task_id>:<kind>:<logical_attempt>`. */
export function sideEffectKey(taskId: string, kind: string, logicalAttempt: number): string {
  return `${taskId}:${kind}:${logicalAttempt}`;
}

/** Apply a transition to a record (shared by the in-memory store and tests). */
export function transitionRecord(
  record: SideEffectRecord | undefined,
  key: string,
  to: "succeeded" | "failed" | "unknown",
  change: { result?: SideEffectResult; error?: SideEffectError },
  now: Date,
): SideEffectRecord {
  if (!record) throw new SideEffectTransitionError(key, undefined, to);
  if (record.state === to && (to === "succeeded" || to === "failed")) return record;
  if (!TRANSITIONS_FROM[to].includes(record.state))
    throw new SideEffectTransitionError(key, record.state, to);
  const { error: _error, result: _result, ...rest } = record;
  return {
    ...rest,
    state: to,
    updated_at: now.toISOString(),
    ...(change.result ? { result: change.result } : {}),
    ...(change.error ? { error: change.error } : {}),
  };
}

/** The SideEffectStore of tests and the local runtime. */
export class InMemorySideEffects implements SideEffectStore {
  readonly records = new Map<string, SideEffectRecord>();

  async claim(key: string, meta: SideEffectMeta, now: Date): Promise<SideEffectRecord> {
    const existing = this.records.get(key);
    const next: SideEffectRecord = existing
      ? { ...existing, attempts: existing.attempts + 1, updated_at: now.toISOString() }
      : {
          key,
          state: "pending",
          attempts: 1,
          created_at: now.toISOString(),
          updated_at: now.toISOString(),
          task_id: meta.task_id,
          kind: meta.kind,
        };
    this.records.set(key, next);
    return structuredClone(next);
  }

  async markSucceeded(key: string, result: SideEffectResult, now: Date) {
    return this.apply(key, "succeeded", { result }, now);
  }

  async markFailed(key: string, error: SideEffectError, now: Date) {
    return this.apply(key, "failed", { error }, now);
  }

  async markUnknown(key: string, error: SideEffectError, now: Date) {
    return this.apply(key, "unknown", { error }, now);
  }

  async markStarted(key: string, operation: string, now: Date) {
    const record = this.records.get(key);
    if (record?.state !== "pending" && record?.state !== "unknown")
      throw new SideEffectTransitionError(key, record?.state, "pending");
    const next = { ...record, operation, updated_at: now.toISOString() };
    this.records.set(key, next);
    return structuredClone(next);
  }

  async get(key: string): Promise<SideEffectRecord | undefined> {
    const record = this.records.get(key);
    return record ? structuredClone(record) : undefined;
  }

  private apply(
    key: string,
    to: "succeeded" | "failed" | "unknown",
    change: { result?: SideEffectResult; error?: SideEffectError },
    now: Date,
  ): SideEffectRecord {
    const next = transitionRecord(this.records.get(key), key, to, change, now);
    this.records.set(key, next);
    return structuredClone(next);
  }
}
