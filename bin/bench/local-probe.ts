import { readFileSync } from "node:fs";

/**
 * What the local stack's SDK clients do, seen from inside the process: every call is counted by
 * operation, calls in flight are tracked per service, and the first time an event id is seen at a
 * point of its path (a stream read, a PutEvents, a receive or send on a queue) is time-stamped.
 * The probe is an `initialize` middleware on the clients the handlers and the runtime share, so it
 * sees exactly their calls and adds no request of its own.
 */

/** The middleware stack as the probe uses it (every SDK v3 client has one). */
interface ProbeStack {
  add(
    middleware: (
      next: (args: { input: unknown }) => Promise<{ output: unknown }>,
      context: { commandName?: string },
    ) => (args: { input: unknown }) => Promise<{ output: unknown }>,
    options: { step: "initialize"; name: string },
  ): void;
}

export interface Probed {
  readonly middlewareStack: unknown;
}

const EVENT_ID = /\\?"event_id\\?"\s*:\s*\\?"([0-9A-Za-z_-]+)/;

/** The event id of an envelope, an EventBridge event or a stream image, without parsing it. */
export function eventIdIn(text: string | undefined): string | undefined {
  return text ? EVENT_ID.exec(text)?.[1] : undefined;
}

const queueName = (url: unknown) =>
  String(url ?? "")
    .split("/")
    .at(-1) ?? "";

export class WireProbe {
  private readonly calls = new Map<string, number>();
  private readonly busy = new Map<string, number>();
  private readonly inflight = new Map<string, number>();
  private readonly peak = new Map<string, number>();
  /** event id -> point -> first time (performance.now()) it was seen there. */
  readonly marks = new Map<string, Map<string, number>>();

  attach(service: string, client: Probed): void {
    (client.middlewareStack as ProbeStack).add(
      (next, context) => async (args) => {
        const op = `${service}.${(context.commandName ?? "?").replace(/Command$/, "")}`;
        this.calls.set(op, (this.calls.get(op) ?? 0) + 1);
        const now = (this.inflight.get(service) ?? 0) + 1;
        this.inflight.set(service, now);
        if (now > (this.peak.get(service) ?? 0)) this.peak.set(service, now);
        this.onRequest(op, args.input);
        const started = performance.now();
        try {
          const result = await next(args);
          this.onResponse(op, args.input, result.output);
          return result;
        } finally {
          this.busy.set(op, (this.busy.get(op) ?? 0) + performance.now() - started);
          this.inflight.set(service, (this.inflight.get(service) ?? 1) - 1);
        }
      },
      { step: "initialize", name: `benchProbe-${service}` },
    );
  }

  mark(eventId: string | undefined, point: string, at = performance.now()): void {
    if (!eventId) return;
    let points = this.marks.get(eventId);
    if (!points) {
      points = new Map();
      this.marks.set(eventId, points);
    }
    if (!points.has(point)) points.set(point, at);
  }

  /** Calls per operation so far (a copy, to diff two moments). */
  counts(): Map<string, number> {
    return new Map(this.calls);
  }

  /** Milliseconds spent in calls per operation so far (a copy, to diff two moments). */
  durations(): Map<string, number> {
    return new Map(this.busy);
  }

  /** Most calls a service had in flight at once since the last reset. */
  peakInflight(service: string): number {
    return this.peak.get(service) ?? 0;
  }

  resetPeaks(): void {
    this.peak.clear();
  }

  private onRequest(op: string, input: unknown): void {
    if (op === "eventbridge.PutEvents") {
      const entries = (input as { Entries?: { Detail?: string }[] }).Entries ?? [];
      for (const e of entries) this.mark(eventIdIn(e.Detail), "put-events");
    } else if (op === "sqs.SendMessageBatch" || op === "sqs.SendMessage") {
      // The send's start: a consumer's long poll can return the message before the send's
      // response reaches the sender, so a hop to the consumer is timed from here.
      const url = (input as { QueueUrl?: string }).QueueUrl;
      for (const body of messageBodies(input))
        this.mark(eventIdIn(body), `sending:${queueName(url)}`);
    }
  }

  private onResponse(op: string, input: unknown, output: unknown): void {
    const at = performance.now();
    const url = (input as { QueueUrl?: string }).QueueUrl;
    if (op === "sqs.ReceiveMessage") {
      for (const m of (output as { Messages?: { Body?: string }[] }).Messages ?? [])
        this.mark(eventIdIn(m.Body), `received:${queueName(url)}`, at);
    } else if (op === "sqs.SendMessageBatch" || op === "sqs.SendMessage") {
      for (const body of messageBodies(input))
        this.mark(eventIdIn(body), `sent:${queueName(url)}`, at);
    } else if (op === "eventbridge.PutEvents") {
      const entries = (input as { Entries?: { Detail?: string }[] }).Entries ?? [];
      for (const e of entries) this.mark(eventIdIn(e.Detail), "put-events-done", at);
    } else if (op === "streams.GetRecords") {
      const records = (output as { Records?: { dynamodb?: { NewImage?: unknown } }[] }).Records;
      for (const r of records ?? [])
        this.mark(eventIdIn(JSON.stringify(r.dynamodb?.NewImage)), "stream-read", at);
    }
  }
}

/** Calls per second by operation between two `counts()` snapshots, busiest first. */
export function ratesBetween(
  before: Map<string, number>,
  after: Map<string, number>,
  seconds: number,
): [string, number][] {
  return [...after]
    .map(([op, n]): [string, number] => [op, (n - (before.get(op) ?? 0)) / seconds])
    .filter(([, rate]) => rate > 0)
    .sort((a, b) => b[1] - a[1]);
}

/** CPU time used so far, in milliseconds: this process, and the emulator process when known. */
export function cpuNow(motoPid?: number): { node: number; moto: number | undefined } {
  const usage = process.cpuUsage();
  return { node: (usage.user + usage.system) / 1000, moto: processCpuMs(motoPid) };
}

/** utime + stime of a process from /proc (Linux; undefined elsewhere). Ticks are 1/100 s. */
function processCpuMs(pid: number | undefined): number | undefined {
  if (!pid || pid < 0) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/** Median, 95th percentile (nearest rank) and maximum of a list; NaN when it is empty. */
export function percentiles(values: readonly number[]): {
  p50: number;
  p95: number;
  max: number;
  n: number;
} {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  if (sorted.length === 0) return { p50: Number.NaN, p95: Number.NaN, max: Number.NaN, n: 0 };
  const mid = Math.floor(sorted.length / 2);
  const p50 =
    sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  return { p50, p95: at(0.95) ?? 0, max: sorted.at(-1) ?? 0, n: sorted.length };
}

/** The message bodies of a SendMessage or SendMessageBatch request. */
function messageBodies(input: unknown): (string | undefined)[] {
  const entries = (input as { Entries?: { MessageBody?: string }[] }).Entries ?? [
    input as { MessageBody?: string },
  ];
  return entries.map((e) => e.MessageBody);
}
