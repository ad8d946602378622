import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { traceIdOf } from "../../functions/core/trace-context";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { loadChildRuns, startWorkflow, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import type { TraceView } from "../../lib/operator/views";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * One trace per run across every hop, on the local stack: long form (v4) runs its fact check as a
 * child run of `content.fact-check`. Every event of the parent's and the child's streams
 * continues one W3C trace id, the child's name their parent run, and `agentbus trace <run>` shows
 * that one trace id and the parent with its child.
 */
const RUN_TIMEOUT = 240_000;

describe("one trace per workflow run, its child run included", () => {
  let env: LocalEnvironment;
  const stage = `tl${ulid().slice(-6).toLowerCase()}`;
  const cli = localCli(() => env, stage);

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "carries the run's trace id into its child run's events, which name the parent, and the CLI's trace shows both",
    async () => {
      const run = await startWorkflow(env, "lineage", "long-form", "peat bog restoration");
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.workflow).toEqual({ name: "content.long-form", version: 4 });
      const [child, ...others] = await loadChildRuns(env, ended);
      expect(others).toEqual([]);
      expect(child?.nodeId).toBe("fact-check");
      expect(child?.state?.run.status).toBe("COMPLETED");
      const childRunId = child?.runId ?? "";

      const streamOf = (id: string) => env.store.readStream({ type: "dag_run", id }, 1, 10_000);
      const [parentEvents, childEvents] = await Promise.all([
        streamOf(run.runId),
        streamOf(childRunId),
      ]);
      expect(parentEvents.length).toBeGreaterThan(0);
      expect(childEvents.length).toBeGreaterThan(0);
      const traceIds = new Set([...parentEvents, ...childEvents].map(traceIdOf));
      expect([...traceIds]).toHaveLength(1);
      const [traceId] = traceIds;
      for (const e of [...parentEvents, ...childEvents])
        expect(e.traceparent, `${e.event_type} ${e.event_id}`).toMatch(
          new RegExp(`^00-${traceId}-[0-9a-f]{16}-[0-9a-f]{2}$`),
        );
      expect(childEvents.map((e) => e.parent_run_id)).toEqual(childEvents.map(() => run.runId));
      expect(parentEvents.filter((e) => e.parent_run_id !== undefined)).toEqual([]);

      const traced = await cli("trace", run.runId, "--json");
      expect(traced.code, traced.stderr).toBe(0);
      const view = JSON.parse(traced.stdout) as TraceView;
      // Every event of the run's correlations, the agents' included, continues the one trace.
      expect(view.traceIds).toEqual([traceId]);
      expect(view.runs).toContainEqual({ runId: run.runId, childRunIds: [childRunId] });
      expect(view.runs).toContainEqual({
        runId: childRunId,
        parentRunId: run.runId,
        childRunIds: [],
      });
      const text = await cli("trace", run.runId);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain(`trace id    ${traceId}`);
      expect(text.stdout).toContain(`run         ${run.runId}, child runs ${childRunId}`);
      expect(text.stdout).toContain(`run         ${childRunId}, child of ${run.runId}`);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
