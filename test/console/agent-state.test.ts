import { describe, expect, it } from "vitest";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { parseAction } from "../../lib/operator/console/actions";
import { renderRun } from "../../lib/operator/console/run";
import { runView } from "../../lib/operator/runs";
import { runRequestCommand, runRequestProblem } from "../../lib/operator/workflow-actions";
import { definitionOfRun } from "../support/reference";

/**
 * The run page shows what the agent of each RUNNING node reported (seed 001 §2): queued until it
 * acknowledges the assignment, RUNNING from its `node.started`, BLOCKED while it waits for an
 * external confirmation.
 */

const running = (attempt = 1) => ({
  state: "RUNNING",
  remaining_upstreams: 0,
  attempt,
  assigned_generation: 0,
});

const state = {
  workflow: "quick-news",
  run: {
    run_id: "run_r2",
    workflow: { name: "content.quick-news", version: 1 },
    status: "RUNNING",
    generation: 0,
    input: {},
    nodes: {
      "topic-selection": { state: "COMPLETED", remaining_upstreams: 0, attempt: 1 },
      "fact-check": running(),
      writing: running(),
      review: { state: "PENDING", remaining_upstreams: 2, attempt: 0 },
    },
  },
  held: [],
  timeline: [],
  leases: {
    "fact-check": { generation: 0, expires_at: "2026-11-30T16:00:00.000Z" },
    writing: {
      generation: 0,
      expires_at: "2026-11-30T12:30:00.000Z",
      started: true,
      started_at: "2026-11-30T12:00:02.000Z",
      blocked: {
        since: "2026-11-30T12:00:05.000Z",
        confirm_by: "2026-11-30T12:15:05.000Z",
        question: "Does the source stand by the quote?",
      },
    },
  },
} as unknown as OrchestratorState;

describe("agent states on the run page", () => {
  it("reads queued, started and BLOCKED nodes from the run's leases", () => {
    const view = runView(state, definitionOfRun(state));
    const agents = Object.fromEntries(view.nodes.map((n) => [n.id, n.agent]));
    expect(agents).toEqual({
      "topic-selection": undefined,
      "fact-check": { state: "QUEUED" },
      writing: {
        state: "BLOCKED",
        since: "2026-11-30T12:00:05.000Z",
        confirmBy: "2026-11-30T12:15:05.000Z",
        question: "Does the source stand by the quote?",
      },
      review: undefined,
    });
    const started = structuredClone(state) as { leases: Record<string, Record<string, unknown>> };
    started.leases.writing = { generation: 0, expires_at: "x", started: true, started_at: "y" };
    const node = runView(
      started as unknown as OrchestratorState,
      definitionOfRun(started as unknown as OrchestratorState),
    ).nodes.find((n) => n.id === "writing");
    expect(node?.agent).toEqual({ state: "RUNNING", since: "y" });
  });

  it("renders the agent's state in the node table and the DAG", () => {
    const html = renderRun(runView(state, definitionOfRun(state)));
    expect(html).toContain('data-agent-state="BLOCKED"');
    expect(html).toContain("Does the source stand by the quote?");
    expect(html).toContain('data-agent-state="QUEUED"');
    expect(html).toMatch(
      /<g class="node" data-node-id="writing" data-state="RUNNING" data-agent-state="BLOCKED">/,
    );
    expect(html).toContain("queued: the agent has not started");
  });
});

describe("confirming a BLOCKED node from the run page", () => {
  it("offers confirm and refuse for the BLOCKED node only", () => {
    const html = renderRun(runView(state, definitionOfRun(state)), { token: "tok" });
    expect(html).toContain('action="/runs/run_r2/confirm"');
    expect(html).toContain('data-action="confirm" data-node="writing"');
    expect(html).toContain('name="answer" value="confirmed"');
    expect(html).toContain('name="answer" value="refused"');
    // The answer names the wait shown, so it never answers one the node waits for later.
    expect(html).toContain('<input type="hidden" name="since" value="2026-11-30T12:00:05.000Z">');
    expect(html).not.toContain('data-node="fact-check"');
  });

  it("reads the form as workflow.confirm.requested, the reason as the note", () => {
    const parsed = parseAction(
      "/runs/run_r2/confirm",
      new URLSearchParams({ node: "writing", answer: "refused", reason: "quote withdrawn" }),
    );
    expect(parsed).toMatchObject({
      action: {
        kind: "run",
        runId: "run_r2",
        request: { kind: "confirm", nodeId: "writing", answer: "refused", note: "quote withdrawn" },
      },
    });
    const since = "2026-11-30T12:00:05.000Z";
    expect(
      parseAction(
        "/runs/run_r2/confirm",
        new URLSearchParams({ node: "writing", since, answer: "confirmed", reason: "checked" }),
      ),
    ).toMatchObject({ action: { request: { kind: "confirm", waitingSince: since } } });
    const bad = parseAction(
      "/runs/run_r2/confirm",
      new URLSearchParams({ node: "writing", answer: "maybe", reason: "x" }),
    );
    expect(bad).toMatchObject({ problem: expect.stringContaining("not an answer") });
  });

  it("is refused for a node that is not BLOCKED, and becomes the command for one that is", () => {
    const request = { kind: "confirm", nodeId: "fact-check", answer: "confirmed" } as const;
    expect(runRequestProblem("run_r2", state, request)).toContain("not BLOCKED");
    expect(runRequestProblem("run_r2", state, { ...request, nodeId: "writing" })).toBeUndefined();
    expect(runRequestCommand("run_r2", { ...request, nodeId: "writing" }, "alice")).toEqual({
      type: "workflow.confirm.requested",
      aggregate: { type: "dag_run", id: "run_r2" },
      payload: { run_id: "run_r2", node_id: "writing", answer: "confirmed", requested_by: "alice" },
    });
  });
});
