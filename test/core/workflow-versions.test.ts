import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import {
  CONTENT_WORKFLOWS,
  contentWorkflowFor,
  longForm,
  quickNews,
} from "../../functions/roles/content-agents/workflows";
import { workflowCatalog } from "../../functions/roles/orchestrator/catalog";

/** The definition a run of `name` v`version` is carried on by the orchestrator. */
const definitionAt = (name: string, version: number) => workflowCatalog().at(name, version);

describe("workflow definition versions", () => {
  it("starts new runs on the newest version and carries each run on the version it began with", () => {
    const next = defineWorkflow({
      name: quickNews.name,
      version: 3,
      nodes: [
        { id: "topic-selection", role: "topic-selection" },
        { id: "writing", role: "writing" },
        { id: "review", role: "review" },
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
      expect(definitionAt(quickNews.name, 2)).toBe(quickNews);
      expect(definitionAt(quickNews.name, 3)).toBe(next);
    } finally {
      all.splice(all.indexOf(next), 1);
    }
    expect(contentWorkflowFor({ kind: "quick-news" })).toBe(quickNews);
  });

  it("carries a run that began on version 1 on with the agents' own names", () => {
    for (const current of [quickNews, longForm]) {
      const first = definitionAt(current.name, 1);
      expect(first.version).toBe(1);
      expect(first.nodes).toEqual(current.nodes);
      expect(first.edges).toEqual(current.edges);
    }
    expect(CONTENT_WORKFLOWS.map((d) => `${d.name} v${d.version}`).sort()).toEqual([
      "content.long-form v1",
      "content.long-form v2",
      "content.quick-news v1",
      "content.quick-news v2",
    ]);
    for (const def of CONTENT_WORKFLOWS)
      for (const node of def.nodes) expect(node.role, `${def.name} v${def.version}`).toBe(node.id);
  });

  it("refuses a run whose definition version is no longer defined, naming the ones that are", () => {
    expect(() => definitionAt(quickNews.name, 7)).toThrow(
      expect.objectContaining({
        code: "workflow.unknown_definition",
        message: expect.stringMatching(
          /content\.quick-news v7 is no longer defined .*content\.quick-news v2/,
        ),
      }),
    );
  });
});
