import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import { PACKED_JSON_MARKER } from "../../functions/core/packed-json";
import {
  MAX_WORKFLOWS_ENV_BYTES,
  stackWorkflowProblems,
  stackWorkflowsOf,
  WORKFLOWS_ENV,
  workflowsEnvValue,
} from "../../functions/core/stack-workflows";
import { REFERENCE_WORKFLOWS } from "../../functions/roles/modules";
import {
  catalogFor,
  listWorkflows,
  showWorkflow,
  workflowCatalog,
} from "../../functions/roles/orchestrator/catalog";

/**
 * The orchestrator's catalog, where the scopes meet: given to the stack, a tenant's own, shared. What it lists, what a read by name shows and what a start runs agree, and the stack's
 * workflows take their names from the registry's.
 */

const ROLES = ["tally"];
const tally = (name: string, version: number, id = "count", alias?: string) =>
  defineWorkflow({
    name,
    version,
    ...(alias === undefined ? {} : { alias }),
    nodes: [{ id, role: "tally" }],
    edges: [],
  });

/** A stack given `stack-tally` v1 and v2 (v2 started by the alias `tally`, as v3 of `app.counts`), a registry with a shared, two tenants' and a shadowed one. */
async function catalogs() {
  const compiled = workflowCatalog([
    tally("stack-tally", 1),
    tally("stack-tally", 2),
    tally("app.counts", 2),
    tally("app.counts", 3, "count", "counts"),
    tally("app.counts", 4),
  ]);
  const registry = new InMemoryWorkflowRegistry();
  const put = (scope: string, name: string, id = "count") =>
    putWorkflow(registry, scope, { name, nodes: [{ id, role: "tally" }] }, { roles: ROLES });
  await put(EVERY_TENANT, "digest");
  await put("acme", "digest", "acme-count");
  await put("globex", "report");
  // Put before the stack took the name: shadowed from now on.
  await put("acme", "stack-tally", "registered");
  return { compiled, registry };
}

describe("the catalog's lists", () => {
  it("lists by scope, in the order a start looks: stack, each tenant's own, shared", async () => {
    const { compiled, registry } = await catalogs();
    const every = await listWorkflows(compiled, registry);
    expect(every.map((w) => [w.scope, w.tenant, w.name, w.versions])).toEqual([
      ["stack", undefined, "stack-tally", [1, 2]],
      ["stack", undefined, "app.counts", [2, 3, 4]],
      ["tenant", "acme", "digest", [1]],
      ["tenant", "globex", "report", [1]],
      ["shared", undefined, "digest", [1]],
    ]);
    const acme = await listWorkflows(compiled, registry, ["acme"]);
    expect(acme.map((w) => `${w.scope}:${w.name}`)).toEqual([
      "stack:stack-tally",
      "stack:app.counts",
      "tenant:digest",
      "shared:digest",
    ]);
    expect((await listWorkflows(compiled, undefined)).map((w) => [w.name, w.alias])).toEqual([
      ["stack-tally", undefined],
      ["app.counts", "counts"],
    ]);
  });

  it("shows what a start finds: the stack's over the registry's, a tenant's own over the shared one", async () => {
    const { compiled, registry } = await catalogs();
    const stack = await showWorkflow(compiled, registry, "stack-tally", { tenant: "acme" });
    expect(stack).toMatchObject({ scope: "stack", version: 2, versions: [1, 2] });
    expect(stack?.definition.nodes.map((n) => n.id)).toEqual(["count"]);
    const first = await showWorkflow(compiled, registry, "stack-tally", { version: 1 });
    expect(first?.definition).toEqual(tally("stack-tally", 1));
    // A version the stack was not given is not looked for in the registry.
    expect(await showWorkflow(compiled, registry, "stack-tally", { version: 3 })).toBeUndefined();
    const own = await showWorkflow(compiled, registry, "digest", { tenant: "acme" });
    expect(own).toMatchObject({ scope: "tenant", tenant: "acme", version: 1 });
    expect(own?.definition.nodes.map((n) => n.id)).toEqual(["acme-count"]);
    const shared = await showWorkflow(compiled, registry, "digest", { tenant: "globex" });
    expect(shared).toMatchObject({ scope: "shared", version: 1 });
    expect(shared?.tenant).toBeUndefined();
    expect(await showWorkflow(compiled, registry, "report", { tenant: "acme" })).toBeUndefined();
    expect(await showWorkflow(compiled, registry, "report")).toBeUndefined();
    const aliased = await showWorkflow(compiled, registry, "counts");
    expect(aliased).toMatchObject({
      name: "app.counts",
      alias: "counts",
      scope: "stack",
      version: 3,
    });
    const older = await showWorkflow(compiled, registry, "counts", { version: 2 });
    expect(older).toMatchObject({ scope: "stack", version: 2, versions: [2, 3, 4] });
  });

  it("starts what it shows: a stack workflow's name never reaches the registry", async () => {
    const { compiled, registry } = await catalogs();
    const catalog = await catalogFor(compiled, registry, undefined);
    expect(catalog.names).toEqual(["stack-tally", "app.counts", "counts"]);
    // An alias starts the newest version that declares it; the name, the newest version.
    expect((await catalog.forStart("counts", "acme"))?.definition.version).toBe(3);
    expect((await catalog.forStart("app.counts", "acme"))?.definition.version).toBe(4);
    const started = await catalog.forStart("stack-tally", "acme");
    expect(started).toEqual({ definition: tally("stack-tally", 2) });
    expect(await catalog.forStart("stack-tally", "acme", 3)).toBeUndefined();
    expect((await catalog.forStart("digest", "acme"))?.scope).toBe("acme");
    // Without the stack's workflow, acme's registered one of that name is what a start runs.
    const before = await catalogFor(workflowCatalog(), registry, undefined);
    expect((await before.forStart("stack-tally", "acme"))?.scope).toBe("acme");
  });
});

describe("the stack's workflows as their JSON carries them", () => {
  it("reads back what the stack wrote, and names what is wrong with a value that is not theirs", () => {
    const given = [tally("stack-tally", 1), tally("other", 4)];
    expect(stackWorkflowsOf(workflowsEnvValue(given), WORKFLOWS_ENV)).toEqual(given);
    expect(stackWorkflowsOf(undefined, WORKFLOWS_ENV)).toEqual([]);
    expect(() => stackWorkflowsOf("{", "the output StackWorkflows")).toThrow(
      /^the output StackWorkflows is not the stack's workflows/,
    );
    const cyclic = JSON.stringify([
      {
        name: "loop",
        version: 1,
        nodes: [
          { id: "a", role: "tally" },
          { id: "b", role: "tally" },
        ],
        edges: [
          { from: "a", to: "b" },
          { from: "b", to: "a" },
        ],
      },
    ]);
    expect(() => stackWorkflowsOf(cyclic, WORKFLOWS_ENV)).toThrow(
      /^WORKFLOWS holds a workflow that is not valid: /,
    );
  });

  it("compresses a set whose JSON is over the budget, and reads it back the same", () => {
    const json = JSON.stringify(REFERENCE_WORKFLOWS);
    expect(Buffer.byteLength(json)).toBeGreaterThan(MAX_WORKFLOWS_ENV_BYTES);
    const value = workflowsEnvValue(REFERENCE_WORKFLOWS);
    expect(value.startsWith(PACKED_JSON_MARKER)).toBe(true);
    expect(Buffer.byteLength(value)).toBeLessThanOrEqual(MAX_WORKFLOWS_ENV_BYTES);
    expect(stackWorkflowsOf(value, WORKFLOWS_ENV)).toEqual(REFERENCE_WORKFLOWS);
    // A small set stays JSON.
    expect(workflowsEnvValue([tally("stack-tally", 1)]).startsWith("[")).toBe(true);
    expect(() => stackWorkflowsOf(`${PACKED_JSON_MARKER}bm90IGd6aXA=`, WORKFLOWS_ENV)).toThrow(
      /^WORKFLOWS is not the stack's workflows: .*gzip\+base64:/s,
    );
  });

  it("refuses a set too large even compressed, and an alias a start could not tell", () => {
    // Names that do not repeat each other (hashes), as a large set's do not.
    const hash = (text: string) => createHash("sha256").update(text).digest("hex");
    const many = Array.from({ length: 60 }, (_, i) =>
      tally(`w-${hash(`w${i}`).slice(0, 40)}`, 1, `n${hash(`n${i}`).slice(0, 40)}`),
    );
    const problems = stackWorkflowProblems(many, ["tally"]);
    expect(problems.join("\n")).toMatch(
      /take \d+ bytes .* compressed\), and the orchestrator's environment holds 2048/,
    );
    expect(
      stackWorkflowProblems(
        [tally("one", 1, "count", "same"), tally("two", 1, "count", "same"), tally("same", 1)],
        ["tally"],
      ),
    ).toEqual([
      "workflow one v1: alias same is the name of a workflow",
      "workflow two v1: alias same is the name of a workflow",
      "alias same is declared by one and by two: give each its own",
    ]);
  });
});
