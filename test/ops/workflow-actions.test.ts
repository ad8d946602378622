import { describe, expect, it } from "vitest";
import { onNodeCompleted, onNodeFailed, startRun } from "../../functions/core/dag/engine";
import { contentWorkflowFor } from "../../functions/roles/content-agents/workflows";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { runRequestCommand, runRequestProblem } from "../../lib/operator/workflow-actions";

/** The checks an operator's run request passes before anything is sent (CLI and console). */

const RUN = "run_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const boom = { code: "model.invalid_output", message: "never in shape" };
const draft = { title: "By hand", body: "Written by a person." };

/** Long form: topic selection completed, fact check completed, writing FAILED, review CANCELLED. */
function failedWriting(): OrchestratorState {
  const def = contentWorkflowFor({ kind: "long-form" });
  let t = startRun(def, RUN, { topic_hint: "tides" });
  t = onNodeCompleted(t.run, def, "topic-selection", { topic: "t", angle: "a", sources: ["s"] }, 0);
  t = onNodeCompleted(
    t.run,
    def,
    "fact-check",
    { verdict: "pass", checked_claims: 1, notes: "ok" },
    0,
  );
  t = onNodeFailed(t.run, def, "writing", boom, 0);
  return { workflow: "long-form", run: t.run, held: [], timeline: [], leases: {} };
}

describe("runRequestProblem", () => {
  const state = failedWriting();

  it("accepts a resolve of the FAILED node with an output that fits its role", () => {
    expect(
      runRequestProblem(RUN, state, { kind: "resolve", nodeId: "writing", output: draft }),
    ).toBeUndefined();
    expect(runRequestProblem(RUN, state, { kind: "reset", nodeId: "writing" })).toBeUndefined();
  });

  it("names what is wrong: no run, no node, not FAILED, an output that does not fit, too big", () => {
    const problem = (
      req: Parameters<typeof runRequestProblem>[2],
      s = state as OrchestratorState | undefined,
    ) => runRequestProblem(RUN, s, req);
    expect(runRequestProblem(RUN, undefined, { kind: "cancel" })).toBe(`no such run: ${RUN}`);
    expect(problem({ kind: "rerun", nodeId: "publish" })).toMatch(
      /has no node publish \(its nodes: /,
    );
    expect(problem({ kind: "resolve", nodeId: "fact-check", output: draft })).toMatch(
      /is COMPLETED; only a FAILED node can be resolved/,
    );
    expect(problem({ kind: "reset", nodeId: "review" })).toMatch(
      /is CANCELLED; only a FAILED node can be reset/,
    );
    expect(problem({ kind: "resolve", nodeId: "writing", output: { title: "" } })).toMatch(
      /does not fit node writing \(role writing\): title: .*; body: /,
    );
    expect(
      problem({
        kind: "resolve",
        nodeId: "writing",
        output: { title: "t", body: "b".repeat(70_000) },
      }),
    ).toMatch(/bytes of JSON; at most 65536/);
    expect(
      problem({ kind: "cancel" }, { ...state, run: { ...state.run, status: "PARTIAL" } }),
    ).toMatch(/already ended PARTIAL/);
  });
});

describe("runRequestCommand", () => {
  it("builds a valid command envelope on the run's aggregate, with who asks and why", () => {
    const command = runRequestCommand(
      RUN,
      { kind: "resolve", nodeId: "writing", output: draft, reason: "by hand" },
      "alice",
    );
    const envelope = operatorEnvelope(command);
    expect(envelope).toMatchObject({
      event_type: "workflow.resolve.requested",
      aggregate: { type: "dag_run", id: RUN, version: 0 },
      order_key: RUN,
      payload: {
        run_id: RUN,
        node_id: "writing",
        output: draft,
        requested_by: "alice",
        reason: "by hand",
      },
    });
    expect(operatorEnvelope(runRequestCommand(RUN, { kind: "cancel" }, ""))).toMatch(
      /^invalid workflow.cancel.requested .*requested_by/s,
    );
  });
});
