import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEPENDENCY_TIMEOUT } from "../../functions/roles/orchestrator/waits";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { startWorkflow, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { emulator } from "../support/aws";

/**
 * The dependency timeout end to end on the local stack: with the topic-selection agent taking no
 * work, the nodes that wait for its output give up when their dependency timeout
 * (ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS here) runs out: the scheduled sweeper reports
 * `node.dependency.expired`, the nodes waiting on it end FAILED with `agent_run.dependency_timeout`
 * and the nodes below them CANCELLED; none of them is ever sent to an agent. The run ends once
 * the late upstream does.
 */

const STAGE = `dep${ulid().slice(-6).toLowerCase()}`;
const RUN_TIMEOUT = 120_000;
const DEPENDENCY_SECONDS = 6;

describe("dependency timeout on the local stack", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: STAGE,
      envOverrides: { ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS: String(DEPENDENCY_SECONDS) },
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "nodes whose input never comes end FAILED with agent_run.dependency_timeout, and the run ends",
    async () => {
      env.runtime.pauseGroup("topic-selection");
      let resumed = false;
      try {
        const started = Date.now();
        const run = await startWorkflow(env, "stalled", "quick-news", "ferry electrification");
        const timedOut = await waitForRunEnd(
          env,
          run.runId,
          RUN_TIMEOUT,
          // Fact check and writing both wait for topic selection, each on its own timeout.
          (s) => ["fact-check", "writing"].every((id) => s.run.nodes[id]?.state !== "PENDING"),
        );
        expect(Date.now() - started).toBeGreaterThanOrEqual(DEPENDENCY_SECONDS * 1000);
        expect(timedOut.run.nodes["fact-check"]).toMatchObject({
          state: "FAILED",
          error: { code: DEPENDENCY_TIMEOUT },
        });
        expect(timedOut.run.nodes["fact-check"]?.error?.message).toContain("topic-selection");
        // Writing, beside it, failed with the same timeout; review, below both, is cancelled by
        // their failure or, when its own wait ran out in the same sweep, failed with the same
        // timeout: either way it never runs.
        expect(timedOut.run.nodes.writing).toMatchObject({
          state: "FAILED",
          error: { code: DEPENDENCY_TIMEOUT },
        });
        const review = timedOut.run.nodes.review;
        if (review?.state === "FAILED") expect(review.error?.code).toBe(DEPENDENCY_TIMEOUT);
        else expect(review?.state).toBe("CANCELLED");
        expect(timedOut.run.nodes["topic-selection"]?.state).toBe("RUNNING");
        expect(timedOut.run.status).toBe("RUNNING");

        env.runtime.resumeGroup("topic-selection");
        resumed = true;
        const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
        expect(["PARTIAL", "FAILED"]).toContain(ended.run.status);
        expect(ended.run.nodes["topic-selection"]?.state).toBe("COMPLETED");
        const mine = (type: string) =>
          [...env.observations.envelopes.values()].filter(
            (e) => e.event_type === type && e.correlation_id === run.correlationId,
          );
        expect(mine("node.dependency.expired").length).toBeGreaterThanOrEqual(1);
        expect(mine("fact_check.requested")).toEqual([]);
        // The run's end is committed with its state, once, in the run's stream.
        const endType = `workflow.${ended.run.status.toLowerCase()}`;
        const stream = await env.store.readStream({ type: "dag_run", id: run.runId }, 1, 1000);
        expect(stream.filter((e) => e.event_type === endType)).toHaveLength(1);
      } finally {
        if (!resumed) env.runtime.resumeGroup("topic-selection");
      }
    },
    2 * RUN_TIMEOUT + 30_000,
  );
});
