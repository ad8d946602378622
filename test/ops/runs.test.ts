import { describe, expect, it } from "vitest";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { runView } from "../../lib/operator/runs";
import { definitionOfRun } from "../support/reference";

const state = {
  workflow: "quick-news",
  run: {
    run_id: "run_r1",
    workflow: { name: "content.quick-news", version: 1 },
    status: "FAILED",
    generation: 0,
    input: {},
    nodes: {
      "topic-selection": { state: "COMPLETED", remaining_upstreams: 0, attempt: 1 },
      "fact-check": { state: "COMPLETED", remaining_upstreams: 0, attempt: 1 },
      writing: {
        state: "FAILED",
        remaining_upstreams: 0,
        attempt: 2,
        error: { code: "model.timeout", message: "no answer" },
      },
      review: { state: "CANCELLED", remaining_upstreams: 1, attempt: 0 },
    },
  },
  held: [],
  timeline: [
    {
      at: "2026-11-30T12:00:00.000Z",
      event: "node.released",
      node_id: "topic-selection",
      generation: 0,
      cause: "workflow.start.requested",
    },
    {
      at: "2026-11-30T12:00:01.500Z",
      event: "node.completed",
      node_id: "topic-selection",
      generation: 0,
      cause: "topic_selection.completed",
    },
    {
      at: "2026-11-30T12:00:01.500Z",
      event: "node.released",
      node_id: "writing",
      generation: 0,
      cause: "topic_selection.completed",
    },
    {
      at: "2026-11-30T12:00:09.000Z",
      event: "node.failed",
      node_id: "writing",
      generation: 0,
      cause: "writing.failed",
    },
  ],
  origin: { correlation_id: "corr_c1", task_id: "task_t1" },
} as unknown as OrchestratorState;

describe("runView", () => {
  it("gives the definition's nodes in order with states, roles, timings and errors, and its edges", () => {
    const view = runView(state, definitionOfRun(state));
    expect(view.nodes.map((n) => [n.id, n.state, n.attempt])).toEqual([
      ["topic-selection", "COMPLETED", 1],
      ["fact-check", "COMPLETED", 1],
      ["writing", "FAILED", 2],
      ["review", "CANCELLED", 0],
    ]);
    expect(view.nodes[0]).toMatchObject({
      durationMs: 1500,
      startedAt: "2026-11-30T12:00:00.000Z",
    });
    expect(view.nodes[2]).toMatchObject({
      durationMs: 7500,
      error: { code: "model.timeout", message: "no answer" },
    });
    expect(view.nodes[3]?.durationMs).toBeUndefined();
    expect(view.edges).toEqual(
      expect.arrayContaining([
        { from: "topic-selection", to: "fact-check" },
        { from: "topic-selection", to: "writing" },
        { from: "fact-check", to: "review" },
        { from: "writing", to: "review" },
      ]),
    );
    expect(view).toMatchObject({
      runId: "run_r1",
      status: "FAILED",
      correlationId: "corr_c1",
      taskId: "task_t1",
    });
    expect(view.timeline[0]).toEqual({
      at: "2026-11-30T12:00:00.000Z",
      event: "node.released",
      nodeId: "topic-selection",
      generation: 0,
      cause: "workflow.start.requested",
    });
  });
});
