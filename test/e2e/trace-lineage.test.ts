import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { traceIdOf } from "../../functions/core/trace-context";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { loadChildRuns, startWorkflow, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import type { TraceNode, TraceView } from "../../lib/operator/views";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { captureOutput } from "../support/log-capture";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * One trace per run across every hop, on the local stack: long form (v4) runs its fact check as a
 * child run of `content.fact-check`. Every event of the parent's and the child's streams
 * continues one W3C trace id, the child's name their parent run, and `agentbus trace <run>` shows
 * that one trace id and the parent with its child. The run's events replayed from the archive to
 * the orchestrator are handled under that trace id again.
 */
const RUN_TIMEOUT = 240_000;

/** The ids of the events of a trace's tree. */
const eventIdsOf = (nodes: readonly TraceNode[]): string[] =>
  nodes.flatMap((n) => [n.event.eventId, ...eventIdsOf(n.children)]);

// Every handler logs each step it consumed at INFO, with the trace id it continues.
process.env.POWERTOOLS_LOG_LEVEL = "INFO";

describe("one trace per workflow run, its child run included", () => {
  let env: LocalEnvironment;
  const stage = `tl${ulid().slice(-6).toLowerCase()}`;
  const cli = localCli(() => env, stage, { AGENTBUS_OPERATOR: "ops-oncall" });
  /** What the first test saw: the run, its child run, their events' one trace id, the window. */
  const seen = {
    runId: "",
    childRunId: "",
    traceId: "",
    eventIds: [] as string[],
    from: "",
    to: "",
  };

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "carries the run's trace id into its child run's events, which name the parent, and the CLI's trace shows both",
    async () => {
      seen.from = new Date(Date.now() - 1000).toISOString();
      const run = await startWorkflow(env, "lineage", "long-form", "peat bog restoration");
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      await env.runtime.idle();
      seen.to = new Date().toISOString();
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
      Object.assign(seen, {
        runId: run.runId,
        childRunId,
        traceId,
        eventIds: eventIdsOf(view.roots),
      });
      const text = await cli("trace", run.runId);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain(`trace id    ${traceId}`);
      expect(text.stdout).toContain(`run         ${run.runId}, child runs ${childRunId}`);
      expect(text.stdout).toContain(`run         ${childRunId}, child of ${run.runId}`);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "handles the run's events replayed from the archive under the run's trace id",
    async () => {
      expect(seen.traceId).not.toBe("");
      const capture = captureOutput();
      try {
        const window = ["--from", seen.from, "--to", seen.to];
        const replay = await cli(
          "replay",
          ...window,
          "--group",
          "orchestrator",
          "--reason",
          "trace",
        );
        expect(replay.code, replay.stderr).toBe(0);
        const ids = new Set(seen.eventIds);
        const handled = await waitUntil(
          "the orchestrator's log lines of the replayed run events",
          async () => {
            const lines = capture.logLines().filter((l) => ids.has(String(l.event_id)));
            return lines.length > 0 ? lines : undefined;
          },
          120_000,
        );
        expect(handled.map((l) => l.trace_id)).toEqual(handled.map(() => seen.traceId));
      } finally {
        capture.stop();
      }
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
