import { describe, expect, it } from "vitest";
import {
  CONTENT_WORKFLOWS,
  contentWorkflowFor,
  factCheck,
  longForm,
  longFormV2,
  longFormV3,
  quickNews,
  quickNewsV2,
} from "../../functions/roles/content-agents/workflows";
import { referenceCatalog } from "../support/reference";

/** The definition a run of `name` v`version` is carried on by the reference stack's orchestrator. */
const definitionAt = (name: string, version: number) => referenceCatalog().at(name, version);

describe("workflow definition versions", () => {
  it("starts new runs on the started version and carries each run on the version it began with", () => {
    expect(contentWorkflowFor({ kind: "quick-news" })).toBe(quickNews);
    expect(contentWorkflowFor({ kind: "long-form" })).toBe(longForm);
    // The started version declares the kind as its alias; no other version does.
    expect(CONTENT_WORKFLOWS.filter((d) => d.alias !== undefined)).toEqual([quickNews, longForm]);
    expect(referenceCatalog().forStart("quick-news")).toBe(quickNews);
    expect(referenceCatalog().forStart("long-form")).toBe(longForm);
    expect(referenceCatalog().forStart("quick-news", 2)).toBe(quickNewsV2);
    expect(quickNews.version).toBe(3);
    expect(longForm.version).toBe(4);
    expect(definitionAt(quickNews.name, 2)).toBe(quickNewsV2);
    expect(definitionAt(quickNews.name, 3)).toBe(quickNews);
    expect(definitionAt(longForm.name, 3)).toBe(longFormV3);
    expect(definitionAt(longForm.name, 4)).toBe(longForm);
  });

  it("finds the fact check long form runs as a child by its name, at the version long form pins", () => {
    const compiled = referenceCatalog();
    const child = longForm.nodes.find((n) => n.id === "fact-check")?.workflow;
    expect(child).toMatchObject({ name: factCheck.name, version: factCheck.version });
    expect(compiled.forStart(factCheck.name, child?.version)).toBe(factCheck);
    expect(compiled.forStart(factCheck.name)).toBe(factCheck);
    expect(compiled.names).toContain(factCheck.name);
    // By its name too (a child names it so): its newest version.
    expect(compiled.forStart(longForm.name)).toBe(longForm);
  });

  it("carries a run that began on version 1 on with the agents' own names", () => {
    for (const current of [quickNewsV2, longFormV2]) {
      const first = definitionAt(current.name, 1);
      expect(first.version).toBe(1);
      expect(first.nodes).toEqual(current.nodes);
      expect(first.edges).toEqual(current.edges);
    }
    expect(CONTENT_WORKFLOWS.map((d) => `${d.name} v${d.version}`).sort()).toEqual([
      "content.fact-check v1",
      "content.long-form v1",
      "content.long-form v2",
      "content.long-form v3",
      "content.long-form v4",
      "content.quick-news v1",
      "content.quick-news v2",
      "content.quick-news v3",
    ]);
    // Each task node is carried out by the content agent of its name; long form v4's fact check
    // is a child run instead.
    for (const def of CONTENT_WORKFLOWS)
      for (const node of def.nodes)
        expect(node.role ?? node.workflow?.name, `${def.name} v${def.version}`).toBe(
          node.workflow ? factCheck.name : node.id,
        );
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
