/**
 * Every failure carries a dotted code and a class; the class decides what happens to the message:
 * - transient: retry later with backoff (visibility timeout), up to the queue's max receive count;
 * - permanent: the input can never succeed -> straight to the DLQ with the reason, no retries;
 * - business: the request was understood and refused -> a failure event is committed, no retry;
 * - unknown_outcome: a side effect may or may not have happened -> query by its idempotency key,
 *   never mint a new key.
 */
export type ErrorClass = "transient" | "permanent" | "business" | "unknown_outcome";

export class AgentBusError extends Error {
  readonly code: string;
  readonly errorClass: ErrorClass;
  readonly details: Record<string, unknown>;

  constructor(
    errorClass: ErrorClass,
    code: string,
    message: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.errorClass = errorClass;
    this.details = options.details ?? {};
  }
}

export class TransientError extends AgentBusError {
  constructor(
    code: string,
    message: string,
    options?: { cause?: unknown; details?: Record<string, unknown> },
  ) {
    super("transient", code, message, options);
  }
}

export class PermanentError extends AgentBusError {
  constructor(
    code: string,
    message: string,
    options?: { cause?: unknown; details?: Record<string, unknown> },
  ) {
    super("permanent", code, message, options);
  }
}

export class UnknownOutcomeError extends AgentBusError {
  constructor(
    code: string,
    message: string,
    options?: { cause?: unknown; details?: Record<string, unknown> },
  ) {
    super("unknown_outcome", code, message, options);
  }
}

/** Raised by a role to refuse a request; the pipeline commits `failure` instead of retrying. */
export class BusinessRejection extends AgentBusError {
  readonly failure: { type: string; payload: unknown };
  constructor(code: string, message: string, failure: { type: string; payload: unknown }) {
    super("business", code, message);
    this.failure = failure;
  }
}

/** Commit refused because the inbox already holds this (group, event id). */
export class DuplicateCommitError extends AgentBusError {
  constructor(message = "the inbox already holds this event for this consumer group") {
    super("transient", "commit.duplicate", message);
  }
}

/** Commit refused because a state revision, stream version or checkpoint moved meanwhile. */
export class VersionConflictError extends AgentBusError {
  readonly conflict: "state" | "stream" | "checkpoint";
  constructor(
    conflict: "state" | "stream" | "checkpoint",
    message: string,
    options?: { cause?: unknown },
  ) {
    super("transient", `commit.${conflict}_conflict`, message, options);
    this.conflict = conflict;
  }
}

export function classify(error: unknown): ErrorClass {
  return error instanceof AgentBusError ? error.errorClass : "transient";
}

/** What is said of a failure in logs, dead letters and reports. */
export interface ErrorInfo {
  readonly code: string;
  readonly errorClass: ErrorClass;
  readonly message: string;
}

export function describe(error: unknown): ErrorInfo {
  if (error instanceof AgentBusError)
    return { code: error.code, errorClass: error.errorClass, message: error.message };
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return { code: "unexpected", errorClass: "transient", message };
}
