import type * as z from "../../../schemas/zod";
import type { CommandStream, ModelPort, TypedDecision } from "../../kit";
import {
  type AgentRun,
  DEFAULT_CONFIRM_SECONDS,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_ATTEMPTS,
  MAX_HEARTBEAT_LEASE_SECONDS,
  PermanentError,
} from "../../kit";
import {
  CONTENT_ROLE_EVENTS,
  type ContentEventTypes,
  type ContentRole,
  type ContentStem,
  contentEventTypes,
} from "./events";

/** A content agent's options, and its settings checked and resolved once when it is created. */

/**
 * The commands a content agent takes and what it emits, as the types of the four agents together:
 * which agent is known at run time only (its subscriptions and `types` are its own).
 */
export type ContentCommand =
  | ContentEventTypes["requested" | "cancel"]
  | `${ContentStem}.confirm.requested`;
export type ContentAnswer = ContentEventTypes["completed" | "failed"] | "node.blocked";
export type ContentDecision = TypedDecision<AgentRun, ContentAnswer>;

export interface ContentAgentOptions {
  readonly role: ContentRole;
  readonly model: ModelPort;
  /** Attempts of one agent run in total: redeliveries and corrected model replies. @default 3 */
  readonly maxModelAttempts?: number;
  /** Lease of the RUNNING agent run, in seconds. @default DEFAULT_LEASE_SECONDS */
  readonly leaseSeconds?: number;
  /** Cap on the model's answer. @default 2048 */
  readonly maxTokens?: number;
  /** The event store, to find a request's cancel behind it on the run's stream. @default none */
  readonly commandStream?: CommandStream;
  /** How long a BLOCKED agent run waits for its confirmation, in seconds.
   * @default DEFAULT_CONFIRM_SECONDS */
  readonly confirmSeconds?: number;
}

/** One content agent's settings, checked and resolved once when the agent is created. */
export interface ContentAgent {
  readonly role: ContentRole;
  readonly model: ModelPort;
  readonly maxAttempts: number;
  readonly leaseSeconds: number;
  readonly heartbeatLease: number;
  readonly maxTokens: number;
  /** What the model's answer must fit (the role's `answer` schema). */
  readonly outputSchema: z.ZodMiniType<unknown>;
  readonly types: ReturnType<typeof contentEventTypes>;
  readonly commandStream: CommandStream | undefined;
  readonly confirmSeconds: number;
}

export function resolveAgent(options: ContentAgentOptions): ContentAgent {
  const { role, model } = options;
  const maxAttempts = options.maxModelAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new PermanentError(
      "agent.invalid_option",
      `maxModelAttempts must be a positive integer, got ${maxAttempts}`,
    );
  const entry = CONTENT_ROLE_EVENTS[role];
  if (!entry) throw new PermanentError("agent.unknown_role", `no content role ${role}`);
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  return {
    role,
    model,
    maxAttempts,
    leaseSeconds,
    heartbeatLease: Math.min(MAX_HEARTBEAT_LEASE_SECONDS, Math.max(1, Math.round(leaseSeconds))),
    maxTokens: options.maxTokens ?? 2048,
    outputSchema: entry.answer,
    types: contentEventTypes(role),
    commandStream: options.commandStream,
    confirmSeconds: positive(options.confirmSeconds ?? DEFAULT_CONFIRM_SECONDS, "confirmSeconds"),
  };
}

function positive(value: number, name: string): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new PermanentError("agent.invalid_option", `${name} must be positive, got ${value}`);
  return value;
}
