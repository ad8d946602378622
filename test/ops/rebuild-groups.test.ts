import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import { ordersFrom } from "../../functions/roles/customer-support/integrations/orders/memory";
import { ORDER_LOOKUP } from "../../functions/roles/customer-support/order-lookup/order-lookup";
import { ROUTER } from "../../functions/roles/customer-support/router/router";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { customerMessage } from "../../lib/dev/local/scenario/customer-support";
import { topology } from "../../lib/infra/project";
import { foldVerdict } from "../../lib/operator/fold-groups";
import { operatorGroups } from "../../lib/operator/groups";
import { checkFold, rebuild } from "../../lib/operator/rebuild";
import { IncompleteFoldError, resetStates } from "../../lib/operator/rebuild-reset";
import type { AggregateRef } from "../../schemas";
import { makeDeps, seedTask } from "../core/fixtures";
import { newConversationId, supportHarness } from "../core/support-fixture";
import { taskEvent } from "../support/factories";

const verdicts = () => new Map(operatorGroups().map((g) => [g.name, foldVerdict(g)]));

describe("the groups the operator tools run, read without the topology (which loads the CDK)", () => {
  it("are the topology's groups: the same names, roles and needs, in its order", () => {
    const facts = (g: { name: string; role: unknown; needs?: unknown }) => ({
      name: g.name,
      role: g.role,
      needs: g.needs,
    });
    expect(operatorGroups().map(facts)).toEqual(topology.groups.map(facts));
  });
});

describe("which groups rebuild and check run: decided from what each group declares", () => {
  it("runs every group whose state is a fold of its streams and refuses the rest, naming why", () => {
    const all = verdicts();
    const runs = [...all.values()].filter((v) => v.role).map((v) => v.group);
    expect(runs).toEqual(["task-projection", "router", "order-lookup", "conversation-projection"]);
    expect(all.get("writing")?.refused).toBe(
      "writing calls a model while deciding: its state is not a fold of its streams",
    );
    expect(all.get("reply-generation")?.refused).toMatch(/^reply-generation calls a model/);
    expect(all.get("sender")?.refused).toMatch(/^sender sends through the reply channel/);
    expect(all.get("orchestrator")?.refused).toMatch(/reads its agents' queue depths/);
    expect(all.get("conversation")?.refused).toMatch(/conversation.message.received/);
    expect(all.get("audit")?.refused).toMatch(/keeps only the messages no stream holds/);
    // Rebuild runs them; check and --reset only where the fold is the whole state.
    expect(all.get("task-projection")?.resetRefused).toMatch(/task.feedback.received/);
    expect(all.get("router")?.resetRefused).toMatch(/rows that several of its states share/);
    expect(all.get("order-lookup")?.resetRefused).toBeUndefined();
    expect(all.get("conversation-projection")?.resetRefused).toBeUndefined();
  });
});

/** Every stream of the types in an in-memory store. */
async function streamsOf(
  store: { streamsOfType(type: string): Promise<{ streams: readonly AggregateRef[] }> },
  ...types: string[]
) {
  const refs: AggregateRef[] = [];
  for (const type of types) refs.push(...(await store.streamsOfType(type)).streams);
  return refs;
}

describe("folds of roles that read through ports: answered from what the group recorded", () => {
  it("router, order lookup and the conversation view fold to their states, decided late and with the orders gone", async () => {
    const h = supportHarness({ without: ["order-lookup"] });
    const conv = newConversationId();
    await h.drain([customerMessage(conv, "cust_alice", "where is my order 123?")]);
    // The lookup decides 7 s after it was asked, against orders that are gone by the fold.
    h.clock.advance(7_000);
    const lookup = h.emitted.find((e) => e.event_type === "order.lookup.requested");
    if (!lookup) throw new Error("no lookup request");
    const gone = ordersFrom([]);
    expect(await gone.get("123")).toBeUndefined();
    await consume(lookup, h.orderLookup as Role<unknown>, h.deps);
    const stored = await h.state<{ found: boolean; looked_up_at: string }>(
      "order_lookup",
      lookup.task_id,
    );
    expect(stored?.found).toBe(true);
    expect(Date.parse(stored?.looked_up_at ?? "") - Date.parse(lookup.occurred_at)).toBe(7_000);

    const lookups = await checkFold(
      h.store,
      ORDER_LOOKUP as Role<unknown>,
      await streamsOf(h.store, "support_route"),
    );
    expect(lookups).toEqual({ states: 1, drift: [] });
    const routes = await checkFold(
      h.store,
      ROUTER as Role<unknown>,
      await streamsOf(h.store, "conversation"),
    );
    expect(routes).toEqual({ states: 1, drift: [] });
  });
});

describe("rebuild --reset: states and checkpoints rewritten from the fold", () => {
  async function drifted() {
    const { deps, store } = makeDeps();
    const role = taskProjection as Role<unknown>;
    const events = await seedTask(deps, 3);
    for (const event of events) await consume(event, role, deps);
    const ref = { type: "task_view", id: events[0]?.aggregate.id ?? "" };
    const key = `task_view#${ref.id}`;
    const good = store.states.get(key);
    if (!good) throw new Error("no view");
    // Drift behind the projection's back; the checkpoint stays at the head.
    const lost = { ...(good.data as object), feedback: { count: 9, rating_total: 45 } };
    store.states.set(key, { ...good, data: lost });
    const streams = [{ type: "task", id: ref.id }];
    return { deps, store, role, ref, key, good, streams, events };
  }

  it("rebuild alone changes nothing (the checkpoints make the events duplicates); --reset repairs it", async () => {
    const { store, role, ref, good, streams } = await drifted();
    expect((await checkFold(store, role, streams)).drift.map((d) => d.state)).toEqual([ref]);
    const fed = await rebuild(store, store, role, "task");
    expect(fed).toMatchObject({ applied: 0, duplicates: 3 });
    expect((await checkFold(store, role, streams)).drift).toHaveLength(1);

    expect(await resetStates(store, role, streams)).toEqual({
      states: 1,
      rewritten: 1,
      unchanged: 0,
      retries: 0,
    });
    expect(await checkFold(store, role, streams)).toEqual({ states: 1, drift: [] });
    const repaired = (await store.load({ state: ref })).state;
    expect(repaired?.data).toEqual(good.data);
    expect(repaired?.gate?.checkpoints).toEqual(good.gate?.checkpoints);
    expect(await resetStates(store, role, streams)).toMatchObject({ rewritten: 0, unchanged: 1 });
  });

  it("a live commit between the fold and its write: the write fails, the reset folds again and keeps it", async () => {
    const { deps, store, role, ref, streams, events } = await drifted();
    const last = events.at(-1);
    if (!last) throw new Error("no events");
    const live = taskEvent(4, { taskId: last.task_id, correlationId: last.correlation_id });
    const result = await resetStates(store, role, streams, {
      beforeWrite: async (round) => {
        if (round > 0) return;
        await store.commit({ append: [live] });
        expect((await consume(live, role, deps)).status).toBe("applied");
      },
    });
    expect(result).toMatchObject({ states: 1, rewritten: 1, retries: 1 });
    const after = (await store.load({ state: ref })).state;
    expect(after?.gate?.checkpoints[`task#${ref.id}`]).toBe(4);
    expect(after?.data).toMatchObject({ status: "delivered", feedback: { count: 0 } });
    expect(await checkFold(store, role, streams)).toEqual({ states: 1, drift: [] });
  });

  it("refuses, writing nothing, to rewrite a state from fewer streams than it follows", async () => {
    const h = supportHarness();
    const conv = newConversationId();
    await h.drain([customerMessage(conv, "cust_alice", "where is my order 123?")]);
    const before = await h.view(conv);
    const projection = h.projection as Role<unknown>;
    await expect(
      resetStates(h.store, projection, await streamsOf(h.store, "conversation")),
    ).rejects.toThrow(IncompleteFoldError);
    expect(await h.view(conv)).toEqual(before);
    const all = await streamsOf(
      h.store,
      "conversation",
      "support_route",
      "order_lookup",
      "reply",
      "delivery",
    );
    expect(await checkFold(h.store, projection, all)).toEqual({ states: 1, drift: [] });
  });
});
