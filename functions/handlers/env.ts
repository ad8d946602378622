import { TOPICS } from "../../schemas";
import * as z from "../../schemas/zod";
import { HEARTBEAT_TARGETS_ENV } from "../core/heartbeat-routes";
import { DEFAULT_MODEL_BUDGETS, type ModelBudgets } from "../core/model-guard";
import { packedJsonText } from "../core/packed-json";
import { retentionDays } from "../core/retention";

/**
 * A group whose queue a function sends to straight, as the stack names it (../core/direct-delivery.ts
 * `DirectGroup`): the relay's `DIRECT_GROUPS`, a beating consumer's `HEARTBEAT_TARGETS`.
 */
export const DirectGroupJson = z.object({
  group: z.string().check(z.minLength(1)),
  /** The queue's name: its URL is that of a queue the function knows, with this name. */
  queue: z.string().check(z.minLength(1)),
  /** The group's tenant lanes (`tenantConcurrency`), when it has them. */
  tenantConcurrency: z.optional(z.number().check(z.int(), z.minimum(1))),
  rules: z.partialRecord(z.enum(TOPICS), z.unknown()),
});

/** The URL of the queue named `name` beside the queue at `url` (same account and Region). */
export function queueUrlBeside(url: string, name: string): string {
  return `${url.slice(0, url.lastIndexOf("/") + 1)}${name}`;
}

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
   * and the role's heartbeat (if any) is published, each when it is due (./heartbeat.ts: once half
   * of what it last bought has passed); unset or 0 = no heartbeat.
   */
  HEARTBEAT_SECONDS: z._default(z.coerce.number().check(z.minimum(0), z.maximum(43_199)), 0),
  /** What each heartbeat sets the message's visibility timeout to (the queue's). */
  VISIBILITY_TIMEOUT_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(43_200)),
    300,
  ),
  /**
   * The events topic's bus, where heartbeats are published: set only when a group fed by the bus
   * takes one (../core/heartbeat-routes.ts).
   */
  EVENTS_BUS_NAME: z.optional(z.string().check(z.minLength(1))),
  /**
   * The groups heartbeats are sent to straight, each queue beside QUEUE_URL: JSON (compressed
   * when long), an array of { group, queue, tenantConcurrency?, rules, unordered? }, from the stack.
   */
  [HEARTBEAT_TARGETS_ENV]: z.optional(
    packedJsonText(
      z.array(z.extend(DirectGroupJson, { unordered: z.optional(z.literal(true)) })),
      "a JSON array of { group, queue, tenantConcurrency?, rules, unordered? }",
    ),
  ),
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
