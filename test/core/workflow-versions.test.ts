import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import {
  CONTENT_WORKFLOWS,
  contentWorkflowAt,
  contentWorkflowFor,
  quickNews,
} from "../../functions/roles/content-agents/workflows";
import { definitionOf, type OrchestratorState } from "../../functions/roles/orchestrator/state";

/** A run's state as the orchestrator stores it, reduced to what picks the definition. */
const runOf = (name: string, version: number) =>
  ({
    workflow: "quick-news",
    run: { workflow: { name, version } },
  }) as unknown as OrchestratorState;

describe("workflow definition versions", () => {
  it("starts new runs on the newest version and carries each run on the version it began with", () => {
    const next = defineWorkflow({
      name: quickNews.name,
      version: 2,
      nodes: [
        { id: "topic-selection", role: "topic-selector" },
        { id: "writing", role: "writer" },
        { id: "review", role: "reviewer" },
      ],
      edges: [
        { from: "topic-selection", to: "writing" },
        { from: "writing", to: "review" },
      ],
    });
    const all = CONTENT_WORKFLOWS as (typeof next)[];
    all.push(next);
    try {
      expect(contentWorkflowFor({ kind: "quick-news" })).toBe(next);
      expect(definitionOf(runOf(quickNews.name, 1))).toBe(quickNews);
      expect(definitionOf(runOf(quickNews.name, 2))).toBe(next);
    } finally {
      all.splice(all.indexOf(next), 1);
    }
    expect(contentWorkflowFor({ kind: "quick-news" })).toBe(quickNews);
  });

  it("refuses a run whose definition version is no longer defined, naming the ones that are", () => {
    expect(() => contentWorkflowAt(quickNews.name, 7)).toThrow(
      expect.objectContaining({
        code: "workflow.unknown_definition",
        message: expect.stringMatching(
          /content\.quick-news v7 is no longer defined .*content\.quick-news v1/,
        ),
      }),
    );
  });
});
