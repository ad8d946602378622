import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { defineStepModule } from "../../functions/core/role-module";
import type { StepContext } from "../../functions/core/step-role";
import { stepRolesOf } from "../../functions/core/steps";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { StepCompleted, StepRequested } from "../../schemas/events/step";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";
import * as z from "../../schemas/zod";
import { Bus, type Delivery } from "./workflow-bus";

/**
 * Loops and joins run by the orchestrator with step roles written with the kit, on the in-memory
 * bus through the pipeline every consumer runs: a bounded loop whose step sees its round and the
 * round before's output, a first-wins join whose losing branch is told to stop, a quorum join.
 */

type Step = (input: Record<string, unknown>, context: StepContext) => Record<string, unknown>;

/** A step role of `group` that runs `step`; `contexts` records what each run was told. */
function stepModule(group: string, step: Step) {
  const contexts: StepContext[] = [];
  const module = defineStepModule({
    group,
    entry: "test/core/workflow-loops.test.ts",
    steps: {
      input: z.looseObject({}),
      output: z.looseObject({}),
      run: () => (input: Record<string, unknown>, context) => {
        contexts.push(context);
        return step(input, context);
      },
    },
  });
  return { module, contexts };
}

/** A draft per round; it is good from round `good_from` of the run's input. */
const drafter = () =>
  stepModule("drafter", (input, context) => {
    const round = context.loop?.round ?? 1;
    return { draft: round, ok: round >= Number(input.good_from) };
  });
/** Publishes the loop's last draft (the output of node `draft`). */
const publisher = () => stepModule("publisher", (input) => ({ published: input.draft }));
const echo = (group: string) => stepModule(group, (_input, context) => ({ by: context.nodeId }));

/** Draft again until the draft is ok, `maxRounds` at most; then publish. */
const drafts = (name: string, loop: { maxRounds: number; onMax?: "complete" | "fail" }) =>
  defineWorkflow({
    name,
    version: 1,
    nodes: [
      { id: "draft", role: "drafter" },
      { id: "publish", role: "publisher" },
    ],
    edges: [
      { from: "draft", to: "draft", loop: { until: { path: "ok", equals: true }, ...loop } },
      { from: "draft", to: "publish" },
    ],
  });

const flow = (name: string, nodes: WorkflowDefinitionInput["nodes"], to: string) =>
  defineWorkflow({
    name,
    version: 1,
    nodes,
    edges: nodes.filter((n) => n.id !== to).map((n) => ({ from: n.id, to })),
  });

/** The content agents in a loop: write, review, and write again, two rounds. */
const rewrite = defineWorkflow({
  name: "rewrite",
  version: 1,
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    { id: "writing", role: "writing" },
    { id: "review", role: "review" },
  ],
  edges: [
    { from: "topic-selection", to: "writing" },
    { from: "writing", to: "review" },
    { from: "review", to: "writing", loop: { until: { path: "edits", equals: -1 }, maxRounds: 2 } },
  ],
});

const WORKFLOWS = [
  rewrite,
  drafts("drafts", { maxRounds: 3 }),
  drafts("drafts-complete", { maxRounds: 2 }),
  drafts("drafts-fail", { maxRounds: 2, onMax: "fail" }),
  flow(
    "race",
    [
      { id: "fast", role: "quick" },
      { id: "slow", role: "slowpoke" },
      { id: "pick", role: "picker", join: "first-wins" },
    ],
    "pick",
  ),
  flow(
    "vote",
    [
      { id: "a", role: "voter" },
      { id: "b", role: "voter" },
      { id: "c", role: "voter" },
      { id: "count", role: "picker", join: "quorum", quorum: 2 },
    ],
    "count",
  ),
];

function busWith() {
  const steps = {
    drafter: drafter(),
    publisher: publisher(),
    quick: echo("quick"),
    slowpoke: echo("slowpoke"),
    voter: echo("voter"),
    picker: stepModule("picker", (input) => ({ took: Object.keys(input).sort() })),
  };
  const modules = Object.values(steps).map((s) => s.module);
  const orchestrator = orchestratorRole({
    stepRoles: stepRolesOf([...contentAgentModules, ...modules]),
    workflows: WORKFLOWS,
  });
  return { bus: new Bus({ orchestrator, modules }), steps };
}

function start(bus: Bus, workflow: string, goodFrom = 1): string {
  const runId = `run_${ulid()}`;
  const request = { topic_hint: "loops", good_from: goodFrom };
  bus.send(bus.command("workflow.start.requested", runId, { workflow, request }));
  return runId;
}

const DRAFT = "drafter.node.requested";
const requestOf = (d: Delivery) => d.event.payload as StepRequested;

describe("a loop run by the orchestrator", () => {
  it("runs the body again with the round and the round before's output, until its condition holds", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "drafts", 2);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.loops?.draft).toMatchObject({ round: 2, ended: "condition" });
    const requests = bus.emitted(DRAFT).map((e) => e.payload as StepRequested);
    expect(requests.map((r) => [r.generation, r.loop])).toEqual([
      [0, undefined],
      [1, { exit: "draft", round: 2, previous: { draft: { draft: 1, ok: false } } }],
    ]);
    expect(steps.drafter.contexts.map((c) => c.loop)).toEqual([undefined, requests[1]?.loop]);
    expect(state.run.nodes.publish?.output).toEqual({ published: { draft: 2, ok: true } });
  });

  it("ends at its last round keeping the last output under onMax complete", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "drafts-complete", 9);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.loops?.draft).toMatchObject({ round: 2, ended: "max_rounds" });
    expect(steps.drafter.contexts.map((c) => c.loop?.round ?? 1)).toEqual([1, 2]);
    expect(state.run.nodes.publish?.output).toEqual({ published: { draft: 2, ok: false } });
  });

  it("fails its last node at its last round under onMax fail", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "drafts-fail", 9);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("FAILED");
    expect(state.run.nodes.draft).toMatchObject({
      state: "FAILED",
      error: { code: "dag.loop_max_rounds" },
    });
    expect(state.run.nodes.publish?.state).toBe("CANCELLED");
    expect(steps.drafter.contexts).toHaveLength(2);
    expect(steps.publisher.contexts).toEqual([]);
  });

  it("does not run a round's request sent again, and ignores its late answer in the next round", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "drafts", 2);
    // Round 1's request waits in the drafter's queue past its lease: it is sent again.
    await bus.drain((d) => d.group !== "drafter");
    bus.clock.advance(5 * 3600 * 1000);
    expect(bus.sweep().map((e) => e.event_type)).toEqual(["node.lease.expired"]);
    await bus.drain((d) => d.group !== "drafter");
    const [first, again] = bus.pending.filter((d) => d.event.event_type === DRAFT);
    expect([first, again].map((d) => d && requestOf(d).generation)).toEqual([0, 0]);
    // The first copy runs: round 2 begins, and its request waits.
    await bus.drain((d) => d.group !== "drafter" || d === first);
    const round2 = bus.state(runId);
    expect(round2.run.loops?.draft?.round).toBe(2);
    expect(bus.pending.map((d) => requestOf(d).generation)).toEqual([0, 1]);
    // The copy is answered from round 1's record without running, and the answer is stale.
    await bus.drain((d) => d.group !== "drafter" || d === again);
    expect(bus.state(runId)).toEqual(round2);
    const answers = bus.emitted("step.completed").map((e) => e.payload as StepCompleted);
    expect(answers.map((a) => [a.node_id, a.generation])).toEqual([
      ["draft", 0],
      ["draft", 0],
    ]);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(steps.drafter.contexts.map((c) => c.generation)).toEqual([0, 1]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });
});

describe("a loop over content agents", () => {
  it("hands the writer the round and the round before's draft and review", async () => {
    const { bus } = busWith();
    const runId = start(bus, "rewrite");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.loops?.review).toMatchObject({ round: 2, ended: "max_rounds" });
    const requests = bus.emitted("writing.requested").map((e) => e.payload as StepRequested);
    expect(requests.map((r) => r.generation)).toEqual([0, 1]);
    expect(requests[0]?.loop).toBeUndefined();
    expect(requests[1]?.loop).toMatchObject({ exit: "review", round: 2 });
    expect(Object.keys(requests[1]?.loop?.previous ?? {}).sort()).toEqual(["review", "writing"]);
    // One agent run per round.
    const runs = bus.emitted("writing.completed").map((e) => e.aggregate.id);
    expect(new Set(runs).size).toBe(2);
  });
});

describe("joins run by the orchestrator", () => {
  it("first-wins: runs with the first branch and tells the loser to stop, whose queued request is discarded unrun", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "race");
    await bus.drain((d) => d.group !== "slowpoke");
    const cancels = bus.emitted("slowpoke.node.cancel.requested");
    expect(cancels.map((e) => e.payload as NodeCancelRequested)).toEqual([
      { run_id: runId, node_id: "slow", generation: 0, reason: "first_wins" },
    ]);
    const won = bus.state(runId);
    expect(won.run.status).toBe("COMPLETED");
    expect(won.run.nodes.slow?.state).toBe("SKIPPED");
    expect(won.run.nodes.pick?.output).toEqual({ took: ["fast", "good_from", "topic_hint"] });
    // The slow step's request was in its queue before the cancel: it finds the cancel behind it.
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(steps.slowpoke.contexts).toEqual([]);
    expect(bus.handled.filter((h) => h.group === "slowpoke")).toEqual([
      {
        group: "slowpoke",
        type: "slowpoke.node.requested",
        status: "discarded",
        reason: "cancelled",
      },
      { group: "slowpoke", type: "slowpoke.node.cancel.requested", status: "applied" },
    ]);
    expect(
      bus.emitted("step.completed").map((e) => (e.payload as StepCompleted).role),
    ).not.toContain("slowpoke");
    expect(bus.state(runId)).toEqual(won);
  });

  it("first-wins: a loser that already ran answers late, and its answer changes nothing", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "race");
    // Both branches run; the slow one's answer reaches the orchestrator after the fast one's.
    const slowAnswer = (d: Delivery) =>
      d.group === "orchestrator" && (d.event.payload as { role?: string }).role === "slowpoke";
    await bus.drain((d) => !slowAnswer(d));
    expect(steps.slowpoke.contexts).toHaveLength(1);
    const won = bus.state(runId);
    expect(won.run.nodes.slow?.state).toBe("SKIPPED");
    expect(bus.emitted("slowpoke.node.cancel.requested")).toHaveLength(1);
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    expect(steps.slowpoke.contexts).toHaveLength(1);
    const answers = bus.emitted("step.completed").map((e) => e.payload as StepCompleted);
    expect(answers.filter((a) => a.role === "slowpoke").map((a) => a.node_id)).toEqual(["slow"]);
    expect(bus.state(runId)).toEqual(won);
  });

  it("quorum: runs with the first two branches, and the third still finishes", async () => {
    const { bus, steps } = busWith();
    const runId = start(bus, "vote");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.nodes.count?.joined).toEqual(["a", "b"]);
    expect(state.run.nodes.count?.output).toEqual({ took: ["a", "b", "good_from", "topic_hint"] });
    expect(state.run.nodes.c).toMatchObject({ state: "COMPLETED", output: { by: "c" } });
    expect(steps.voter.contexts.map((c) => c.nodeId).sort()).toEqual(["a", "b", "c"]);
  });
});
