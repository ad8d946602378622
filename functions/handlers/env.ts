import * as z from "../../schemas/zod";
import { DEFAULT_MODEL_BUDGETS, type ModelBudgets } from "../core/model-guard";
import { retentionDays } from "../core/retention";

export const ConsumerEnv = z.object({
  GROUP_NAME: z.string().check(z.minLength(1)),
  STATE_TABLE: z.string().check(z.minLength(1)),
  EVENTS_TABLE: z.string().check(z.minLength(1)),
  INBOX_TABLE: z.string().check(z.minLength(1)),
  SIDE_EFFECTS_TABLE: z.optional(z.string().check(z.minLength(1))),
  QUEUE_URL: z.url(),
  DEAD_LETTER_QUEUE_URL: z.url(),
  INBOX_TTL_DAYS: z._default(z.coerce.number().check(z.positive()), retentionDays("inboxRows")),
  /** How long a group that keeps messages (audit) keeps one whole; set on that group only. */
  KEPT_MESSAGE_DAYS: z._default(
    z.coerce.number().check(z.positive()),
    retentionDays("auditMessages"),
  ),
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

const positive = z.coerce.number().check(z.positive());

/**
 * The model budgets (functions/core/model-guard.ts) as the stack sets them on every function that
 * calls a model or admits work (`ModelBudgets`; each unset one is DEFAULT_MODEL_BUDGETS').
 */
export const ModelBudgetEnv = z.object({
  MODEL_RUN_MAX_TOKENS: z._default(positive, DEFAULT_MODEL_BUDGETS.run.tokens),
  MODEL_RUN_MAX_USD: z._default(positive, DEFAULT_MODEL_BUDGETS.run.usd),
  MODEL_TENANT_DAY_MAX_TOKENS: z._default(positive, DEFAULT_MODEL_BUDGETS.tenantDay.tokens),
  MODEL_TENANT_DAY_MAX_USD: z._default(positive, DEFAULT_MODEL_BUDGETS.tenantDay.usd),
  MODEL_TENANT_CALLS_PER_MINUTE: z._default(
    z.coerce.number().check(z.int(), z.positive()),
    DEFAULT_MODEL_BUDGETS.tenantCallsPerMinute,
  ),
});

/** The budgets the environment sets. */
export function budgetsOf(env: z.output<typeof ModelBudgetEnv>): ModelBudgets {
  return {
    run: { tokens: env.MODEL_RUN_MAX_TOKENS, usd: env.MODEL_RUN_MAX_USD },
    tenantDay: { tokens: env.MODEL_TENANT_DAY_MAX_TOKENS, usd: env.MODEL_TENANT_DAY_MAX_USD },
    tenantCallsPerMinute: env.MODEL_TENANT_CALLS_PER_MINUTE,
  };
}
