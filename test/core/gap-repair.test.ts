import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
// The customer-support application's event types, which its role modules would define.
import "../../functions/roles/customer-support/events/index";
import { PermanentError } from "../../functions/core/errors";
import { missingRanges } from "../../functions/core/gate";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import { type AuditRecord, audit } from "../../functions/roles/audit/audit";
import {
  conversation,
  conversationContextReader,
} from "../../functions/roles/customer-support/conversation/conversation";
import { type RouteState, routerRole } from "../../functions/roles/customer-support/router/router";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { type Envelope, MAX_STREAM_VERSION, registry } from "../../schemas";
import { clientMessage, makeDeps, seedTask } from "./fixtures";

/** Gap repair applies each event read from the store to that event's own state aggregate. */
describe("gap repair: each repaired event goes to its own state", () => {
  it("audit (one record per event, unordered): v3 first, then v1 and v2, each recorded once under its own id", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 3);
    const [v1, v2, v3] = events as [Envelope, Envelope, Envelope];
    const result = await consume(v3, audit, deps);
    // Audit needs no order: nothing is read from the store, each event is de-duplicated by id.
    expect(result.steps.map((s) => [s.version, s.status, s.repaired])).toEqual([
      [3, "applied", false],
    ]);
    for (const e of [v1, v2, v3, v1]) await consume(e, audit, deps);
    expect((await consume(v2, audit, deps)).status).toBe("duplicate");
    for (const e of events) {
      const record = store.states.get(`audit_record#evt_${e.event_id}`)?.data as AuditRecord;
      expect(record?.event_id, `record of v${e.aggregate.version}`).toBe(e.event_id);
      expect(record?.aggregate.version).toBe(e.aggregate.version);
    }
  });

  it("router: route requests of two messages arriving out of order are both routed", async () => {
    const { deps, store } = makeDeps();
    const router = routerRole({ context: conversationContextReader(store) });
    const conv = `conv_${ulid()}`;
    const first = await consume(
      clientMessage(conv, "I want to check my order"),
      conversation,
      deps,
    );
    const second = await consume(
      clientMessage(conv, "The order number is A-1002"),
      conversation,
      deps,
    );
    const route1 = first.steps[0]?.emitted[1] as Envelope;
    const route2 = second.steps[0]?.emitted[1] as Envelope;
    expect([route1.aggregate.version, route2.aggregate.version]).toEqual([2, 4]);

    // The router gets v4 first: v2 is repaired from the store, then v4 is applied.
    const result = await consume(route2, router, deps);
    expect(result.steps.map((s) => [s.version, s.status, s.repaired])).toEqual([
      [2, "applied", true],
      [4, "applied", false],
    ]);
    const routeOf = (taskId: string) =>
      store.states.get(`support_route#${taskId}`)?.data as RouteState | undefined;
    expect(routeOf(route1.task_id)).toBeDefined();
    expect(routeOf(route2.task_id)).toBeDefined();
    expect(routeOf(route2.task_id)).not.toEqual(routeOf(route1.task_id));
    const emittedTasks = result.steps.flatMap((s) => s.emitted.map((e) => e.task_id));
    expect(new Set(emittedTasks)).toEqual(new Set([route1.task_id, route2.task_id]));
    // The late original is a duplicate.
    expect((await consume(route1, router, deps)).status).toBe("duplicate");
  });

  it("a role whose events of one stream map to two states reads the right one for each", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 4);
    // Odd versions count into "odd", even ones into "even".
    const split: Role<{ seen: number[] }> = {
      group: "split",
      subscriptions: events.map((e) => e.event_type),
      stateOf: (e) => ({ type: "parity", id: `p_${e.aggregate.version % 2 ? "odd" : "even"}` }),
      sharedStreams: ["task"],
      decide: (state, e) => ({ state: { seen: [...(state?.seen ?? []), e.aggregate.version] } }),
    };
    await consume(events[1], split, deps); // v2 repairs v1 first
    await consume(events[3], split, deps); // v4 repairs v3 first
    expect(store.states.get("parity#p_odd")?.data).toEqual({ seen: [1, 3] });
    expect(store.states.get("parity#p_even")?.data).toEqual({ seen: [2, 4] });
  });
});

describe("a state's first event (Role.beginsState) reads no gap", () => {
  // One state per version, as a step role keeps one agent run per request on a run's stream.
  function perVersion(events: readonly Envelope[], begins: readonly string[], type = "step") {
    return {
      group: `per-version-${type}`,
      subscriptions: events.map((e) => e.event_type),
      stateOf: (e: Envelope) => ({ type, id: `s_${e.aggregate.version}` }),
      beginsState: (e: Envelope) => begins.includes(e.event_type),
      decide: (state: { seen: number[] } | undefined, e: Envelope) => ({
        state: { seen: [...(state?.seen ?? []), e.aggregate.version] },
      }),
    } satisfies Role<{ seen: number[] }>;
  }
  function counted(deps: ReturnType<typeof makeDeps>["deps"]) {
    let reads = 0;
    const store = new Proxy(deps.store, {
      get(target, key, receiver) {
        if (key === "readStream") reads++;
        const value = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    return { deps: { ...deps, store }, reads: () => reads };
  }

  it("applies it alone to its new state, reading nothing; an earlier copy coming later is a duplicate", async () => {
    const { deps, store } = makeDeps();
    const events = await seedTask(deps, 4);
    const [, , v3, v4] = events as [Envelope, Envelope, Envelope, Envelope];
    const role = perVersion(events, [v4.event_type]);
    const read = counted(deps);
    const result = await consume(v4, role, read.deps);
    expect(result.steps.map((s) => [s.version, s.status, s.repaired])).toEqual([
      [4, "applied", false],
    ]);
    expect(read.reads()).toBe(0);
    expect(store.states.get("step#s_4")?.data).toEqual({ seen: [4] });
    expect((await consume(v4, role, read.deps)).status).toBe("duplicate");
    // Without it, the gap is read and its events left to their own states.
    const other = perVersion(events, [], "other");
    const readAgain = counted(deps);
    const repaired = await consume(v4, other, readAgain.deps);
    expect(readAgain.reads()).toBe(1);
    expect(repaired.steps.map((s) => s.version)).toEqual([4]);
    expect(store.states.get("other#s_4")?.data).toEqual({ seen: [4] });
    // A type that begins no state reads its gap, leaving its events to their own states.
    await consume(v3, role, read.deps);
    expect(read.reads()).toBe(1);
    expect(store.states.get("step#s_3")?.data).toEqual({ seen: [3] });
    expect(store.states.get("step#s_1")).toBeUndefined();
  });
});

describe("gap repair: a failure names the repaired event", () => {
  it("says which event read from the store failed, keeping the code and class", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 3);
    const failsOnV1: Role<{ n: number }> = {
      group: "fails-on-v1",
      subscriptions: events.map((e) => e.event_type),
      decide: (state, e) => {
        if (e.aggregate.version === 1) throw new PermanentError("role.broken", "cannot apply");
        return { state: { n: (state?.n ?? 0) + 1 } };
      },
    };
    const error = await consume(events[2], failsOnV1, deps).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "role.broken", errorClass: "permanent" });
    const { message, details } = error as { message: string; details: Record<string, unknown> };
    expect(message).toContain(`task.accepted v1 (${events[0]?.event_id})`);
    expect(message).toContain("cannot apply");
    expect(details.repaired_event_id).toBe(events[0]?.event_id);
  });
});

/** The gate's cost follows what is stored, never the version number a message carries. */
describe("gate: huge versions", () => {
  it("refuses a version above the bound as an invalid envelope", async () => {
    const { deps } = makeDeps();
    const [v1] = await seedTask(deps, 1);
    const parsed = registry.parse({
      ...v1,
      aggregate: { ...v1?.aggregate, version: MAX_STREAM_VERSION + 1 },
    });
    expect(parsed.ok).toBe(false);
  });

  it("settles a version far past the stream's head with one small read and a small error", async () => {
    const { deps: base } = makeDeps();
    const events = await seedTask(base, 2);
    const reads: [number, number][] = [];
    const store = base.store;
    const deps = {
      ...base,
      store: {
        load: store.load.bind(store),
        commit: store.commit.bind(store),
        readStream: (ref: Parameters<typeof store.readStream>[0], from: number, to: number) => {
          reads.push([from, to]);
          return store.readStream(ref, from, to);
        },
      },
    };
    const huge = {
      ...events[1],
      event_id: ulid(),
      aggregate: { ...events[1]?.aggregate, version: MAX_STREAM_VERSION },
    };
    const started = performance.now();
    const error = await consume(huge, taskProjection, deps).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toMatchObject({ code: "gate.gap_unrepairable", errorClass: "transient" });
    const { message, details } = error as { message: string; details: Record<string, unknown> };
    // One read of the version before the delivered one settles it: nothing else is read.
    expect(details.missing).toEqual([[MAX_STREAM_VERSION - 1, MAX_STREAM_VERSION - 1]]);
    expect(reads).toEqual([[MAX_STREAM_VERSION - 1, MAX_STREAM_VERSION - 1]]);
    expect(message.length).toBeLessThan(400);
    expect(JSON.stringify(details).length).toBeLessThan(400);
    // Not a speed goal: a loop over 2^31 versions would take minutes and gigabytes.
    expect(elapsed).toBeLessThan(5_000);
  });

  it("reports a shorter gap the store cannot fill by ranges and a count", async () => {
    const { deps } = makeDeps();
    const events = await seedTask(deps, 2);
    const far = {
      ...events[1],
      event_id: ulid(),
      aggregate: { ...events[1]?.aggregate, version: 500 },
    };
    const error = await consume(far, taskProjection, deps).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "gate.gap_unrepairable", errorClass: "transient" });
    const { details } = error as { details: Record<string, unknown> };
    expect(details.missingCount).toBe(497);
    expect(details.missing).toEqual([[3, 499]]);
  });

  it("names the first few missing ranges and counts the rest", () => {
    const at = (v: number) => ({ aggregate: { type: "t", id: "t_1", version: v } }) as Envelope;
    const present = [2, 4, 6, 8, 10, 12, 14].map(at);
    expect(missingRanges(present, 1, 20)).toEqual({
      count: 13,
      ranges: [
        [1, 1],
        [3, 3],
        [5, 5],
        [7, 7],
        [9, 9],
      ],
      rangeCount: 8,
    });
    expect(missingRanges([1, 2, 3].map(at), 1, 3)).toEqual({ count: 0, ranges: [], rangeCount: 0 });
  });
});
