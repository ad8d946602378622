import { z } from "zod";

/** Parse a handler's environment once, with a message that names every bad or missing variable. */
export function parseEnv<T extends z.ZodType>(
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
  GROUP_NAME: z.string().min(1),
  STATE_TABLE: z.string().min(1),
  EVENTS_TABLE: z.string().min(1),
  INBOX_TABLE: z.string().min(1),
  SIDE_EFFECTS_TABLE: z.string().min(1).optional(),
  QUEUE_URL: z.string().url(),
  DEAD_LETTER_QUEUE_URL: z.string().url(),
  INBOX_TTL_DAYS: z.coerce.number().positive().default(7),
  RETRY_BASE_SECONDS: z.coerce.number().int().min(0).default(2),
  RETRY_MAX_SECONDS: z.coerce.number().int().min(0).max(43_199).default(300),
});
export type ConsumerEnv = z.output<typeof ConsumerEnv>;

export const DispatchEnv = z.object({
  GROUP_NAME: z.string().min(1),
  TARGET_QUEUE_URL: z.string().url(),
  DEAD_LETTER_QUEUE_URL: z.string().url(),
});
export type DispatchEnv = z.output<typeof DispatchEnv>;

/** The relay reads one `BUS_<TOPIC>` variable per topic present in the stack. */
export const RelayEnv = z
  .object({
    BUS_COMMANDS: z.string().min(1).optional(),
    BUS_EVENTS: z.string().min(1).optional(),
    BUS_AUDIT: z.string().min(1).optional(),
  })
  .refine((e) => e.BUS_COMMANDS || e.BUS_EVENTS || e.BUS_AUDIT, {
    message: "at least one BUS_<TOPIC> must be set",
  });
export type RelayEnv = z.output<typeof RelayEnv>;
