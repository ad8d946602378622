import { setMaxListeners } from "node:events";
import type { Report } from "./events";

/**
 * Pause of a loop after a failed call to the emulator before it tries again: every loop reports a
 * failure and carries on (one that ended would leave its queue or stream unread for good).
 */
export const RETRY_AFTER_FAILURE_MS = 500;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * What every loop of the runtime shares: whether the runtime is stopping (and one abort signal for
 * every long poll: dozens listen at once), what is in flight and when anything last happened
 * (what `idle()` waits for), which stream shards have records not yet handled, and where to
 * report.
 */
export class Activity {
  private stopping = false;
  private readonly controller = new AbortController();
  private inflight = 0;
  private lastActivity = Date.now();
  /** Stream shards, as each mapping reads them, whose last read returned records. */
  readonly streamBehind = new Set<string>();
  /** When each stream shard's latest read that found nothing new began (ms since the epoch). */
  private readonly readUp = new Map<string, number>();

  constructor(readonly report: Report) {
    setMaxListeners(0, this.controller.signal);
  }

  get stopped(): boolean {
    return this.stopping;
  }

  /** Aborted on stop: long polls in progress end then instead of after their wait time. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  stop(): void {
    this.stopping = true;
    this.controller.abort();
  }

  /** Run work counted as in flight. */
  async track<T>(work: () => Promise<T>): Promise<T> {
    this.inflight++;
    this.touch();
    try {
      return await work();
    } finally {
      this.inflight--;
      this.touch();
    }
  }

  /** Something happened (idle waits for quiet after it). */
  touch(): void {
    this.lastActivity = Date.now();
  }

  /** When anything last happened (to tell whether something did meanwhile). */
  get lastActive(): number {
    return this.lastActivity;
  }

  /** A stream shard that must be read up after the last activity before the runtime is quiet. */
  shardOpened(shard: string): void {
    if (!this.readUp.has(shard)) this.readUp.set(shard, 0);
  }

  /**
   * A read of the shard, begun at `startedAt`, found nothing new (or the shard is held back or
   * closed: `Infinity`, nothing to wait for).
   */
  shardReadUp(shard: string, startedAt: number): void {
    this.readUp.set(shard, startedAt);
  }

  /**
   * Nothing in flight, every shard read up by a read begun after the last activity (so the stream
   * record of a commit that ended just before cannot still be on its way), and nothing happened
   * for `quietMs`.
   */
  quiet(quietMs: number): boolean {
    if (this.inflight !== 0 || this.streamBehind.size !== 0) return false;
    if (Date.now() - this.lastActivity <= quietMs) return false;
    for (const startedAt of this.readUp.values()) if (startedAt <= this.lastActivity) return false;
    return true;
  }

  /** Report a failed call (`call: error`) of a loop, then pause before it tries again. */
  async failed(name: string, call: string, error: unknown): Promise<void> {
    this.report({ kind: "invocation-failed", function: name, error: `${call}: ${String(error)}` });
    await sleep(RETRY_AFTER_FAILURE_MS);
  }

  /**
   * A loop reports its failures and carries on until stopped; should one still end with an
   * error, that is reported too instead of going unnoticed until `stop()`.
   */
  reportEnd(name: string, loop: Promise<void>): Promise<void> {
    return loop.catch((error: unknown) => {
      this.report({
        kind: "invocation-failed",
        function: name,
        error: `stopped polling: ${String(error)}`,
      });
    });
  }
}
