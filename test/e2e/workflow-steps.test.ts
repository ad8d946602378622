import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { runCommand } from "../../lib/dev/local/scenario/workflow";
import { type LocalEnvironment, startLocal } from "../../lib/local";
import type { StepCompleted } from "../../schemas/events/step";
import { STEPS_APP } from "../fixtures/steps/stack";
import { emulator } from "../support/aws";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * A team's own step role as a node on the local runtime: the application of test/fixtures/steps
 * (built with `new AgentBus` by the local runtime), whose workflow runs topic selection (a content
 * agent, on the local model) and then its `tally` role, started with `workflow.start.requested`
 * on the commands bus. The stack is given the workflow (`workflows`) and adds the hub's
 * orchestrator, which learns the workflow and the step roles from it (`WORKFLOWS`, `STEP_ROLES`).
 */
describe("a workflow mixing a content agent and a team's step role on the local runtime", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      stack: STEPS_APP,
      endpoint: emulator().endpoint,
      stage: `st${ulid().slice(-6).toLowerCase()}`,
    });
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "runs end to end: the content agent's output reaches the step role, whose answer completes the run",
    async () => {
      expect([...env.groups].sort()).toEqual(["orchestrator", "tally", "topic-selection"]);
      const run = { runId: `run_${ulid()}`, correlationId: `corr_${ulid()}` };
      await putOnBus(env, "commands", [
        runCommand("workflow.start.requested", run.runId, run.correlationId, {
          workflow_name: "topic-tally",
          request: { topic_hint: "bicycle lanes in winter" },
        }),
      ]);
      const ended = await waitUntil(
        "the run's end",
        async () => {
          const { state } = await env.store.load({ state: { type: "dag_run", id: run.runId } });
          const data = state?.data as OrchestratorState | undefined;
          return data && data.run.status !== "RUNNING" ? data : undefined;
        },
        120_000,
      );
      expect(ended.run.status).toBe("COMPLETED");
      const topic = ended.run.nodes["topic-selection"]?.output as {
        topic: string;
        sources: string[];
      };
      expect(ended.run.nodes.tally?.output).toEqual({
        topic: topic.topic,
        sources: topic.sources.length,
      });
      await env.runtime.idle();
      const mine = (type: string) =>
        [...env.observations.envelopes.values()].filter(
          (e) => e.event_type === type && e.correlation_id === run.correlationId,
        );
      expect(mine("tally.node.requested")).toHaveLength(1);
      const answers = mine("step.completed").map((e) => e.payload as StepCompleted);
      expect(answers.map((a) => [a.role, a.node_id])).toEqual([["tally", "tally"]]);
      // The step role acknowledged the request (node.started), so its node's lease was its own.
      expect(mine("node.started").map((e) => (e.payload as { agent: string }).agent)).toContain(
        "tally",
      );
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
