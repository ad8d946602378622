import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import type { MapItemResult } from "../../functions/core/dag/map";
import { PermanentError } from "../../functions/core/errors";
import { defineStepModule } from "../../functions/core/role-module";
import { stepRolesOf } from "../../functions/core/steps";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { StepCompleted, StepRequested } from "../../schemas/events/step";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";
import * as z from "../../schemas/zod";
import { Bus, type Delivery } from "./workflow-bus";

/**
 * A map node run by the orchestrator: a step role written with the kit lists five words, and a
 * map node runs another step role once per word, two at a time, on the in-memory bus through the
 * pipeline every consumer runs. The word "bad" fails its item.
 */

const WORDS = ["alpha", "beta", "bad", "delta", "epsilon"];

const listerModule = defineStepModule({
  group: "lister",
  entry: "test/core/workflow-map.test.ts",
  steps: {
    input: z.looseObject({ words: z.array(z.string()) }),
    output: z.object({ words: z.array(z.string()) }),
    run: () => (input: { words: string[] }) => ({ words: input.words }),
  },
});

/** The step role of the map's items; `calls` lists the items it ran, by index. */
function workerModule() {
  const calls: number[] = [];
  const module = defineStepModule({
    group: "worker",
    entry: "test/core/workflow-map.test.ts",
    steps: {
      // The lister's output without the list: each item carries its own word.
      input: z.looseObject({ lister: z.strictObject({}) }),
      output: z.object({ word: z.string(), letters: z.int() }),
      run: () => (_input: unknown, context) => {
        if (!context.item) throw new PermanentError("test.no_item", "the step is not a map item");
        calls.push(context.item.index);
        const word = String(context.item.value);
        if (word === "bad") throw new PermanentError("test.bad_word", `cannot take ${word}`);
        return { word, letters: word.length };
      },
    },
  });
  return { module, calls };
}

/** List the words, then a map over them with the worker, `maxFailed` items tolerated. */
const wordMap = (name: string, maxFailed: number, role = "worker") =>
  defineWorkflow({
    name,
    version: 1,
    nodes: [
      { id: "lister", role: "lister" },
      {
        id: "each",
        role,
        map: { items: { node: "lister", path: "words" }, concurrency: 2, maxFailed },
      },
    ],
    edges: [{ from: "lister", to: "each" }],
  });

const WORKFLOWS = [wordMap("words-tolerant", 1), wordMap("words-strict", 0)];

/** A step role that takes its commands itself and does not say it carries out map items. */
const ITEMLESS = { requested: "tally.node.requested", cancel: "tally.node.cancel.requested" };

function busWith(duplicate = false) {
  const worker = workerModule();
  const modules = [listerModule, worker.module];
  const orchestrator = orchestratorRole({
    stepRoles: { ...stepRolesOf([...contentAgentModules, ...modules]), tally: ITEMLESS },
    workflows: [...WORKFLOWS, wordMap("words-tallied", 0, "tally")],
  });
  const bus = new Bus({ orchestrator, modules, duplicate });
  return { bus, calls: worker.calls };
}

function start(bus: Bus, workflow: string): string {
  const runId = `run_${ulid()}`;
  const request = { topic_hint: "five words", words: WORDS };
  bus.send(bus.command("workflow.start.requested", runId, { workflow, request }));
  return runId;
}

const REQUESTED = "worker.node.requested";
const CANCEL = "worker.node.cancel.requested";
const itemOf = (d: Delivery) => (d.event.payload as { item?: number | { index: number } }).item;

/** The index of the map item a delivery is for (a request carries the item, a cancel its index). */
const indexOf = (d: Delivery) => {
  const item = itemOf(d);
  return typeof item === "object" ? item.index : item;
};
/** The answers `role` gave, completed or failed. */
const answersOf = (bus: Bus, role: string) =>
  [...bus.emitted("step.completed"), ...bus.emitted("step.failed")]
    .map((e) => e.payload as StepCompleted)
    .filter((a) => a.role === role);

/** The items of `each` RUNNING now (0 before the run exists). */
function runningItems(bus: Bus, runId: string): number {
  if (!bus.store.states.has(`dag_run#${runId}`)) return 0;
  const items = bus.state(runId).run.nodes.each?.items ?? [];
  return items.filter((i) => i.state === "RUNNING").length;
}

describe("a map node run by the orchestrator, one step per item", () => {
  it("runs each item once, two at a time, and completes with the failed item marked under its tolerance", async () => {
    const { bus, calls } = busWith();
    const runId = start(bus, "words-tolerant");
    let most = 0;
    await bus.drain(() => {
      most = Math.max(most, runningItems(bus, runId));
      return true;
    });

    expect(bus.deadLettered).toEqual([]);
    expect(most).toBe(2);
    const requests = bus.emitted(REQUESTED).map((e) => (e.payload as StepRequested).item);
    expect(requests).toEqual(WORDS.map((value, index) => ({ index, count: 5, value })));
    expect([...calls].sort()).toEqual([0, 1, 2, 3, 4]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    const output = state.run.nodes.each?.output as { items: MapItemResult[]; failed: number };
    expect(output.failed).toBe(1);
    expect(output.items.map((i) => i.status)).toEqual([
      "completed",
      "completed",
      "failed",
      "completed",
      "completed",
    ]);
    expect(output.items[0]).toEqual({ status: "completed", output: { word: "alpha", letters: 5 } });
    expect(output.items[2]).toMatchObject({ error: { code: "test.bad_word" } });
    // Every answer named its item.
    const answered = bus
      .emitted("step.completed")
      .filter((e) => (e.payload as StepCompleted).node_id === "each");
    expect(answered.map((e) => (e.payload as StepCompleted).item).sort()).toEqual([0, 1, 3, 4]);
  });

  it("fails the node over its tolerance, cancels the item still queued, which is discarded unrun", async () => {
    const { bus, calls } = busWith();
    const runId = start(bus, "words-strict");
    // Item 3's request waits in the worker's queue while item 2 fails (its cancel then behind it).
    const itemThree = (d: Delivery) => d.group === "worker" && indexOf(d) === 3;
    await bus.drain((d) => !itemThree(d));
    const cancels = bus.emitted(CANCEL).map((e) => e.payload as NodeCancelRequested);
    expect(cancels).toEqual([
      { run_id: runId, node_id: "each", generation: 0, reason: "map_failed", item: 3 },
    ]);
    const failed = bus.state(runId);
    // The request was in the worker's queue before its cancel: it finds the cancel behind it.
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect([...calls].sort()).toEqual([0, 1, 2]);
    expect(bus.handled.filter((h) => h.type === REQUESTED && h.status === "discarded")).toEqual([
      { group: "worker", type: REQUESTED, status: "discarded", reason: "cancelled" },
    ]);
    expect(answersOf(bus, "worker").map((a) => a.item)).not.toContain(3);
    expect(bus.emitted(REQUESTED)).toHaveLength(4);
    const state = bus.state(runId);
    expect(state.run).toEqual(failed.run);
    expect(state.run.nodes.each?.state).toBe("FAILED");
    expect(state.run.nodes.each?.error?.code).toBe("dag.map_failed");
    expect(state.run.status).toBe("PARTIAL");
  });

  it("sends each running item its cancel when the run is cancelled; the queued items never run", async () => {
    const { bus, calls } = busWith();
    const runId = start(bus, "words-strict");
    await bus.drain((d) => d.group !== "worker");
    expect(runningItems(bus, runId)).toBe(2);
    bus.send(bus.command("workflow.cancel.requested", runId, { requested_by: "ops" }));
    await bus.drain((d) => d.group !== "worker");
    const cancelled = bus.state(runId);
    await bus.drain();

    const cancels = bus.emitted(CANCEL).map((e) => e.payload as NodeCancelRequested);
    expect(cancels.map((c) => [c.item, c.reason])).toEqual([
      [0, "run_cancelled"],
      [1, "run_cancelled"],
    ]);
    expect(cancelled.run.status).toBe("CANCELLED");
    expect(cancelled.run.nodes.each?.items).toBeUndefined();
    // The two items' requests were queued before their cancels: neither runs, nothing answers,
    // and no other item is asked for.
    expect(calls).toEqual([]);
    expect(answersOf(bus, "worker")).toEqual([]);
    const discarded = bus.handled.filter((h) => h.type === REQUESTED);
    expect(discarded.map((h) => [h.status, h.reason])).toEqual([
      ["discarded", "cancelled"],
      ["discarded", "cancelled"],
    ]);
    expect(bus.state(runId).run).toEqual(cancelled.run);
    expect(bus.emitted(REQUESTED)).toHaveLength(2);
    expect(bus.deadLettered).toEqual([]);
  });

  it("does not run an item twice for a redelivered request, nor for the request sent again after the map's lease ran out", async () => {
    const { bus, calls } = busWith(true);
    const runId = start(bus, "words-tolerant");
    // Item 1's answer is lost on its way to the orchestrator: the map node's lease runs out.
    const lost = (d: Delivery) =>
      d.group === "orchestrator" && d.event.event_type === "step.completed" && itemOf(d) === 1;
    await bus.drain((d) => !lost(d));
    bus.pending.splice(0, bus.pending.length);
    expect(bus.state(runId).run.nodes.each?.items?.[1]?.state).toBe("RUNNING");
    bus.clock.advance(5 * 3600 * 1000);
    expect(bus.sweep().map((e) => e.event_type)).toContain("node.lease.expired");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    // Item 1 was asked for again, and answered from its record the same way.
    const again = bus
      .emitted(REQUESTED)
      .filter((e) => (e.payload as StepRequested).item?.index === 1);
    expect(again).toHaveLength(2);
    const answers = bus
      .emitted("step.completed")
      .filter((e) => (e.payload as StepCompleted).item === 1)
      .map((e) => (e.payload as StepCompleted).output);
    expect(answers).toEqual([
      { word: "beta", letters: 4 },
      { word: "beta", letters: 4 },
    ]);
    expect([...calls].sort()).toEqual([0, 1, 2, 3, 4]);
    expect(bus.handled.filter((h) => h.group === "worker" && h.status === "duplicate").length).toBe(
      bus.emitted(REQUESTED).length,
    );
  });

  it("refuses a map node whose role does not carry out map items", async () => {
    const { bus } = busWith();
    const runId = start(bus, "words-tallied");
    await bus.drain();

    const payload = bus.emitted("workflow.rejected")[0]?.payload as WorkflowRejected;
    expect(payload.code).toBe("workflow.map_role_without_items");
    expect(payload.message).toContain("map node each runs tally");
    expect(bus.store.states.get(`dag_run#${runId}`)?.data ?? null).toBeNull();
  });
});
