import * as z from "../../schemas/zod";
import type { Clock } from "../core/ports";
import { ALL_FEATURES, type Feature } from "../roles/features";

/**
 * Admission by backlog (seed 000 §11.1: when work arrives faster than it is done, the queue
 * grows, `Q(t+1) = max(0, Q(t) + λ − μ)`): before the front door accepts a customer's message or
 * a run's start, it looks at the queues of the consumer groups that work would enter (the groups
 * that do the feature's work, not the audit group: ../roles/stack-features.ts), and when one of
 * them holds more than `threshold` messages (waiting and in flight, its FIFO queue and its
 * buffer together) it answers 429 `backlog` with `Retry-After` the seconds that group needs to
 * work the excess off at `drainPerSecond`, rather than take work it cannot start soon.
 *
 * Each queue's depth is read at most once per `cacheSeconds` per function instance (SQS
 * GetQueueAttributes). A depth that cannot be read counts as unknown and admits (fail open: the
 * gate never refuses all traffic because SQS did not answer); the failure is reported
 * (`onUnread`, the function's `FrontDoorBacklogUnread` metric) and is itself kept for
 * `cacheSeconds`, so an outage costs no more calls than a healthy queue.
 */

/** The features whose work the front door starts: customers' messages and workflow runs. */
export const ENTRY_FEATURES = ["conversations", "runs"] as const satisfies readonly Feature[];

/** The queues of the groups each feature's work enters: group -> its queue URLs. */
export type BacklogQueues = Partial<Record<Feature, Readonly<Record<string, readonly string[]>>>>;

/** `BacklogQueues` as the function's `BACKLOG_QUEUES` has it (JSON), checked. */
export const BacklogQueuesJson = z.partialRecord(
  z.enum(ALL_FEATURES as [Feature, ...Feature[]]),
  z.record(z.string().check(z.minLength(1)), z.array(z.string().check(z.minLength(1)))),
);

export interface BacklogSettings {
  /** Messages (waiting and in flight) in one group's queues above which new work is refused. */
  readonly threshold: number;
  /** Messages a group is taken to work off per second: `Retry-After` is the excess over this. */
  readonly drainPerSecond: number;
  /** How long a queue's depth is reused before it is read again. */
  readonly cacheSeconds: number;
}

export const DEFAULT_BACKLOG: BacklogSettings = {
  threshold: 300,
  drainPerSecond: 5,
  cacheSeconds: 5,
};

/** The longest `Retry-After` a backlog gives, however deep the queue. */
export const MAX_BACKLOG_RETRY_AFTER_SECONDS = 300;

/** A queue's messages, waiting and in flight; throws when the queue cannot be read. */
export type QueueDepthReader = (queueUrl: string) => Promise<number>;

export interface BacklogRefusal {
  readonly code: "backlog";
  readonly detail: string;
  readonly retryAfterSeconds: number;
}

/**
 * The decision, from each group's depth: refused when the deepest group holds more than the
 * threshold (at the threshold, admitted), told to come back when that group would be back at it.
 */
export function backlogRefusal(
  depths: Readonly<Record<string, number>>,
  settings: Pick<BacklogSettings, "threshold" | "drainPerSecond">,
): BacklogRefusal | undefined {
  const [group, depth] = Object.entries(depths).reduce<[string, number]>(
    (deepest, entry) => (entry[1] > deepest[1] ? entry : deepest),
    ["", 0],
  );
  if (depth <= settings.threshold) return undefined;
  const seconds = Math.ceil((depth - settings.threshold) / settings.drainPerSecond);
  const retryAfterSeconds = Math.min(MAX_BACKLOG_RETRY_AFTER_SECONDS, Math.max(1, seconds));
  return {
    code: "backlog",
    detail: `consumer group ${group} has ${depth} messages queued, over its ${settings.threshold}: new work would wait; send it again after Retry-After`,
    retryAfterSeconds,
  };
}

export interface BacklogGateOptions {
  readonly queues: BacklogQueues;
  readonly read: QueueDepthReader;
  readonly clock: Clock;
  readonly settings?: Partial<BacklogSettings>;
  /** Told of each read that failed (the depth then counts as unknown, and admits). */
  readonly onUnread?: (queueUrl: string, error: unknown) => void;
}

/** The front door's backlog check: the depths of a feature's groups, cached, and the decision. */
export class BacklogGate {
  private readonly settings: BacklogSettings;
  /** Each queue's depth as last read (undefined: the read failed) and when. */
  private readonly cache = new Map<string, { readonly at: number; readonly depth?: number }>();

  constructor(private readonly options: BacklogGateOptions) {
    this.settings = { ...DEFAULT_BACKLOG, ...options.settings };
  }

  /** Why new work of `feature` is refused now, or undefined when its groups can take it. */
  async refusal(feature: Feature): Promise<BacklogRefusal | undefined> {
    const groups = Object.entries(this.options.queues[feature] ?? {});
    if (groups.length === 0) return undefined;
    const depths = await Promise.all(
      groups.map(async ([group, urls]) => {
        const each = await Promise.all(urls.map((url) => this.depthOf(url)));
        const depth = each.reduce<number>((sum, one) => sum + (one ?? 0), 0);
        return [group, depth] as const;
      }),
    );
    return backlogRefusal(Object.fromEntries(depths), this.settings);
  }

  private async depthOf(url: string): Promise<number | undefined> {
    const now = this.options.clock.now().getTime();
    const kept = this.cache.get(url);
    if (kept && now - kept.at < this.settings.cacheSeconds * 1000) return kept.depth;
    let depth: number | undefined;
    try {
      depth = await this.options.read(url);
    } catch (error) {
      this.options.onUnread?.(url, error);
    }
    this.cache.set(url, { at: now, ...(depth === undefined ? {} : { depth }) });
    return depth;
  }
}
