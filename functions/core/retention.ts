/**
 * Where AgentBus keeps personal data, for how long, and what erasing a customer does to each
 * copy: one declaration, read by the stack (every retention it deploys), the consumers (how long
 * the audit group keeps a message whole), the heartbeats (their `expires_at`), the README's
 * table (`npm run schemas` writes it, test/core/retention.test.ts checks it) and the erase
 * command (what it cannot reach, and when that expires).
 *
 * Personal data is what the event types declare in their `personal` fields, and
 * the customer ids that travel with them. Ids are opaque (schemas/ids.ts refuses a run of seven
 * digits), so an id names nobody without the data it keys: ids are kept wherever their messages
 * are, and erasure leaves them.
 */

import type { OutcomeRecord } from "./ports";

/** What erasing a customer does to a place's copies of their personal data. */
export type Erasure =
  /** Sealed under the customer's data key, which erasure deletes: reads show `[erased]` at once. */
  | "unreadable"
  /** Plain copies, overwritten with `[erased]` by `agentbus erase`. */
  | "overwritten"
  /** The customer's own item, deleted. */
  | "deleted"
  /** Cannot be reached by erasure: gone once its retention runs out. */
  | "expires";

/** One place that keeps data, and its retention. */
export interface RetentionPlace {
  /** Where it is, as the README's table names it. */
  readonly where: string;
  /** The personal data it holds; absent for a place that holds none (listed for its retention). */
  readonly holds?: string;
  /** Whole days a copy is kept, by default; absent: until the item is deleted or erased. */
  readonly days?: number;
  /**
   * The most days a deployer may set (the service's own limit), when they may set it (the CDK
   * context `agentbus:retention:<place>`, lib/infra/retention.ts); absent: not settable.
   */
  readonly maxDays?: number;
  /** What erasing the customer does to the copies here; absent without `holds`. */
  readonly erasure?: Erasure;
}

/**
 * Every place, keyed by a stable name. The order is the README table's. Days follow the
 * services' defaults where a place has one (SQS keeps a message 4 days).
 */
export const RETENTION = {
  conversationState: {
    where: "the conversation's state item (state table)",
    holds: "the conversation's messages (`text`, the last 50, at most 192 KB)",
    erasure: "overwritten",
  },
  conversationView: {
    where: "the conversation view (state table)",
    holds: "each accepted message's `text` and each reply's text",
    erasure: "overwritten",
  },
  replyState: {
    where:
      "the reply's state item, and the sender's state of a send whose outcome is unknown (state table)",
    holds: "the reply's text",
    erasure: "overwritten",
  },
  agentRuns: {
    where:
      "the refund agent's runs of the customer's turns: their journal and the messages they stored (state table)",
    holds:
      "what the model was given and answered (the customer's messages among it), the tools' inputs and answers",
    erasure: "overwritten",
  },
  eventStore: {
    where: "the event store (events table)",
    holds: "every personal field of the events on streams (the list below), sealed",
    erasure: "unreadable",
  },
  auditMessages: {
    where: "the audit group's inbox rows of messages from outside a stream (inbox table)",
    holds:
      "each such message whole, its personal fields sealed: the client's `conversation.message.received` (`text`), an operator's `reply.approve.requested` (its edited `text`) and `reason`s",
    days: 30,
    maxDays: 3650,
    erasure: "unreadable",
  },
  acceptedRequests: {
    where: "the front door's accepted requests (state table)",
    holds:
      "the message of each request sent with an `Idempotency-Key`, whole, its personal fields sealed",
    days: 1,
    erasure: "unreadable",
  },
  archive: {
    where: "each bus's archive",
    holds: "every event as published, its personal fields sealed",
    days: 30,
    maxDays: 36_500,
    erasure: "unreadable",
  },
  subscriberBus: {
    where: 'each new EventBridge bus of a topic that a group with `delivery: "subscriber"` reads',
    holds: "every event as published, its personal fields sealed",
    days: 14,
    maxDays: 365,
    erasure: "unreadable",
  },
  queues: {
    where: "the consumer groups' queues and buffer queues",
    holds: "the events each group has not handled yet, personal fields sealed",
    days: 4,
    maxDays: 14,
    erasure: "unreadable",
  },
  deadLetterQueues: {
    where: "the dead-letter queues",
    holds: "the events a group gave up on, personal fields sealed",
    days: 14,
    maxDays: 14,
    erasure: "unreadable",
  },
  clientMessages: {
    where:
      "each bus's archive, the queues and the dead-letter queues: a message a client put on a bus itself (with IAM, not through the front door)",
    holds: "the message as the client wrote it, its personal fields in plain text",
    days: 30,
    erasure: "expires",
  },
  backups: {
    where: "the tables' point-in-time recovery",
    holds: "every table item as it was, up to the recovery window",
    days: 35,
    maxDays: 35,
    erasure: "expires",
  },
  customerKeys: {
    where: "the customer-keys table",
    holds: "each customer's data key, wrapped (no personal data in clear)",
    erasure: "deleted",
  },
  functionLogs: {
    where: "the functions' log groups",
    holds: "ids (of events, conversations, tasks) and error codes: no payload text",
    days: 30,
    maxDays: 3653,
    erasure: "expires",
  },
  accessLog: {
    where: "the front door's access log",
    holds: "each request's source IP address and token subject (`sub`), no body",
    days: 30,
    maxDays: 3653,
    erasure: "expires",
  },
  inboxRows: {
    where: "the consumer groups' inbox rows (each group's outcome of each event)",
    days: 7,
  },
  heartbeats: {
    where: "heartbeats (`node.heartbeat`, `node.started`) on their way to the run they report on",
    days: 1,
  },
} as const satisfies Readonly<Record<string, RetentionPlace>>;

/** The name of a place in RETENTION. */
export type RetentionPlaceName = keyof typeof RETENTION;

/** A place that is kept for a number of days. */
export type ExpiringPlaceName = {
  [K in RetentionPlaceName]: (typeof RETENTION)[K] extends { readonly days: number } ? K : never;
}[RetentionPlaceName];

/** A place whose retention a deployer may set. */
export type SettablePlaceName = {
  [K in RetentionPlaceName]: (typeof RETENTION)[K] extends { readonly maxDays: number } ? K : never;
}[RetentionPlaceName];

const SECONDS_PER_DAY = 24 * 3600;

/** A place with its name in RETENTION. */
export type NamedRetentionPlace = RetentionPlace & { readonly name: RetentionPlaceName };

/** Each place with its name, in the declaration's order. */
export function retentionPlaces(): readonly NamedRetentionPlace[] {
  return (Object.keys(RETENTION) as RetentionPlaceName[]).map((name) => ({
    name,
    ...(RETENTION[name] as RetentionPlace),
  }));
}

/** The default days a place is kept. */
export function retentionDays(place: ExpiringPlaceName): number {
  return RETENTION[place].days;
}

/** The default seconds a place is kept. */
export function retentionSeconds(place: ExpiringPlaceName): number {
  return RETENTION[place].days * SECONDS_PER_DAY;
}

/**
 * What erasure cannot reach and when each expires: the places whose copies are gone only when
 * their retention runs out (the erase command lists them), each with its days: the default, or
 * what `deployed` says a stack was deployed with (e.g. its archive's `RetentionDays`).
 */
export function unreachableByErasure(
  deployed: Partial<Readonly<Record<SettablePlaceName, number>>> = {},
): readonly { readonly name: RetentionPlaceName; readonly where: string; readonly days: number }[] {
  return retentionPlaces().flatMap(({ name, where, days, erasure }) => {
    if (erasure !== "expires" || days === undefined) return [];
    return [{ name, where, days: deployed[name as SettablePlaceName] ?? days }];
  });
}

/**
 * Why `days` cannot be a place's retention (a deployer's setting), or undefined when it can:
 * whole days, at least one, at most the place's `maxDays`.
 */
export function retentionProblem(place: RetentionPlaceName, days: number): string | undefined {
  const { maxDays } = RETENTION[place] as RetentionPlace;
  if (maxDays === undefined) return `the retention of ${place} cannot be set`;
  if (!Number.isInteger(days) || days < 1 || days > maxDays)
    return `the retention of ${place} must be a whole number of days from 1 to ${maxDays}, not ${days}`;
  return undefined;
}

/**
 * A recorded outcome as it is read at `now`: a message kept whole (InboxRecord.envelope) whose row
 * has expired is read without it. TTL deletes an expired row lazily, some time later; the
 * message's retention is over at once, so the outcome still reads, the message no longer.
 */
export function withinRetention<R extends OutcomeRecord>(record: R, now: Date): R {
  if (!("envelope" in record) || record.envelope === undefined) return record;
  if (record.expiresAt * 1000 > now.getTime()) return record;
  const { envelope: _past, ...outcome } = record;
  return outcome as R;
}
