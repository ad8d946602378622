import { PermanentError, TransientError, UnknownOutcomeError } from "./errors";
import type {
  SideEffectError,
  SideEffectRecord,
  SideEffectResult,
  SideEffectStore,
} from "./side-effects";

/**
 * An outside write, exactly once (seed 000 §3.2, §11.4): a reply sent, a refund paid, a ledger
 * entry posted, by any role, agent or not. The write runs under a key the step derives, the same
 * for every retry of the step (`sideEffectKey(task, kind, n)`), and the side-effect ledger
 * (./side-effects.ts) records it `pending` before the call and `succeeded | failed | unknown`
 * after. `writeOnce(write)`:
 *
 * 1. Claims the key: `pending` with attempts 1, or the record with one attempt more.
 * 2. A final record answers without a call: `succeeded` with its output (by "record"), or
 *    `failed` with its error. That is what a redelivery finds after a crash between the call and
 *    the commit.
 * 3. A fresh claim calls. A record an earlier attempt left (`unknown`, or `pending` claimed before:
 *    that worker may have called, then died) is asked about first, by `query()`; not applied ->
 *    it is called (4). Without a query it is called again only when a resend is safe (5), else
 *    its outcome is unknown.
 * 4. A call answers (`succeeded`), is refused (`failed`: a PermanentError, or what `refusal`
 *    says), or times out (an UnknownOutcomeError: it may have happened). A timeout is resolved by
 *    the query: applied -> `succeeded`; not applied -> one call more under the same key, whose
 *    timeout leaves it unknown; could not tell (or the query timed out) -> unknown. Without a
 *    query a timeout is unknown for this attempt, and the next one calls again when safe (3).
 * 5. Unknown after a query, and a resend is safe (the record is younger than
 *    `resendSafeWithinSeconds`: the integration drops a repeat of the key by itself, as SNS FIFO
 *    does for 5 minutes; Infinity: it never applies a key twice) -> one call more, same key.
 * 6. The outcome is recorded. An unknown one is recorded `unknown` (code `unknownCode`) and
 *    thrown as a TransientError of that code, so the queue redelivers and the next attempt asks
 *    first (3), until the record's attempts or the delivery's receive count reach
 *    `maxUnknownAttempts`: then it is returned `unknown`, for the caller to hand to a person.
 *    Never is a new key made.
 * Any other error (a TransientError: nothing happened; the ledger's own) is rethrown and the
 * record left as it is: the next attempt asks first. A transition the ledger refuses (another
 * worker recorded the other final outcome meanwhile) is its SideEffectTransitionError.
 *
 * With `learnOnly` (the step no longer wants the write: its command was cancelled, superseded or
 * expired meanwhile) nothing is called: an earlier attempt's outcome is learnt by the query, and
 * a key the integration never saw is closed `failed` with that error (`not_called`).
 *
 * A write the outside system runs long (an MCP task): `call` is given `started`, which keeps the
 * id of the work it started with the record (`operation`) as soon as the system answered with it,
 * and throws StillWorkingError while the work goes on. The outcome is then `working` (the record
 * stays open): nothing is recorded but the id. Any later attempt on a record with an `operation`
 * learns by `resume(operation)` (an MCP `tasks/get`), never by a call: one piece of work per
 * key, whatever crashed or was redelivered. Work still going on `workingLimitSeconds` after the
 * record was made is unknown, handed to a person at once.
 *
 * A person answers a write handed to them: `closeByPerson` records what they found (applied, with
 * its output, or not); `resendByPerson` calls again under the same key because they asked (a
 * timeout resolved as in 4; an outcome still unknown goes back to them, never thrown).
 */

/** Deliveries a write's outcome may stay unknown before it is handed to a person. */
export const DEFAULT_MAX_UNKNOWN_ATTEMPTS = 5;
/** The code of an unknown outcome when the write names none. */
export const DEFAULT_UNKNOWN_CODE = "side_effect.outcome_unknown";

/** How long an outside system's long-running work may go on before a person is asked. */
export const DEFAULT_WORKING_LIMIT_SECONDS = 24 * 60 * 60;

/**
 * The outside system took the write on and is still at it (an MCP task `working`): the id of the
 * work (`operation`), its status in the system's words, and how long it asks to be left alone
 * before it is asked again. An UnknownOutcomeError: a caller that cannot resume the work learns
 * nothing more from it than from a timeout.
 */
export class StillWorkingError extends UnknownOutcomeError {
  readonly operation: string;
  readonly status: string;
  readonly pollAfterMs: number | undefined;
  constructor(
    code: string,
    message: string,
    work: { readonly operation: string; readonly status: string; readonly pollAfterMs?: number },
  ) {
    super(code, message, { details: { operation: work.operation, status: work.status } });
    this.operation = work.operation;
    this.status = work.status;
    this.pollAfterMs = work.pollAfterMs;
  }
}

/** Long-running work still going on: its id, status, and the wait it asks for before a poll. */
export interface Working {
  readonly kind: "working";
  readonly operation: string;
  readonly status: string;
  readonly pollAfterMs?: number;
}

/** What the integration's query by key knows of a write. */
export type WriteFound<O> =
  | { readonly status: "applied"; readonly output: O }
  | { readonly status: "not_applied" }
  | { readonly status: "unknown" };

/**
 * How an outcome was learnt: the first call, a call again under the key, a query, the record, a
 * poll of the long-running work an earlier call started.
 */
export type LearntBy = "call" | "retry" | "query" | "query after timeout" | "record" | "poll";

export type WriteOutcome<O> =
  | { readonly kind: "succeeded"; readonly output: O; readonly by: LearntBy }
  | { readonly kind: "failed"; readonly error: SideEffectError }
  /** Handed to a person: recorded `unknown`; `cause` is why, without the key and attempts. */
  | { readonly kind: "unknown"; readonly error: SideEffectError; readonly cause: string }
  /** With `learnOnly`: the integration never saw the key; the record is closed `failed`. */
  | { readonly kind: "not_called"; readonly error: SideEffectError };

/** The work the call started still goes on (the record stays open); `since` the record's start. */
export type StillGoingOn = Working & { readonly since: string };

/** The least wait between two polls of outside work still going on. */
export const MIN_TASK_POLL_MS = 5_000;
/** The longest wait between two polls of outside work still going on. */
export const MAX_TASK_POLL_MS = 15 * 60_000;

/**
 * When work still going on is asked about next, by whoever waits for it (an agent's run,
 * functions/core/agent/task-wait.ts; a workflow step, ./step-role.ts): after the wait the system
 * asks for (`pollAfterMs`), or after a quarter of the work's age when that is longer (a task
 * working for an hour is asked every 15 minutes), never sooner than MIN_TASK_POLL_MS nor later
 * than MAX_TASK_POLL_MS.
 */
export function nextPollAt(work: Pick<StillGoingOn, "pollAfterMs" | "since">, now: Date): Date {
  const age = Math.max(0, now.getTime() - Date.parse(work.since));
  const wait = Math.max(work.pollAfterMs ?? 0, age / 4, MIN_TASK_POLL_MS);
  return new Date(now.getTime() + Math.min(MAX_TASK_POLL_MS, Math.round(wait)));
}

/** Why an outcome stayed unknown, besides a call's timeout (whose message says it). */
export type UnclearCause = "query timed out" | "could not tell" | "timed out twice" | "no query";

/** How a write's output is kept with its record and read back. */
export interface OutputRecord<O> {
  write(output: O): SideEffectResult;
  read(result: SideEffectResult | undefined): O;
}

/** An outside write as its integration offers it, under one key. */
export interface OutsideWrite<O> {
  /** Who is called, as messages name it (`sns`, `issue_refund`). */
  readonly name: string;
  /**
   * The write under the key. Throws an UnknownOutcomeError when it may or may not have happened,
   * a PermanentError when refused, anything else (a TransientError) when nothing happened.
   * A system that runs the write long calls `started` with the id of the work as soon as it has
   * it, and throws StillWorkingError while the work goes on.
   */
  call(started?: (operation: string) => Promise<void>): Promise<O>;
  /** What the integration knows of the key. Without one, a call again is the only way to learn. */
  query?(): Promise<WriteFound<O>>;
  /**
   * For how long after the record was made calling the key again is safe even when the query
   * cannot tell: the integration drops a repeat by itself. Infinity: it never applies a key
   * twice. @default never
   */
  readonly resendSafeWithinSeconds?: number;
  /** A refusal's code and message, undefined when `error` is none. @default a PermanentError's */
  readonly refusal?: (error: unknown) => SideEffectError | undefined;
  /** @default the output as JSON (`output_json`) */
  readonly recorded?: OutputRecord<O>;
  /** What an unknown outcome says of its cause, where the default words do not fit. */
  readonly causes?: Partial<Readonly<Record<UnclearCause, string>>>;
}

/** An outside write the system may run long (an MCP tool run as a task). */
export interface ResumableWrite<O> extends OutsideWrite<O> {
  /**
   * The outcome of the work an earlier call started (the record's `operation`), as `call` gives
   * one. Without it, a call's StillWorkingError is unknown.
   */
  resume?(operation: string): Promise<O>;
}

/** The step's side of a write: its key, the ledger it is recorded in, and its attempt. */
export interface WriteStep {
  readonly ledger: SideEffectStore;
  readonly key: string;
  readonly taskId: string;
  /** What kind of write the key stands for (`reply`, `issue_refund`). */
  readonly kind: string;
  readonly now: Date;
  /** The delivery's receive count: an unknown outcome counts the larger of it and the record's. */
  readonly receiveCount?: number;
  /** @default DEFAULT_MAX_UNKNOWN_ATTEMPTS */
  readonly maxUnknownAttempts?: number;
  /** The code an unknown outcome is recorded and thrown with. @default DEFAULT_UNKNOWN_CODE */
  readonly unknownCode?: string;
  /** The step no longer wants the write: learn, call nothing; an unseen key is closed with this. */
  readonly learnOnly?: SideEffectError;
  /** How long started work may go on before it is unknown. @default DEFAULT_WORKING_LIMIT_SECONDS */
  readonly workingLimitSeconds?: number;
}

export type WriteOnce<O> = ResumableWrite<O> & WriteStep;

/** What the step learnt before it is recorded. */
type Learnt<O> =
  | { readonly kind: "succeeded"; readonly output: O; readonly by: LearntBy }
  | { readonly kind: "failed"; readonly error: SideEffectError }
  | { readonly kind: "unknown"; readonly cause: string }
  | { readonly kind: "not_called"; readonly error: SideEffectError }
  | Working;

/** Run the write once under its key (see the file's comment); only one that can `resume` waits. */
export function writeOnce<O>(
  write: OutsideWrite<O> & WriteStep & { readonly resume?: undefined },
): Promise<WriteOutcome<O>>;
export function writeOnce<O>(write: WriteOnce<O>): Promise<WriteOutcome<O> | StillGoingOn>;
export async function writeOnce<O>(write: WriteOnce<O>): Promise<WriteOutcome<O> | StillGoingOn> {
  const record = await claim(write);
  const final = recordedOutcome(write, record);
  if (final) return final;
  // Work an earlier call started is asked about, never started again; its polls are not unknowns.
  if (record.operation !== undefined && write.resume) {
    const resume = write.resume.bind(write);
    const polled = await attempt(write, "poll", () => resume(record.operation as string));
    if (polled.kind === "working") return stillWorking(write, polled, record.created_at);
    return settle(write, polled, write.receiveCount ?? 1);
  }
  const earlier =
    record.state === "unknown" || record.attempts > 1 || write.learnOnly !== undefined;
  const learnt = earlier
    ? await askFirst(write, record)
    : await resendIfSafe(write, record, await callResolving(write, "call"));
  if (learnt.kind === "working") return stillWorking(write, learnt, record.created_at);
  return settle(write, learnt, Math.max(record.attempts, write.receiveCount ?? 1));
}

/**
 * A person asked for the write again under its key (they checked it did not happen): call, a
 * timeout resolved by the query as always; an outcome still unknown is recorded and returned to
 * them, never thrown.
 */
export async function resendByPerson<O>(
  write: Omit<WriteOnce<O>, "learnOnly" | "receiveCount" | "maxUnknownAttempts" | "resume">,
): Promise<WriteOutcome<O>> {
  const record = await claim(write);
  const final = recordedOutcome(write, record);
  if (final) return final;
  const learnt = await callResolving(write, "retry");
  if (learnt.kind !== "unknown" && learnt.kind !== "working")
    return settle(write, learnt, record.attempts);
  const cause = learnt.kind === "unknown" ? learnt.cause : `${learnt.operation} ${learnt.status}`;
  const message = `resend: ${cause} (key ${write.key})`;
  const error = { code: write.unknownCode ?? DEFAULT_UNKNOWN_CODE, message };
  await write.ledger.markUnknown(write.key, error, write.now);
  return { kind: "unknown", error, cause };
}

/** What a person found of a write handed to them. */
export type PersonFound<O> =
  | { readonly applied: true; readonly output: O }
  | { readonly applied: false; readonly error: SideEffectError };

/** A person's answer closes the record: `succeeded` with the output, or `failed`. */
export async function closeByPerson<O>(
  write: Pick<WriteOnce<O>, "ledger" | "key" | "now" | "recorded">,
  found: PersonFound<O>,
): Promise<void> {
  const { ledger, key, now } = write;
  if (found.applied) await ledger.markSucceeded(key, outputRecord(write).write(found.output), now);
  else await ledger.markFailed(key, found.error, now);
}

function claim(write: WriteStep): Promise<SideEffectRecord> {
  return write.ledger.claim(write.key, { task_id: write.taskId, kind: write.kind }, write.now);
}

function recordedOutcome<O>(
  write: Pick<OutsideWrite<O>, "recorded">,
  record: SideEffectRecord,
): WriteOutcome<O> | undefined {
  if (record.state === "succeeded")
    return { kind: "succeeded", output: outputRecord(write).read(record.result), by: "record" };
  if (record.state === "failed")
    return { kind: "failed", error: record.error ?? { code: "side_effect.failed", message: "" } };
  return undefined;
}

/** An earlier attempt may have called: ask by key before anything is called again (3). */
async function askFirst<O>(write: WriteOnce<O>, record: SideEffectRecord): Promise<Learnt<O>> {
  if (!write.query) {
    const resend = write.learnOnly === undefined && resendSafe(write, record);
    return resend
      ? callResolving(write, "retry")
      : unclear(write, "no query", "nothing can be asked by key, and a call again is not safe");
  }
  const found = await ask(write, "query");
  if (found === "not_applied")
    return write.learnOnly
      ? { kind: "not_called", error: write.learnOnly }
      : callResolving(write, "retry");
  return write.learnOnly ? found : resendIfSafe(write, record, found);
}

/** An outside write and where its record is kept. */
type WriteParty<O> = ResumableWrite<O> & Pick<WriteStep, "ledger" | "key" | "now">;

/** Call; a timeout is resolved by the query: not applied -> one call more (4). */
async function callResolving<O>(write: WriteParty<O>, by: LearntBy): Promise<Learnt<O>> {
  const called = await call(write, by);
  if (called.kind !== "unknown" || !write.query) return called;
  const found = await ask(write, "query after timeout");
  if (found !== "not_applied") return found;
  const again = await call(write, "retry");
  return again.kind === "unknown" ? unclear(write, "timed out twice", again.cause) : again;
}

/** Still unknown after a query: one call more while a resend is safe (5). */
async function resendIfSafe<O>(
  write: WriteOnce<O>,
  record: SideEffectRecord,
  learnt: Learnt<O>,
): Promise<Learnt<O>> {
  if (learnt.kind !== "unknown" || !write.query || !resendSafe(write, record)) return learnt;
  const again = await call(write, "retry");
  return again.kind === "unknown" ? learnt : again;
}

/** One call under the key: its answer, its refusal, work still going on, or unknown (a timeout). */
function call<O>(write: WriteParty<O>, by: LearntBy) {
  const started = async (operation: string) => {
    await write.ledger.markStarted(write.key, operation, write.now);
  };
  return attempt(write, by, () => write.call(started));
}

/** A call or a poll: its output, its refusal, work still going on, or unknown. */
async function attempt<O>(
  write: ResumableWrite<O>,
  by: LearntBy,
  run: () => Promise<O>,
): Promise<Learnt<O>> {
  try {
    return { kind: "succeeded", output: await run(), by };
  } catch (error) {
    const refused = (write.refusal ?? permanentRefusal)(error);
    if (refused) return { kind: "failed", error: refused };
    if (error instanceof StillWorkingError && write.resume) {
      const { operation, status, pollAfterMs } = error;
      return { kind: "working", operation, status, ...(pollAfterMs ? { pollAfterMs } : {}) };
    }
    if (error instanceof UnknownOutcomeError) return { kind: "unknown", cause: error.message };
    throw error;
  }
}

/** The query by key: applied, not applied, or unknown (it could not tell, or timed out). */
async function ask<O>(write: OutsideWrite<O>, by: LearntBy): Promise<Learnt<O> | "not_applied"> {
  let found: WriteFound<O>;
  try {
    found = await (write.query as () => Promise<WriteFound<O>>)();
  } catch (error) {
    if (error instanceof UnknownOutcomeError)
      return unclear(write, "query timed out", error.message);
    throw error;
  }
  if (found.status === "applied") return { kind: "succeeded", output: found.output, by };
  if (found.status === "not_applied") return "not_applied";
  return unclear(write, "could not tell", "the query by key could not tell");
}

function unclear<O>(write: OutsideWrite<O>, cause: UnclearCause, words: string): Learnt<O> {
  return { kind: "unknown", cause: write.causes?.[cause] ?? words };
}

function resendSafe(
  {
    resendSafeWithinSeconds: window = 0,
    now,
  }: Pick<WriteOnce<unknown>, "resendSafeWithinSeconds" | "now">,
  record: SideEffectRecord,
): boolean {
  return window > 0 && now.getTime() - Date.parse(record.created_at) < window * 1000;
}

/** Record what was learnt (6). */
async function settle<O>(
  write: Omit<WriteOnce<O>, "receiveCount" | "learnOnly">,
  learnt: Exclude<Learnt<O>, Working>,
  attempts: number,
): Promise<WriteOutcome<O>> {
  const { ledger, key, now } = write;
  switch (learnt.kind) {
    case "succeeded":
      await ledger.markSucceeded(key, outputRecord(write).write(learnt.output), now);
      return learnt;
    case "failed":
    case "not_called":
      await ledger.markFailed(key, learnt.error, now);
      return learnt;
    case "unknown":
      return unknownOutcome(write, learnt.cause, attempts);
  }
}

/** Record an unknown outcome; below the bound throw it (the queue redelivers), at it return it. */
async function unknownOutcome<O>(
  write: Omit<WriteOnce<O>, "receiveCount" | "learnOnly">,
  cause: string,
  attempts: number,
): Promise<WriteOutcome<O>> {
  const max = write.maxUnknownAttempts ?? DEFAULT_MAX_UNKNOWN_ATTEMPTS;
  const code = write.unknownCode ?? DEFAULT_UNKNOWN_CODE;
  const message = `${write.name}: ${cause} (key ${write.key}, attempt ${attempts} of ${max})`;
  const error = { code, message };
  await write.ledger.markUnknown(write.key, error, write.now);
  if (attempts >= max) return { kind: "unknown", error, cause };
  throw new TransientError(code, message, {
    details: { key: write.key, attempts, maxUnknownAttempts: max },
  });
}

/** Work still going on: left open, or unknown (handed to a person) once past its limit. */
async function stillWorking<O>(
  write: Omit<WriteOnce<O>, "receiveCount" | "learnOnly">,
  working: Working,
  since: string,
): Promise<StillGoingOn | WriteOutcome<O>> {
  const limit = write.workingLimitSeconds ?? DEFAULT_WORKING_LIMIT_SECONDS;
  if (write.now.getTime() - Date.parse(since) < limit * 1000) return { ...working, since };
  const cause = `${working.operation} still ${working.status} ${limit} s after it was started`;
  const error = {
    code: write.unknownCode ?? DEFAULT_UNKNOWN_CODE,
    message: `${write.name}: ${cause} (key ${write.key})`,
  };
  await write.ledger.markUnknown(write.key, error, write.now);
  return { kind: "unknown", error, cause };
}

function permanentRefusal(error: unknown): SideEffectError | undefined {
  return error instanceof PermanentError ? { code: error.code, message: error.message } : undefined;
}

const AS_JSON: OutputRecord<unknown> = {
  write: (output) => ({ output_json: JSON.stringify(output) }),
  read: (result) => (result?.output_json === undefined ? null : JSON.parse(result.output_json)),
};

function outputRecord<O>(write: Pick<OutsideWrite<O>, "recorded">): OutputRecord<O> {
  return write.recorded ?? (AS_JSON as OutputRecord<O>);
}
