import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MapItemResult } from "../../functions/core/dag/map";
import type { TopicSelectionOutput } from "../../functions/roles/content-agents/events";
import { CLAIMS_MAY_FAIL } from "../../functions/roles/content-agents/workflows";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  loadRun,
  runCommand,
  startWorkflow,
  waitForRunEnd,
} from "../../lib/dev/local/scenario/workflow";
import { emulator } from "../support/aws";

/**
 * The content-production workflow end to end on the local runtime: the orchestrator and the four
 * content agents (with the DeterministicLocalModel, MODEL_PROVIDER=local) deployed from the
 * synthesized stack, commands put on the commands bus as a client would, and the lease sweeper
 * run by the local runtime on its schedule. A unique stage keeps its
 * resources apart from other test files.
 */
const RUN_TIMEOUT = 180_000;
/**
 * The orchestrator's node leases here (ORCHESTRATOR_LEASE_SECONDS once an agent started,
 * ORCHESTRATOR_QUEUED_LEASE_SECONDS while its request waits): short enough for the sweeper (every
 * 2 s locally) to find a hung node quickly, long enough for a healthy node's round trip through
 * the emulator. One redelivery of an assignment whose lease ran out before its node fails.
 */
const LEASE_SECONDS = 20;

const released = (steps: OrchestratorState["timeline"]) =>
  steps.filter((t) => t.event === "node.released").map((t) => t.node_id);

describe("content-production workflow on the local runtime", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `wf${ulid().slice(-6).toLowerCase()}`,
      envOverrides: {
        ORCHESTRATOR_LEASE_SECONDS: String(LEASE_SECONDS),
        ORCHESTRATOR_QUEUED_LEASE_SECONDS: String(LEASE_SECONDS),
        ORCHESTRATOR_LEASE_REDELIVERIES: "1",
      },
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "quick news completes; a re-run from writing re-runs writing and review only, under a new generation",
    async () => {
      const run = await startWorkflow(env, "quick news", "quick-news", "water reuse in industry");
      const first = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(first.run.status).toBe("COMPLETED");
      expect(released(first.timeline)).toEqual([
        "topic-selection",
        "fact-check",
        "writing",
        "review",
      ]);

      await putOnBus(env, "commands", [
        runCommand("workflow.rerun.requested", run.runId, run.correlationId, {
          node_id: "writing",
        }),
      ]);
      const second = await waitForRunEnd(
        env,
        run.runId,
        RUN_TIMEOUT,
        (s) => s.run.generation > first.run.generation && s.run.status !== "RUNNING",
      );
      expect(second.run.status).toBe("COMPLETED");
      const rerun = second.timeline.slice(first.timeline.length);
      expect(released(rerun)).toEqual(["writing", "review"]);
      for (const step of rerun.filter((t) => t.event === "node.released"))
        expect(step.generation).toBe(second.run.generation);
      const { nodes } = second.run;
      expect(nodes.writing?.assigned_generation).toBe(second.run.generation);
      expect(nodes.review?.assigned_generation).toBe(second.run.generation);
      // Topic selection and fact check kept their first results.
      expect(nodes["topic-selection"]?.output).toEqual(first.run.nodes["topic-selection"]?.output);
      expect(nodes["fact-check"]?.output).toEqual(first.run.nodes["fact-check"]?.output);
      expect(nodes["topic-selection"]?.attempt).toBe(1);
      expect(nodes.writing?.attempt).toBe(2);
    },
    2 * RUN_TIMEOUT + 30_000,
  );

  it(
    "quick news with a disputed claim: the failed map item is within the tolerance and the run completes",
    async () => {
      const hint = `[disputed-claims:${CLAIMS_MAY_FAIL}] night ferries`;
      const run = await startWorkflow(env, "disputed", "quick-news", hint);
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      const check = ended.run.nodes["fact-check"];
      expect(check?.state).toBe("COMPLETED");
      const output = check?.output as { items: MapItemResult[]; failed: number };
      expect(output.failed).toBe(CLAIMS_MAY_FAIL);
      const topic = ended.run.nodes["topic-selection"]?.output as TopicSelectionOutput;
      expect(output.items).toHaveLength(topic.claims?.length ?? 0);
      const failed = output.items.filter((i) => i.status === "failed");
      expect(failed).toEqual([
        expect.objectContaining({
          error: expect.objectContaining({ code: "fact_check.rejected" }),
        }),
      ]);
      expect(ended.run.nodes.review?.state).toBe("COMPLETED");
    },
    RUN_TIMEOUT,
  );

  it(
    "a request that waits in its agent's queue past its lease is sent again, answered once, and the run completes",
    async () => {
      env.runtime.pauseGroup("topic-selection");
      let resumed = false;
      try {
        const run = await startWorkflow(env, "queued", "long-form", "heat pumps in old houses");
        const redelivered = await waitForRunEnd(env, run.runId, RUN_TIMEOUT, (s) =>
          s.timeline.some((t) => t.event === "node.redelivered"),
        );
        expect(redelivered.run.nodes["topic-selection"]?.state).toBe("RUNNING");
        expect(redelivered.leases?.["topic-selection"]?.redeliveries).toBe(1);
        env.runtime.resumeGroup("topic-selection");
        resumed = true;
        const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
        expect(ended.run.status).toBe("COMPLETED");
        await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
        const mine = (type: string) =>
          [...env.observations.envelopes.values()].filter(
            (e) => e.event_type === type && e.correlation_id === run.correlationId,
          );
        // Two copies of the request, one model call, the same answer twice, counted once.
        expect(mine("topic_selection.requested")).toHaveLength(2);
        const calls = env.model
          .calls({ role: "topic-selection" })
          .filter((c) => c.correlationId === run.correlationId);
        expect(calls).toHaveLength(1);
        const answers = mine("topic_selection.completed");
        expect(answers).toHaveLength(2);
        expect(answers[1]?.payload).toEqual(answers[0]?.payload);
        // One request per claim topic selection stated, each a map item.
        const topic = ended.run.nodes["topic-selection"]?.output as
          | TopicSelectionOutput
          | undefined;
        const claims = topic?.claims ?? [];
        expect(claims.length).toBeGreaterThan(0);
        expect(mine("fact_check.requested")).toHaveLength(claims.length);
      } finally {
        if (!resumed) env.runtime.resumeGroup("topic-selection");
      }
    },
    3 * RUN_TIMEOUT,
  );

  it(
    "a hung node: the sweeper finds its lease expired by itself, the DAG ends the run, the late answer is ignored",
    async () => {
      // The topic-selection agent stops taking work, as if its workers had died: the node stays
      // RUNNING until its lease (LEASE_SECONDS locally) runs out and the scheduled sweeper reports it.
      env.runtime.pauseGroup("topic-selection");
      let resumed = false;
      try {
        const run = await startWorkflow(env, "hung", "long-form", "grid storage auctions");
        const running = await waitForRunEnd(
          env,
          run.runId,
          RUN_TIMEOUT,
          (s) => s.run.nodes["topic-selection"]?.state === "RUNNING",
        );
        const lease = running.leases?.["topic-selection"];
        expect(lease?.generation).toBe(running.run.generation);
        const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
        // Not before the lease ran out twice: once, then once more after the one redelivery.
        expect(Date.now()).toBeGreaterThanOrEqual(
          Date.parse(lease?.expires_at ?? "") + LEASE_SECONDS * 1000,
        );
        expect(ended.timeline.filter((t) => t.event === "node.redelivered")).toHaveLength(1);
        // The root failed and nothing completed: the DAG ends the run FAILED, the rest cancelled.
        expect(ended.run.status).toBe("FAILED");
        expect(ended.run.nodes["topic-selection"]).toMatchObject({
          state: "FAILED",
          error: { code: "agent_run.lease_expired", error_class: "transient" },
        });
        expect(ended.run.nodes["topic-selection"]?.error?.message).toContain("lease-sweeper");
        for (const node of ["fact-check", "writing", "review"])
          expect(ended.run.nodes[node]?.state, node).toBe("CANCELLED");
        expect(ended.leases).toEqual({});
        const reports = [...env.observations.envelopes.values()].filter(
          (e) => e.event_type === "node.lease.expired" && e.correlation_id === run.correlationId,
        );
        expect(reports.map((e) => e.producer)).toContain("lease-sweeper");

        // The lost worker comes back; its late answer does not change the run.
        env.runtime.resumeGroup("topic-selection");
        resumed = true;
        await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
        const answered = [...env.observations.envelopes.values()].some(
          (e) =>
            e.event_type === "topic_selection.completed" && e.correlation_id === run.correlationId,
        );
        expect(answered).toBe(true);
        const after = await loadRun(env, run.runId);
        expect(after?.run).toEqual(ended.run);
      } finally {
        if (!resumed) env.runtime.resumeGroup("topic-selection");
      }
    },
    3 * RUN_TIMEOUT,
  );
});
