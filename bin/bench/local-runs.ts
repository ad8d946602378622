import { ulid } from "ulid";
import { appendToStream } from "../../functions/core/producer";
import type { Decision } from "../../functions/core/role";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { LIFECYCLE } from "../../lib/dev/local/scenario";
import { customerMessage } from "../../lib/dev/local/scenario/customer-support";
import { registry } from "../../schemas";
import type { Latency } from "./local-bounds";
import { percentiles, type WireProbe } from "./local-probe";

/** The consumer group whose path the hop figures follow (FIFO: buffer, dispatch, FIFO queue). */
export const HOP_GROUP = "task-projection";

/**
 * The queue names of one FIFO group's path, as the probe labels its marks: the buffer queue its
 * dispatch function or pipe reads (none when the bus delivers to the FIFO queue itself).
 */
export interface GroupQueues {
  readonly buffer?: string;
  readonly fifo: string;
}

export function groupQueues(env: LocalEnvironment, group: string): GroupQueues {
  const d = env.deployment;
  const queueName = (arn: string | undefined) => {
    for (const r of d.resources.values())
      if (r.type === "AWS::SQS::Queue" && r.attributes.Arn === arn)
        return r.ref.split("/").at(-1) ?? "";
    return undefined;
  };
  const sourceOf = (kind: string) => {
    const fn = d.functions.find((f) => f.kind === kind && f.group === group);
    return d.mappings.find((m) => m.functionLogicalId === fn?.logicalId)?.eventSourceArn;
  };
  const fifoArn = sourceOf("consumer");
  const fifo = queueName(fifoArn);
  if (!fifo) throw new Error(`no consumer queue for group ${group}`);
  const pipe = d.pipes.find((p) => p.targetArn === fifoArn);
  const buffer = queueName(sourceOf("dispatch") ?? pipe?.sourceArn);
  return buffer ? { buffer, fifo } : { fifo };
}

/** The hops of one event through a FIFO group, in milliseconds (undefined: a mark is missing). */
export interface HopSample {
  readonly commitToRelay?: number;
  /** From the relay's stream read to the FIFO queue's send: the whole delivery hop. */
  readonly relayToFifo?: number;
  readonly relayToBuffer?: number;
  readonly putEventsCall?: number;
  readonly bufferToDispatched?: number;
  /** From the start of the send to the FIFO queue (its call included) to the consumer's receive. */
  readonly dispatchedToConsumer?: number;
  readonly consumerCommit?: number;
  readonly whole?: number;
}

export function hopsOf(probe: WireProbe, eventId: string, q: GroupQueues, group: string) {
  const m = probe.marks.get(eventId) ?? new Map<string, number>();
  const span = (from: string, to: string) => {
    const a = m.get(from);
    const b = m.get(to);
    return a === undefined || b === undefined ? undefined : b - a;
  };
  return {
    commitToRelay: span("commit", "stream-read"),
    relayToFifo: span("stream-read", `sent:${q.fifo}`),
    relayToBuffer: q.buffer ? span("stream-read", `received:${q.buffer}`) : undefined,
    putEventsCall: span("put-events", "put-events-done"),
    bufferToDispatched: q.buffer ? span(`received:${q.buffer}`, `sent:${q.fifo}`) : undefined,
    dispatchedToConsumer: span(`sending:${q.fifo}`, `received:${q.fifo}`),
    consumerCommit: span(`received:${q.fifo}`, `consumed:${group}`),
    whole: span("commit", `consumed:${group}`),
  } satisfies HopSample;
}

/** The median, p95 and count of each of `keys` over the samples that have it. */
export function hopTable(
  samples: readonly HopSample[],
  keys: readonly (keyof HopSample)[],
): Record<keyof HopSample, Latency> {
  const table = {} as Record<keyof HopSample, Latency>;
  for (const key of keys)
    table[key] = percentiles(samples.flatMap((s) => (s[key] === undefined ? [] : [s[key]])));
  return table;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function until(what: string, done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** Commit one lifecycle event of a task as the task API does; marks `commit` when it returns. */
export async function commitStep(
  env: LocalEnvironment,
  probe: WireProbe,
  taskId: string,
  step: number,
): Promise<string> {
  const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
  const lifecycle = LIFECYCLE[step % LIFECYCLE.length] ?? LIFECYCLE[0];
  if (!lifecycle) throw new Error("no lifecycle step");
  const [emitted] = await appendToStream(deps, {
    aggregate: { type: "task", id: taskId },
    producer: "task-api",
    correlationId: `corr_${taskId.slice(5)}`,
    taskId,
    decide: (): Decision<{ status: string }> => ({
      state: { status: lifecycle.type },
      emit: [lifecycle],
    }),
  });
  if (!emitted) throw new Error("the commit emitted nothing");
  probe.mark(emitted.event_id, "commit");
  return emitted.event_id;
}

/** One event at a time (a fresh task each), `samples` times, each followed until consumed. */
export async function sampleHops(
  env: LocalEnvironment,
  probe: WireProbe,
  samples: number,
): Promise<HopSample[]> {
  const queues = groupQueues(env, HOP_GROUP);
  const out: HopSample[] = [];
  for (let i = 0; i < samples; i++) {
    const eventId = await commitStep(env, probe, `task_${ulid()}`, 0);
    await until(
      `${eventId} at ${HOP_GROUP}`,
      () => probe.marks.get(eventId)?.has(`consumed:${HOP_GROUP}`) ?? false,
      60_000,
    );
    out.push(hopsOf(probe, eventId, queues, HOP_GROUP));
    // A pause of varying length, so samples do not phase-lock with the pollers' loops.
    await sleep(150 + ((i * 37) % 200));
  }
  return out;
}

export interface BurstResult {
  readonly events: number;
  readonly keys: number;
  /** From the first commit to the last event consumed by the group. */
  readonly seconds: number;
  readonly commitSeconds: number;
  readonly latency: ReturnType<typeof percentiles>;
  /** Each event's hops (as for one event at a time). */
  readonly hops: HopSample[];
}

/** `keys` tasks, each committing `perKey` lifecycle events in order, all tasks at once. */
export async function burst(
  env: LocalEnvironment,
  probe: WireProbe,
  keys: number,
  perKey: number,
): Promise<BurstResult> {
  const started = performance.now();
  const tasks = Array.from({ length: keys }, () => `task_${ulid()}`);
  const ids = (
    await Promise.all(
      tasks.map(async (taskId) => {
        const own: string[] = [];
        for (let step = 0; step < perKey; step++)
          own.push(await commitStep(env, probe, taskId, step));
        return own;
      }),
    )
  ).flat();
  const committed = performance.now();
  const consumed = (id: string) => probe.marks.get(id)?.get(`consumed:${HOP_GROUP}`);
  await until(
    `${ids.length} events at ${HOP_GROUP}`,
    () => ids.every((id) => consumed(id)),
    600_000,
  );
  const last = Math.max(...ids.map((id) => consumed(id) ?? 0));
  const latency = ids.map((id) => (consumed(id) ?? 0) - (probe.marks.get(id)?.get("commit") ?? 0));
  return {
    events: ids.length,
    keys,
    seconds: (last - started) / 1000,
    commitSeconds: (committed - started) / 1000,
    latency: percentiles(latency),
    hops: ids.map((id) => hopsOf(probe, id, groupQueues(env, HOP_GROUP), HOP_GROUP)),
  };
}

export interface ConversationSample {
  readonly ms: number;
  /** Consumer invocations that handled an event of the message's correlation before delivery. */
  readonly steps: number;
}

/** A customer's message put on the events bus, until the channel delivers its reply. */
export async function conversationPath(
  env: LocalEnvironment,
  delivered: Map<string, number>,
  consumedByCorrelation: Map<string, number>,
): Promise<ConversationSample> {
  const conversationId = `conv_${ulid()}`;
  const message = customerMessage(
    conversationId,
    "cust_alice",
    "Hi, has the refund for order 123 gone through?",
  );
  const started = performance.now();
  await putOnBus(env, "events", [message]);
  await until(`the reply in ${conversationId}`, () => delivered.has(conversationId), 120_000);
  return {
    ms: (delivered.get(conversationId) ?? 0) - started,
    steps: consumedByCorrelation.get(message.correlation_id) ?? 0,
  };
}
