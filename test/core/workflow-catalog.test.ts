import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import {
  stackWorkflowsOf,
  WORKFLOWS_ENV,
  workflowsEnvValue,
} from "../../functions/core/stack-workflows";
import {
  catalogFor,
  listWorkflows,
  showWorkflow,
  workflowCatalog,
} from "../../functions/roles/orchestrator/catalog";

/**
 * The orchestrator's catalog, where the scopes meet: built in, given to the stack, a tenant's own,
 * shared. What it lists, what a read by name shows and what a start runs agree, and the stack's
 * workflows take their names from the registry's.
 */

const ROLES = ["tally"];
const tally = (name: string, version: number, id = "count") =>
  defineWorkflow({ name, version, nodes: [{ id, role: "tally" }], edges: [] });

/** A stack given `stack-tally` v1 and v2, a registry with a shared, two tenants' and a shadowed one. */
async function catalogs() {
  const compiled = workflowCatalog([tally("stack-tally", 1), tally("stack-tally", 2)]);
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
  it("lists by scope, in the order a start looks: built in, stack, each tenant's own, shared", async () => {
    const { compiled, registry } = await catalogs();
    const every = await listWorkflows(compiled, registry);
    expect(every.map((w) => [w.scope, w.tenant, w.name, w.versions])).toEqual([
      ["built-in", undefined, "quick-news", [1, 2, 3]],
      ["built-in", undefined, "long-form", [1, 2, 3, 4]],
      ["stack", undefined, "stack-tally", [1, 2]],
      ["tenant", "acme", "digest", [1]],
      ["tenant", "globex", "report", [1]],
      ["shared", undefined, "digest", [1]],
    ]);
    const acme = await listWorkflows(compiled, registry, ["acme"]);
    expect(acme.map((w) => `${w.scope}:${w.name}`)).toEqual([
      "built-in:quick-news",
      "built-in:long-form",
      "stack:stack-tally",
      "tenant:digest",
      "shared:digest",
    ]);
    expect((await listWorkflows(compiled, undefined)).map((w) => w.scope)).toEqual([
      "built-in",
      "built-in",
      "stack",
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
    const builtIn = await showWorkflow(compiled, registry, "quick-news", { version: 2 });
    expect(builtIn).toMatchObject({ scope: "built-in", version: 2, versions: [1, 2, 3] });
  });

  it("starts what it shows: a stack workflow's name never reaches the registry", async () => {
    const { compiled, registry } = await catalogs();
    const catalog = await catalogFor(compiled, registry, undefined);
    expect(catalog.names).toEqual(["quick-news", "long-form", "content.fact-check", "stack-tally"]);
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
});
