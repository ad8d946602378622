import { describe, expect, it } from "vitest";
import { dispatch } from "../../functions/core/dispatch";
import { buildEmitted, buildHeartbeat } from "../../functions/core/emit";
import { consume } from "../../functions/core/pipeline";
import type { DeadLetterSink, EventPublisher, FifoMessage } from "../../functions/core/ports";
import { appendToStream } from "../../functions/core/producer";
import { relay } from "../../functions/core/relay";
import { deliveryOf, replayedBody } from "../../functions/core/replay";
import type { Role } from "../../functions/core/role";
import {
  continueTraceparent,
  formatTraceparent,
  parseTraceparent,
  startTraceparent,
  traceIdOf,
  ulidHex,
} from "../../functions/core/trace-context";
import { type Envelope, registry } from "../../schemas";
import { feedback, makeDeps, newCorrelationId, newTaskId } from "./fixtures";

/**
 * Lineage: what a message causes keeps its correlation, task, tenant, user and parent run, and
 * continues its W3C trace (one trace id, the emitting step's span as parent) through the relay,
 * the dispatcher, a redelivery, a redrive and a replay.
 */

const CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

const spanOf = (e: Envelope) => parseTraceparent(e.traceparent)?.spanId;
const traceOf = (e: Envelope) => parseTraceparent(e.traceparent)?.traceId;

function cause(overrides: Partial<Envelope> = {}): Envelope {
  return feedback(newTaskId(), 4, {
    tenant_id: "acme",
    user_id: "user_alice",
    parent_run_id: "run_parent",
    traceparent: CALLER,
    ...overrides,
  });
}

function emitFrom(
  from: Envelope | null,
  specs: Parameters<typeof buildEmitted>[0],
  origin: Partial<Parameters<typeof buildEmitted>[4]> = {},
) {
  const { deps, clock } = makeDeps();
  const taskId = from?.task_id ?? newTaskId();
  return buildEmitted(
    specs,
    from,
    { type: "task", id: taskId },
    0,
    {
      producer: "planner",
      now: clock.now(),
      attempt: 1,
      root: { correlationId: newCorrelationId(), taskId },
      ...origin,
    },
    deps,
  );
}

const accepted = { type: "task.accepted", payload: { title: "t" } };
const planned = { type: "plan.created", payload: { steps: [{ title: "look up order" }] } };

describe("the traceparent field", () => {
  it("accepts a W3C version 00 header and refuses malformed or all-zero ones by name", () => {
    const ok = registry.parse(cause());
    expect(ok.ok).toBe(true);
    for (const bad of [
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
    ]) {
      const parsed = registry.parse(cause({ traceparent: bad }));
      expect(parsed.ok, bad).toBe(false);
      if (!parsed.ok) expect(parsed.message).toMatch(/traceparent/);
    }
  });

  it("parses and formats through the W3C propagator, refusing all-zero ids", () => {
    expect(parseTraceparent(CALLER)).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      traceFlags: 1,
    });
    expect(formatTraceparent(parseTraceparent(CALLER) as never)).toBe(CALLER);
    expect(parseTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBe(
      undefined,
    );
    expect(parseTraceparent("garbage")).toBe(undefined);
  });

  it("takes a new trace's id from the first event's ULID", () => {
    expect(ulidHex("01KB0Q3V9X7T2M4N6P8R0S1W3Y")).toMatch(/^[0-9a-f]{32}$/);
    expect(ulidHex("7ZZZZZZZZZZZZZZZZZZZZZZZZZ")).toBe("f".repeat(32));
    expect(ulidHex("00000000000000000000000000")).toBe(`${"0".repeat(31)}1`);
    const started = startTraceparent("01KB0Q3V9X7T2M4N6P8R0S1W3Y");
    expect(parseTraceparent(started)?.traceId).toBe(ulidHex("01KB0Q3V9X7T2M4N6P8R0S1W3Y"));
    // A caller's context is continued, not replaced; an invalid one starts a new trace.
    expect(startTraceparent("01KB0Q3V9X7T2M4N6P8R0S1W3Y", CALLER)).toBe(CALLER);
    expect(traceIdOf({ event_id: "01KB0Q3V9X7T2M4N6P8R0S1W3Y", traceparent: "bad" })).toBe(
      ulidHex("01KB0Q3V9X7T2M4N6P8R0S1W3Y"),
    );
  });
});

describe("what a message causes", () => {
  it("keeps its tenant, user, parent run and trace id, under the step's span", () => {
    const from = cause();
    const emitted = emitFrom(from, [accepted, planned]);
    for (const e of emitted) {
      expect(e).toMatchObject({
        correlation_id: from.correlation_id,
        causation_id: from.event_id,
        task_id: from.task_id,
        tenant_id: "acme",
        user_id: "user_alice",
        parent_run_id: "run_parent",
      });
      expect(traceOf(e)).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    }
    // One step, one span: both events name it, and it is not the caller's.
    expect(new Set(emitted.map(spanOf)).size).toBe(1);
    expect(spanOf(emitted[0] as Envelope)).not.toBe("00f067aa0ba902b7");
  });

  it("names a new span for another group or another attempt on the same cause", () => {
    const from = cause();
    const [first] = emitFrom(from, [accepted]);
    const [otherGroup] = emitFrom(from, [accepted], { producer: "audit" });
    const [redelivered] = emitFrom(from, [accepted], { attempt: 2 });
    const spans = [first, otherGroup, redelivered].map((e) => spanOf(e as Envelope));
    expect(new Set(spans).size).toBe(3);
    expect(new Set([first, otherGroup, redelivered].map((e) => traceOf(e as Envelope))).size).toBe(
      1,
    );
  });

  it("leaves the parent run when the spec says null, and links a resumed run", () => {
    const from = cause();
    const [own, resumed] = emitFrom(from, [
      { ...accepted, parentRunId: null },
      { ...planned, runId: "agrun_new", resumedFrom: "agrun_old", parentRunId: "run_other" },
    ]);
    expect(own?.parent_run_id).toBeUndefined();
    expect(resumed).toMatchObject({
      run_id: "agrun_new",
      resumed_from: "agrun_old",
      parent_run_id: "run_other",
    });
  });

  it("continues a cause without a trace context from the cause's event id, in every group", () => {
    const from = cause({ traceparent: undefined });
    const [a] = emitFrom(from, [accepted], { producer: "planner" });
    const [b] = emitFrom(from, [accepted], { producer: "audit" });
    expect(traceOf(a as Envelope)).toBe(ulidHex(from.event_id));
    expect(traceOf(b as Envelope)).toBe(ulidHex(from.event_id));
  });

  it("starts a trace at a chain's first event: the caller's, or the event's own id", () => {
    const [fromCaller] = emitFrom(null, [accepted], {
      root: { correlationId: newCorrelationId(), taskId: newTaskId(), traceparent: CALLER },
    });
    expect(fromCaller?.traceparent).toBe(CALLER);
    const [first, second] = emitFrom(null, [accepted, planned]);
    expect(traceOf(first as Envelope)).toBe(ulidHex(first?.event_id ?? ""));
    expect(second?.traceparent).toBe(first?.traceparent);
  });

  it("gives a heartbeat the span of the step it reports on", () => {
    const { deps } = makeDeps();
    const from = cause();
    const beat = buildHeartbeat(
      {
        type: "node.heartbeat",
        payload: { run_id: "run_1", node_id: "n1", generation: 1, lease_seconds: 60 },
        aggregate: { type: "dag_run", id: "run_1" },
      },
      from,
      "planner",
      deps,
      1,
    );
    const [step] = emitFrom(from, [accepted]);
    expect(beat).toMatchObject({ user_id: "user_alice", parent_run_id: "run_parent" });
    expect(beat.traceparent).toBe(step?.traceparent);
    expect(beat.traceparent).toBe(
      continueTraceparent({ cause: from, producer: "planner", attempt: 1 }),
    );
  });
});

/** A role that answers task.feedback.received with a plan on its own stream. */
const planner: Role<{ n: number }> = {
  group: "planner",
  subscriptions: ["task.feedback.received"],
  stateOf: (event) => ({ type: "plan_view", id: event.task_id }),
  decide: (state) => ({ state: { n: (state?.n ?? 0) + 1 }, emit: [planned] }),
};

describe("every hop keeps the trace", () => {
  it("through a producer, the relay, the dispatcher, a redelivery and a replay", async () => {
    const { deps } = makeDeps();
    const taskId = newTaskId();
    const [first] = await appendToStream(deps, {
      aggregate: { type: "task", id: taskId },
      producer: "task-api",
      correlationId: newCorrelationId(),
      taskId,
      traceparent: CALLER,
      decide: () => ({ state: { n: 1 }, emit: [accepted] }),
    });
    expect(first?.traceparent).toBe(CALLER);
    // The relay publishes the stored envelope as it is.
    const [stored] = await deps.store.readStream({ type: "task", id: taskId }, 1, 1);
    const published: Envelope[] = [];
    const publisher: EventPublisher = {
      publish: async (_topic, envelopes) => {
        published.push(...envelopes);
        return [];
      },
    };
    await relay([stored as Envelope], registry, publisher, { wait: async () => {} });
    expect(published.map((e) => e.traceparent)).toEqual([CALLER]);
    // The dispatcher's FIFO body, live and replayed, carries it too.
    const sent: FifoMessage[] = [];
    const sender = {
      send: async (messages: readonly FifoMessage[]) => {
        sent.push(...messages);
        return [];
      },
    };
    const deadLetters: DeadLetterSink = { send: async () => {} };
    const message = cause({ traceparent: CALLER });
    await dispatch(
      [
        { envelope: message, rawBody: "{}", recordId: "a" },
        { envelope: message, rawBody: "{}", recordId: "b", replay: { name: "r1" } },
      ],
      registry,
      sender,
      deadLetters,
    );
    const delivered = sent.map((m) => deliveryOf(JSON.parse(m.body)).envelope as Envelope);
    expect(delivered.map((e) => e.traceparent)).toEqual([CALLER, CALLER]);
    expect(
      (deliveryOf(JSON.parse(replayedBody(message, { name: "r2" }))).envelope as Envelope)
        .traceparent,
    ).toBe(CALLER);
    // A consumer continues it; a redelivery (a redrive counts receives on) names a new span.
    const once = await consume(message, planner, makeDeps().deps, { receiveCount: 1 });
    const again = await consume(message, planner, makeDeps().deps, { receiveCount: 2 });
    const [a] = once.steps.flatMap((s) => s.emitted);
    const [b] = again.steps.flatMap((s) => s.emitted);
    expect([traceOf(a as Envelope), traceOf(b as Envelope)]).toEqual([
      "4bf92f3577b34da6a3ce929d0e0e4736",
      "4bf92f3577b34da6a3ce929d0e0e4736",
    ]);
    expect(spanOf(a as Envelope)).not.toBe(spanOf(b as Envelope));
    expect(a).toMatchObject({ user_id: "user_alice", parent_run_id: "run_parent" });
  });
});
