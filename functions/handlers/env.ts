import * as z from "../../schemas/zod";

/** Parse a handler's environment once, with a message that names every bad or missing variable. */
export function parseEnv<T extends z.ZodMiniType>(
  schema: T,
  env: Record<string, string | undefined>,
  what: string,
): z.output<T> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new Error(`${what}: invalid environment\n${z.prettifyError(result.error)}`);
  }
  return result.data;
}

export const ConsumerEnv = z.object({
  GROUP_NAME: z.string().check(z.minLength(1)),
  STATE_TABLE: z.string().check(z.minLength(1)),
  EVENTS_TABLE: z.string().check(z.minLength(1)),
  INBOX_TABLE: z.string().check(z.minLength(1)),
  SIDE_EFFECTS_TABLE: z.optional(z.string().check(z.minLength(1))),
  QUEUE_URL: z.url(),
  DEAD_LETTER_QUEUE_URL: z.url(),
  INBOX_TTL_DAYS: z._default(z.coerce.number().check(z.positive()), 7),
  RETRY_BASE_SECONDS: z._default(z.coerce.number().check(z.int(), z.minimum(0)), 2),
  RETRY_MAX_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(0), z.maximum(43_199)),
    300,
  ),
  /**
   * While a record is being handled, every this many seconds its message visibility is extended
   * and the role's heartbeat (if any) is published; unset or 0 = no heartbeat.
   */
  HEARTBEAT_SECONDS: z._default(z.coerce.number().check(z.minimum(0), z.maximum(43_199)), 0),
  /** What each heartbeat sets the message's visibility timeout to (the queue's). */
  VISIBILITY_TIMEOUT_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(43_200)),
    300,
  ),
  /** The events topic's bus, where heartbeats are published. */
  EVENTS_BUS_NAME: z.optional(z.string().check(z.minLength(1))),
  /**
   * "true" while a stack that kept checkpoints in rows of the inbox table upgrades: the event
   * store reads those rows too (DynamoEventStoreOptions.legacyCheckpoints).
   */
  LEGACY_CHECKPOINTS: z.pipe(
    z._default(z.enum(["true", "false"]), "false"),
    z.transform((v) => v === "true"),
  ),
});
export type ConsumerEnv = z.output<typeof ConsumerEnv>;

export const DispatchEnv = z.object({
  GROUP_NAME: z.string().check(z.minLength(1)),
  TARGET_QUEUE_URL: z.url(),
  DEAD_LETTER_QUEUE_URL: z.url(),
  /** The buffer queue: records that could not be sent come back after a backoff set on it. */
  SOURCE_QUEUE_URL: z.optional(z.url()),
  RETRY_BASE_SECONDS: z._default(z.coerce.number().check(z.int(), z.minimum(0)), 2),
  RETRY_MAX_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(0), z.maximum(43_199)),
    300,
  ),
  /** Where a dead letter's failure record goes (for tracing); none recorded when absent. */
  INBOX_TABLE: z.optional(z.string().check(z.minLength(1))),
  INBOX_TTL_DAYS: z._default(z.coerce.number().check(z.positive()), 7),
});
export type DispatchEnv = z.output<typeof DispatchEnv>;

/** The relay reads one `BUS_<TOPIC>` variable per topic present in the stack. */
export const RelayEnv = z
  .object({
    BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_EVENTS: z.optional(z.string().check(z.minLength(1))),
    BUS_AUDIT: z.optional(z.string().check(z.minLength(1))),
  })
  .check(
    z.refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS || e.BUS_AUDIT, {
      message: "at least one BUS_<TOPIC> must be set",
    }),
  );
export type RelayEnv = z.output<typeof RelayEnv>;

/** Agent group -> queue URL, as a JSON object (the orchestrator's queue-depth gate). */
const QueueUrls = z.pipe(
  z.pipe(
    z.string(),
    z.transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.issues.push({
          code: "custom",
          message: "must be a JSON object of group -> queue URL",
          input: text,
        });
        return z.NEVER;
      }
    }),
  ),
  z.record(z.string().check(z.minLength(1)), z.url()),
);

/** The orchestrator's own settings, on top of ConsumerEnv. */
export const OrchestratorEnv = z.object({
  /** Without it there is no queue-depth gate. */
  AGENT_QUEUE_URLS: z.optional(QueueUrls),
  QUEUE_DEPTH_THRESHOLD: z.optional(z.coerce.number().check(z.int(), z.minimum(1))),
  /** Lease of a node whose agent has started on it, in seconds. */
  ORCHESTRATOR_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How long a request may wait in its agent's queue before its outcome counts as unknown. */
  ORCHESTRATOR_QUEUED_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How many times an assignment whose lease ran out is sent again before its node fails. */
  ORCHESTRATOR_LEASE_REDELIVERIES: z.optional(z.coerce.number().check(z.int(), z.minimum(0))),
  /** How long a node may wait for its inputs when its workflow does not say, in seconds. */
  ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS: z.optional(
    z.coerce.number().check(z.int(), z.positive()),
  ),
});
export type OrchestratorEnv = z.output<typeof OrchestratorEnv>;

/** The lease sweeper: the state table (and its by-due index) and the buses it reports on. */
export const SweeperEnv = z
  .object({
    STATE_TABLE: z.string().check(z.minLength(1)),
    BUS_COMMANDS: z.optional(z.string().check(z.minLength(1))),
    BUS_EVENTS: z.optional(z.string().check(z.minLength(1))),
    /** Most due aggregates handled per invocation. */
    SWEEP_LIMIT: z._default(z.coerce.number().check(z.int(), z.minimum(1), z.maximum(1000)), 100),
  })
  .check(
    z.refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS, {
      message: "at least one BUS_<TOPIC> must be set",
    }),
  );
export type SweeperEnv = z.output<typeof SweeperEnv>;
