import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { childRunId } from "../../functions/core/dag/assignment";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT } from "../../functions/core/dag/registry";
import { type StepRun, stepRunKey } from "../../functions/core/step-role";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import {
  loadRun,
  runCommand,
  startWorkflow,
  waitForRunEnd,
} from "../../lib/dev/local/scenario/workflow";
import { registryOf } from "../../lib/operator/workflows";
import type { Envelope } from "../../schemas";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";
import { STEPS_APP } from "../fixtures/steps/stack";
import { emulator } from "../support/aws";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * The workflow language's constructs on the local stack, on the application of
 * test/fixtures/steps (topic selection, a content agent, and the team's `tally` step role, which
 * counts the sources of the topic selection's output under its node id and refuses an input
 * without it, `step.invalid_input`): workflows registered at run time and started by name. A
 * quorum join met and missed; a first-wins join whose losing branch's request, still queued, is
 * discarded unrun, and one whose losing branch already ran and answers late; wait nodes released
 * by their timer and failed by their deadline; a loop that hits its maximum; a child run cancelled
 * with its parent. Consumer groups are paused to hold a request in its queue; nothing waits on
 * time but the wait nodes' own two seconds.
 */

const RUN_TIMEOUT = 180_000;
const ROLES = ["topic-selection", "tally"];
const CANCEL = "tally.node.cancel.requested";

/** `topic-selection` (a root) feeding each of `counts`: tally nodes that complete. */
const countsOfTopic = (counts: readonly string[]) => ({
  nodes: counts.map((id) => ({ id, role: "tally" })),
  edges: counts.map((to) => ({ from: "topic-selection", to })),
});

/** Root tally nodes: without topic selection's output in their input they fail. */
const failingCounts = (ids: readonly string[]) => ids.map((id) => ({ id, role: "tally" }));

/** A join node `report` (topic selection again, which needs only the run's topic hint) over `from`. */
const report = (join: Record<string, unknown>, from: readonly string[]) => ({
  node: { id: "report", role: "topic-selection", ...join },
  edges: from.map((f) => ({ from: f, to: "report" })),
});

function quorum(name: string, passing: readonly string[], failing: readonly string[]) {
  const counted = countsOfTopic(passing);
  const join = report({ join: "quorum", quorum: 2 }, [...passing, ...failing]);
  return {
    name,
    nodes: [
      { id: "topic-selection", role: "topic-selection" },
      ...counted.nodes,
      ...failingCounts(failing),
      join.node,
    ],
    edges: [...counted.edges, ...join.edges],
  };
}

/** Topic selection, then two tally nodes racing into a first-wins join. */
function firstCount() {
  const counted = countsOfTopic(["count-a", "count-b"]);
  const join = report({ join: "first-wins" }, ["count-a", "count-b"]);
  return {
    name: "first-count",
    nodes: [{ id: "topic-selection", role: "topic-selection" }, ...counted.nodes, join.node],
    edges: [...counted.edges, ...join.edges],
  };
}

/** As an operator puts them: without a version (each becomes version 1). */
const DEFINITIONS: Omit<WorkflowDefinitionInput, "version">[] = [
  quorum("quorum-met", ["count-a", "count-b"], ["count-c"]),
  quorum("quorum-missed", ["count-a"], ["count-b", "count-c"]),
  {
    // Topic selection races a tally node; the winner's output feeds the tally of `tally`.
    name: "first-pick",
    nodes: [
      { id: "topic-selection", role: "topic-selection" },
      { id: "count", role: "tally" },
      { id: "tally", role: "tally", join: "first-wins" },
    ],
    edges: [
      { from: "topic-selection", to: "tally" },
      { from: "count", to: "tally" },
    ],
  },
  firstCount(),
  {
    name: "timed-waits",
    nodes: [
      { id: "pause", wait: { seconds: 2 } },
      { id: "gate", wait: { signal: "never-sent", seconds: 2 } },
    ],
  },
  {
    // The tally never counts 0 sources: the loop runs its 2 rounds and keeps the last output.
    name: "recount",
    nodes: [
      { id: "topic-selection", role: "topic-selection" },
      { id: "tally", role: "tally" },
    ],
    edges: [
      { from: "topic-selection", to: "tally" },
      {
        from: "tally",
        to: "tally",
        loop: { until: { path: "sources", equals: 0 }, maxRounds: 2 },
      },
    ],
  },
  { name: "held", nodes: [{ id: "gate", wait: { signal: "go", seconds: 3600 } }] },
  { name: "holds-child", nodes: [{ id: "child", workflow: { name: "held" } }] },
];

describe("workflow constructs on the local stack", () => {
  let env: LocalEnvironment;
  const stage = `wk${ulid().slice(-6).toLowerCase()}`;

  const runStream = (runId: string) =>
    env.store.readStream({ type: "dag_run", id: runId }, 1, Number.MAX_SAFE_INTEGER);
  const cancelsOf = async (runId: string): Promise<NodeCancelRequested[]> =>
    (await runStream(runId))
      .filter((e) => e.event_type === CANCEL)
      .map((e) => e.payload as NodeCancelRequested);
  const stepRunOf = async (runId: string, node: string): Promise<StepRun | undefined> => {
    const id = stepRunKey(runId, node, 0);
    const { state } = await env.store.load({ state: { type: "step_run", id } });
    return state?.data as StepRun | undefined;
  };
  /** What the tally role answered for `node` of the run (the stream of its step run). */
  const answersOf = (runId: string, node: string) =>
    env.store.readStream({ type: "step_run", id: stepRunKey(runId, node, 0) }, 1, 100);
  const start = async (workflow: string) =>
    (await startWorkflow(env, workflow, workflow, `${workflow} on night trains`)).runId;
  const nodeStates = (state: OrchestratorState) =>
    Object.fromEntries(Object.entries(state.run.nodes).map(([id, n]) => [id, n.state]));
  /** Holds a group's messages in its queue while `body` runs (released also when it throws). */
  async function paused<T>(groups: readonly string[], body: () => Promise<T>): Promise<T> {
    for (const group of groups) env.runtime.pauseGroup(group);
    try {
      return await body();
    } finally {
      for (const group of groups) env.runtime.resumeGroup(group);
    }
  }

  beforeAll(async () => {
    env = await startLocal({ stack: STEPS_APP, endpoint: emulator().endpoint, stage });
    const registry = registryOf(env.ops);
    for (const definition of DEFINITIONS)
      await putWorkflow(registry, EVERY_TENANT, definition, { roles: ROLES });
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "a quorum join runs once 2 of its 3 branches succeeded, with those two; the failed one ends on its own",
    async () => {
      const ended = await waitForRunEnd(env, await start("quorum-met"), RUN_TIMEOUT);
      expect(nodeStates(ended)).toEqual({
        "topic-selection": "COMPLETED",
        "count-a": "COMPLETED",
        "count-b": "COMPLETED",
        "count-c": "FAILED",
        report: "COMPLETED",
      });
      expect([...(ended.run.nodes.report?.joined ?? [])].sort()).toEqual(["count-a", "count-b"]);
      expect(ended.run.nodes["count-c"]?.error?.code).toBe("step.invalid_input");
      // A node failed beside the join: the run produced its report and ends PARTIAL.
      expect(ended.run.status).toBe("PARTIAL");
    },
    RUN_TIMEOUT,
  );

  it(
    "a quorum join that can no longer get 2 successes is cancelled and its role never asked",
    async () => {
      const runId = await start("quorum-missed");
      const ended = await waitForRunEnd(env, runId, RUN_TIMEOUT);
      expect(nodeStates(ended)).toEqual({
        "topic-selection": "COMPLETED",
        "count-a": "COMPLETED",
        "count-b": "FAILED",
        "count-c": "FAILED",
        report: "CANCELLED",
      });
      expect(ended.run.status).toBe("PARTIAL");
      const asked = (await runStream(runId))
        .filter((e) => e.event_type === "topic_selection.requested")
        .map((e) => (e.payload as { node_id: string }).node_id);
      expect(asked).toEqual(["topic-selection"]);
    },
    RUN_TIMEOUT,
  );

  it(
    "first-wins: the winner's output goes on; the loser, still queued, is cancelled (first_wins) and discarded unrun",
    async () => {
      const runId = await paused(["tally"], async () => {
        const id = await start("first-pick");
        // The tally role takes nothing: the branch `count` waits in its queue while topic
        // selection wins the join, and its cancel is committed behind its request.
        await waitForRunEnd(env, id, RUN_TIMEOUT, (s) => s.run.nodes.count?.state === "SKIPPED");
        return id;
      });
      const ended = await waitForRunEnd(env, runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      expect(nodeStates(ended)).toEqual({
        "topic-selection": "COMPLETED",
        count: "SKIPPED",
        tally: "COMPLETED",
      });
      expect(ended.run.nodes.tally?.joined).toEqual(["topic-selection"]);
      const picked = ended.run.nodes["topic-selection"]?.output as { sources: string[] };
      expect(ended.run.nodes.tally?.output).toMatchObject({ sources: picked.sources.length });
      expect(await cancelsOf(runId)).toEqual([
        { run_id: runId, node_id: "count", generation: 0, reason: "first_wins" },
      ]);
      // The loser's request found its cancel behind it: discarded, its step never run.
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      const request = (await runStream(runId)).find(
        (e) =>
          e.event_type === "tally.node.requested" &&
          (e.payload as { node_id: string }).node_id === "count",
      ) as Envelope;
      expect(env.observations.deliveries.get(request.event_id)).toContainEqual(
        expect.objectContaining({ group: "tally", status: "discarded", reason: "cancelled" }),
      );
      expect(await stepRunOf(runId, "count")).toMatchObject({ status: "CANCELLED" });
      expect((await stepRunOf(runId, "count"))?.answer).toBeUndefined();
      expect(await answersOf(runId, "count")).toEqual([]);
    },
    3 * RUN_TIMEOUT,
  );

  it(
    "first-wins: both branches ran, the first answer wins, the loser is cancelled and its late answer ignored",
    async () => {
      const runId = await paused(["tally"], async () => {
        const id = await start("first-count");
        await waitForRunEnd(
          env,
          id,
          RUN_TIMEOUT,
          (s) =>
            s.run.nodes["count-a"]?.state === "RUNNING" &&
            s.run.nodes["count-b"]?.state === "RUNNING",
        );
        return id;
      });
      // The orchestrator takes nothing until both counts have answered.
      await paused(["orchestrator"], () =>
        waitUntil(
          "both counts answered",
          async () => {
            const runs = await Promise.all(["count-a", "count-b"].map((n) => stepRunOf(runId, n)));
            return runs.every((r) => r?.status === "COMPLETED") ? true : undefined;
          },
          RUN_TIMEOUT,
        ),
      );
      const ended = await waitForRunEnd(env, runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      const [winner] = ended.run.nodes.report?.joined ?? [];
      const loser = winner === "count-a" ? "count-b" : "count-a";
      expect(["count-a", "count-b"]).toContain(winner);
      expect(ended.run.nodes[loser]?.state).toBe("SKIPPED");
      expect(ended.run.nodes[loser]?.output).toBeUndefined();
      expect(await cancelsOf(runId)).toEqual([
        { run_id: runId, node_id: loser, generation: 0, reason: "first_wins" },
      ]);
      // The loser's answer reached the orchestrator after the cancel and changed nothing.
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      const [late] = await answersOf(runId, loser);
      expect(late?.event_type).toBe("step.completed");
      expect(env.observations.deliveries.get(late?.event_id ?? "")).toContainEqual(
        expect.objectContaining({ group: "orchestrator" }),
      );
      expect((await loadRun(env, runId))?.run).toEqual(ended.run);
    },
    4 * RUN_TIMEOUT,
  );

  it(
    "wait nodes: one released by its timer, one whose signal never came failed by its deadline",
    async () => {
      const ended = await waitForRunEnd(env, await start("timed-waits"), RUN_TIMEOUT);
      expect(ended.run.nodes.pause).toMatchObject({
        state: "COMPLETED",
        output: { released_by: "timer" },
      });
      expect(ended.run.nodes.gate).toMatchObject({
        state: "FAILED",
        error: { code: "dag.wait_deadline" },
      });
      expect(ended.run.status).toBe("PARTIAL");
    },
    RUN_TIMEOUT,
  );

  it(
    "a loop whose condition never holds ends at its maximum rounds, keeping the last round's output",
    async () => {
      const runId = await start("recount");
      const ended = await waitForRunEnd(env, runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.loops?.tally).toMatchObject({ round: 2, ended: "max_rounds" });
      const requests = (await runStream(runId)).filter(
        (e) => e.event_type === "tally.node.requested",
      );
      const rounds = requests.map((e) => (e.payload as { loop?: { round: number } }).loop?.round);
      expect(rounds).toEqual([undefined, 2]);
      const picked = ended.run.nodes["topic-selection"]?.output as { sources: string[] };
      expect(ended.run.nodes.tally?.output).toMatchObject({ sources: picked.sources.length });
    },
    RUN_TIMEOUT,
  );

  it(
    "a child run still waiting is cancelled with its parent",
    async () => {
      const runId = await start("holds-child");
      const childId = childRunId(runId, "child", 1);
      await waitUntil(
        "the child's wait node waiting",
        async () =>
          (await loadRun(env, childId))?.run.nodes.gate?.state === "RUNNING" ? true : undefined,
        RUN_TIMEOUT,
      );
      await putOnBus(env, "commands", [
        runCommand("workflow.cancel.requested", runId, `corr_${ulid()}`, {
          requested_by: "e2e",
          reason: "not needed",
        }),
      ]);
      const parent = await waitForRunEnd(env, runId, RUN_TIMEOUT);
      expect(parent.run.status).toBe("CANCELLED");
      expect(parent.run.nodes.child?.state).toBe("CANCELLED");
      const child = await waitForRunEnd(env, childId, RUN_TIMEOUT);
      expect(child.run.status).toBe("CANCELLED");
      expect(child.run.nodes.gate?.state).toBe("CANCELLED");
      const cancelled = (await runStream(childId)).find(
        (e) => e.event_type === "workflow.cancelled",
      );
      expect(cancelled?.payload).toMatchObject({ requested_by: "orchestrator" });
    },
    RUN_TIMEOUT,
  );
});
