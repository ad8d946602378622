import { describe, expect, it } from "vitest";
import { onNodeCompleted, onNodeFailed, startRun } from "../../functions/core/dag/engine";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { longFormV2 } from "../../functions/roles/content-agents/workflows";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { approvalAnswered } from "../../lib/operator/audit";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import { runRequestCommand, runRequestProblem } from "../../lib/operator/workflow-actions";
import { referenceCatalog } from "../support/reference";

const REFERENCE = { compiled: referenceCatalog() };

/** The checks an operator's run request passes before anything is sent (CLI and console). */

const RUN = "run_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const boom = { code: "model.invalid_output", message: "never in shape" };
const draft = { title: "By hand", body: "Written by a person." };

/** A run of long form v2 with topic selection and its fact check completed: writing RUNNING. */
function checkedTopic() {
  const def = longFormV2;
  let t = startRun(def, RUN, { topic_hint: "tides" });
  t = onNodeCompleted(t.run, def, "topic-selection", { topic: "t", angle: "a", sources: ["s"] }, 0);
  return onNodeCompleted(
    t.run,
    def,
    "fact-check",
    { verdict: "pass", checked_claims: 1, notes: "ok" },
    0,
  );
}

/**
 * A run of long form v2 (one fact check of the topic, still carried on): topic selection
 * completed, fact check completed, writing FAILED, review CANCELLED.
 */
function failedWriting(): OrchestratorState {
  const t = onNodeFailed(checkedTopic().run, longFormV2, "writing", boom, 0);
  return { workflow: "long-form", run: t.run, held: [], timeline: [], leases: {} };
}

describe("runRequestProblem", () => {
  const state = failedWriting();

  it("accepts a resolve of the FAILED node with an output that fits its role", () => {
    expect(
      runRequestProblem(
        RUN,
        state,
        { kind: "resolve", nodeId: "writing", output: draft },
        REFERENCE,
      ),
    ).toBeUndefined();
    expect(runRequestProblem(RUN, state, { kind: "reset", nodeId: "writing" })).toBeUndefined();
  });

  it("names what is wrong: no run, no node, not FAILED, an output that does not fit, too big", () => {
    const problem = (
      req: Parameters<typeof runRequestProblem>[2],
      s = state as OrchestratorState | undefined,
    ) => runRequestProblem(RUN, s, req, REFERENCE);
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

describe("a confirmation of a BLOCKED node", () => {
  // Long form v2 with writing RUNNING and its agent BLOCKED on a question since 10:00.
  const t = checkedTopic();
  const generation = t.run.nodes.writing?.assigned_generation ?? -1;
  const since = "2026-12-01T10:00:00.000Z";
  const blocked: OrchestratorState = {
    workflow: "long-form",
    run: t.run,
    held: [],
    timeline: [],
    leases: {
      writing: {
        generation,
        expires_at: "2026-12-01T11:00:00.000Z",
        blocked: { since, confirm_by: "2026-12-01T10:10:00.000Z", question: "is the quote real?" },
      },
    },
  };
  const request = (waitingSince?: string) =>
    ({
      kind: "confirm",
      nodeId: "writing",
      answer: "confirmed",
      ...(waitingSince === undefined ? {} : { waitingSince }),
    }) as const;

  it("is refused when given to another wait of the node than the one it waits for now", () => {
    expect(t.run.nodes.writing?.state).toBe("RUNNING");
    expect(runRequestProblem(RUN, blocked, request(since))).toBeUndefined();
    expect(runRequestProblem(RUN, blocked, request())).toBeUndefined();
    expect(runRequestProblem(RUN, blocked, request("2026-12-01T09:00:00.000Z"))).toBe(
      `node writing of run ${RUN} no longer waits for what was answered (waiting since 2026-12-01T09:00:00.000Z): it now waits since ${since} (see agentbus approvals)`,
    );
  });

  it("names the wait it answers: the one given, else the one the stored run shows", () => {
    const payloadOf = (waitingSince?: string) => {
      const envelope = operatorEnvelope(
        runRequestCommand(RUN, request(waitingSince), "alice", blocked),
      );
      if (typeof envelope === "string") throw new Error(envelope);
      return envelope.payload;
    };
    expect(payloadOf()).toMatchObject({ node_id: "writing", waiting_since: since });
    expect(payloadOf("2026-12-01T09:00:00.000Z")).toMatchObject({
      waiting_since: "2026-12-01T09:00:00.000Z",
    });
    const unread = operatorEnvelope(runRequestCommand(RUN, request(), "alice"));
    expect(unread).not.toHaveProperty("payload.waiting_since");
  });
});

describe("a signal to a run", () => {
  // A wait on signal "approved" (deadline in an hour), RUNNING from the start.
  const def = defineWorkflow({
    name: "gated",
    version: 1,
    nodes: [{ id: "gate", wait: { signal: "approved", seconds: 3600 } }],
  });
  const started = startRun(def, RUN, { topic_hint: "tides" });
  const timer = { generation: 0, due_at: "2026-12-01T10:00:00.000Z", signal: "approved" };
  const gated: OrchestratorState = {
    workflow: "gated",
    run: started.run,
    held: [],
    timeline: [],
    leases: {},
    timers: { gate: timer },
  };

  it("is accepted while a wait node waits for it, and refused otherwise, naming what the run waits for", () => {
    const signal = (key: string, s = gated) =>
      runRequestProblem(RUN, s, { kind: "signal", signal: key });
    expect(signal("approved")).toBeUndefined();
    expect(signal("aproved")).toBe(
      `no wait node of run ${RUN} waits for signal "aproved" now (waiting for: approved (node gate))`,
    );
    expect(signal("approved", { ...gated, timers: {} })).toMatch(/waiting for: no signal\)$/);
    // A timer of an earlier assignment no longer counts.
    expect(signal("approved", { ...gated, timers: { gate: { ...timer, generation: 1 } } })).toMatch(
      /waits for signal "approved" now/,
    );
    expect(signal("approved", { ...gated, run: { ...gated.run, status: "CANCELLED" } })).toBe(
      `run ${RUN} already ended CANCELLED; no wait node takes a signal`,
    );
  });

  it("builds a valid command with the payload, who asks and why; a payload too large is refused", () => {
    const request = { kind: "signal", signal: "approved", payload: { by: "editor" } } as const;
    const envelope = operatorEnvelope(
      runRequestCommand(RUN, { ...request, reason: "looks good" }, "alice", { tenant_id: "acme" }),
    );
    expect(envelope).toMatchObject({
      event_type: "workflow.signal.requested",
      tenant_id: "acme",
      aggregate: { type: "dag_run", id: RUN, version: 0 },
      payload: {
        run_id: RUN,
        signal: "approved",
        payload: { by: "editor" },
        requested_by: "alice",
        reason: "looks good",
      },
    });
    const big = { ...request, payload: { text: "x".repeat(70_000) } };
    expect(operatorEnvelope(runRequestCommand(RUN, big, "alice"))).toMatch(
      /^invalid workflow.signal.requested .*payload.*at most 65536 bytes of JSON/s,
    );
  });
});

describe("approvalAnswered of a node's confirmation", () => {
  const confirm = (answer: "confirmed" | "refused", note?: string) => {
    const envelope = operatorEnvelope(
      runRequestCommand(
        RUN,
        { kind: "confirm", nodeId: "review", answer, ...(note === undefined ? {} : { note }) },
        "ops_anna",
        { tenant_id: "acme" },
      ),
    );
    if (typeof envelope === "string") throw new Error(envelope);
    return envelope;
  };

  it("is the run's node approved, its note the reason", () => {
    const envelope = confirm("confirmed", "the source confirmed by phone");
    expect(approvalAnswered(envelope)).toEqual({
      target: RUN,
      step: "review",
      decision: "approve",
      reason: "the source confirmed by phone",
      command_id: envelope.event_id,
    });
  });

  it("is a refusal rejected, with no reason when no note was given", () => {
    const answered = approvalAnswered(confirm("refused"));
    expect(answered).toMatchObject({ target: RUN, step: "review", decision: "reject" });
    expect(answered).not.toHaveProperty("reason");
  });
});
