import { describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import type { Role } from "../../functions/core/role";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { checkFold, type RebuildProgress, rebuild } from "../../lib/operator/rebuild";
import { taskStream } from "../support/factories";

const role = taskProjection as Role<unknown>;

async function storeWithStreams(count: number) {
  const store = new InMemoryEventStore();
  const streams = Array.from({ length: count }, () => taskStream(1, 4));
  for (const events of streams) await store.commit({ append: events });
  return { store, streams };
}

describe("rebuild: a projection fed every stream of a type from the event store", () => {
  it("ends in the fold of every stream; a second run finds every event already applied", async () => {
    const { store, streams } = await storeWithStreams(5);
    const first = await rebuild(store, store, role, "task", { pageSize: 2 });
    expect(first).toMatchObject({ streams: 5, events: 20, applied: 20, duplicates: 0, done: true });
    const refs = streams.map((s) => ({ type: "task", id: s[0]?.aggregate.id ?? "" }));
    expect(await checkFold(store, role, refs)).toEqual({ states: 5, drift: [] });
    const again = await rebuild(store, store, role, "task");
    expect(again).toMatchObject({ streams: 5, applied: 0, duplicates: 20 });
  });

  it("reports progress per page and resumes after the last stream done", async () => {
    const { store } = await storeWithStreams(5);
    const seen: RebuildProgress[] = [];
    await rebuild(store, store, role, "task", {
      pageSize: 2,
      onProgress: (p) => {
        seen.push(p);
      },
    });
    expect(seen.map((p) => [p.streams, p.done])).toEqual([
      [2, false],
      [4, false],
      [5, true],
    ]);
    const fresh = new InMemoryEventStore();
    for (const events of store.streams.values())
      await fresh.commit({ append: [...events.values()] });
    const resumed = await rebuild(fresh, fresh, role, "task", { after: seen[0]?.after });
    expect(resumed).toMatchObject({ streams: 3, applied: 12 });
  });

  it("check reports a state that differs from the fold of its stream", async () => {
    const { store, streams } = await storeWithStreams(2);
    await rebuild(store, store, role, "task");
    // The task projection keeps its view of task/<id> as task_view/<id>.
    const ref = { type: "task_view", id: streams[0]?.[0]?.aggregate.id ?? "" };
    const stored = store.states.get(`task_view#${ref.id}`);
    if (!stored) throw new Error("no state");
    store.states.set(`task_view#${ref.id}`, {
      ...stored,
      data: { ...(stored.data as object), status: "lost" },
    });
    const refs = streams.map((s) => ({ type: "task", id: s[0]?.aggregate.id ?? "" }));
    const { drift } = await checkFold(store, role, refs);
    expect(drift.map((d) => d.state)).toEqual([ref]);
    expect(drift[0]?.stored).toMatchObject({ status: "lost" });
  });
});
