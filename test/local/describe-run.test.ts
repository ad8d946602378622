import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { childRunId } from "../../functions/core/dag/assignment";
import { consume } from "../../functions/core/pipeline";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { describeRun } from "../../lib/dev/local/scenario/workflow";
import { type Envelope, registry } from "../../schemas";
import { makeDeps } from "../core/fixtures";
import { referenceOrchestrator } from "../support/reference";

/**
 * What a bench or an end-to-end test says of a run that did not end in time: each node's state,
 * down into the child run its child node waits for, so that a stuck run shows where it stopped.
 */

const T0 = "2026-09-01T10:00:00.000Z";

describe("describeRun", () => {
  it("names each node's state, a map's items and lease, what is held and why, and a RUNNING child node's run", async () => {
    let depth = 0;
    const role = referenceOrchestrator({
      queueDepth: (groups) => Object.fromEntries(groups.map((g) => [g, depth])),
    });
    const { store, deps } = makeDeps(T0);
    const runId = `run_${ulid()}`;
    const send = (event: Envelope) => consume(event, role, deps);
    const message = (type: string, aggregate: Envelope["aggregate"], payload: object) =>
      ({
        event_id: ulid(),
        event_type: type,
        schema_version: registry.find(type)?.schemaVersion ?? 1,
        occurred_at: T0,
        correlation_id: `corr_${ulid()}`,
        causation_id: null,
        task_id: `task_${runId.slice(4)}`,
        aggregate,
        order_key: runId,
        producer: "test",
        attempt: 1,
        payload,
      }) as Envelope;
    await send(
      message(
        "workflow.start.requested",
        { type: "dag_run", id: runId, version: 0 },
        { run_id: runId, workflow_name: "long-form", request: { topic_hint: "tides" } },
      ),
    );
    const claims = ["The tide turns twice a day.", "The moon drives it."];
    const topic = { topic: "t", angle: "a", sources: ["s"], claims };
    const answer = message(
      "topic_selection.completed",
      { type: "agent_run", id: `ar_${ulid()}`, version: 1 },
      { run_id: runId, node_id: "topic-selection", generation: 0, output: topic },
    );
    const answered = await send(answer);
    const childStart = answered.steps
      .at(-1)
      ?.emitted.find((e) => e.event_type === "workflow.child.start.requested");
    // The child's map finds the fact checkers' queue deep: every claim held back.
    depth = 500;
    await send(childStart as Envelope);

    const env = {
      store: { load: (request: never) => store.load(request) },
    } as unknown as LocalEnvironment;
    const state = store.states.get(`dag_run#${runId}`)?.data as OrchestratorState;
    const childId = childRunId(runId, "fact-check", 1);
    const lease = "lease to 2026-09-01T14:00:00.000Z";
    expect(await describeRun(env, state)).toBe(
      `RUNNING: fact-check=RUNNING [child ${childId} RUNNING: fact-check=RUNNING items PENDING,PENDING ${lease}; held fact-check (queue_depth)], review=PENDING, topic-selection=COMPLETED, writing=PENDING`,
    );
  });
});
