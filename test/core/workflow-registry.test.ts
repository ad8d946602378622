import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { WorkflowDefinitionError } from "../../functions/core/dag/errors";
import { putWorkflow, type RegisterChecks } from "../../functions/core/dag/register";
import {
  definitionForStart,
  EVERY_TENANT,
  InMemoryWorkflowRegistry,
} from "../../functions/core/dag/registry";
import { stepRolesOf } from "../../functions/core/steps";
import { WORKFLOW_KINDS } from "../../functions/roles/content-agents/events";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { REFERENCE_WORKFLOWS } from "../../functions/roles/modules";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import { registry as eventRegistry } from "../../schemas";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import { Bus } from "./workflow-bus";

/**
 * Workflows registered at run time: a put checks everything at once and writes a version once;
 * the orchestrator starts a registered workflow by name and a run stays on the version it
 * started with.
 */

const STEP_ROLES = stepRolesOf(contentAgentModules);
const CHECKS: RegisterChecks = { roles: Object.keys(STEP_ROLES), reserved: WORKFLOW_KINDS };

/** Topic selection, then writing; `review` adds review after writing. */
const brief = (extra: Record<string, unknown> = {}, review = false) => ({
  name: "brief",
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    { id: "writing", role: "writing" },
    ...(review ? [{ id: "review", role: "review" }] : []),
  ],
  edges: [
    { from: "topic-selection", to: "writing" },
    ...(review ? [{ from: "writing", to: "review" }] : []),
  ],
  ...extra,
});

const problemsOf = async (promise: Promise<unknown>) => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowDefinitionError);
  const { problems } = (error as WorkflowDefinitionError).details as {
    problems: { code: string; message: string }[];
  };
  return problems;
};

describe("putting a workflow in the registry", () => {
  it("stores the next version, says so when the same definition comes again, and never changes a version", async () => {
    const registry = new InMemoryWorkflowRegistry();
    const first = await putWorkflow(registry, EVERY_TENANT, brief(), CHECKS);
    expect([first.outcome, first.definition.version]).toEqual(["stored", 1]);
    const repeated = await putWorkflow(registry, EVERY_TENANT, brief(), CHECKS);
    expect([repeated.outcome, repeated.definition.version]).toEqual(["unchanged", 1]);
    // The same definition, with a $schema for an editor and a default written out: no new version.
    const again = await putWorkflow(
      registry,
      EVERY_TENANT,
      { $schema: "../workflow-definition.schema.json", ...brief({ version: 1 }) },
      CHECKS,
    );
    expect([again.outcome, again.definition.version]).toEqual(["unchanged", 1]);
    const second = await putWorkflow(registry, EVERY_TENANT, brief({}, true), CHECKS);
    expect([second.outcome, second.definition.version]).toEqual(["stored", 2]);
    const pinned = await putWorkflow(registry, EVERY_TENANT, brief({ version: 7 }), CHECKS);
    expect([pinned.outcome, pinned.definition.version]).toEqual(["stored", 7]);

    await expect(
      putWorkflow(registry, EVERY_TENANT, brief({ version: 1 }, true), CHECKS),
    ).rejects.toMatchObject({ code: "workflow.version_taken" });
    expect(await registry.list(EVERY_TENANT)).toEqual([{ name: "brief", versions: [1, 2, 7] }]);
    const v1 = (await registry.get(EVERY_TENANT, "brief", 1)) as { nodes: unknown[] };
    expect(v1.nodes).toHaveLength(2);
  });

  it("refuses a definition naming every problem at once, and stores nothing", async () => {
    const registry = new InMemoryWorkflowRegistry();
    const bad = {
      name: "Brief_v2",
      nodes: [
        { id: "a", role: "topic-selection" },
        { id: "a", role: "writing" },
        { id: "b", role: "bookkeeper" },
      ],
      edges: [
        { from: "a", to: "b" },
        { from: "b", to: "b" },
        { from: "b", to: "nowhere" },
      ],
    };
    const problems = await problemsOf(putWorkflow(registry, EVERY_TENANT, bad, CHECKS));
    expect(problems.map((p) => p.code)).toEqual(
      expect.arrayContaining([
        "workflow.bad_name",
        "dag.duplicate_node",
        "dag.unknown_role",
        "dag.self_loop",
        "dag.unknown_node",
      ]),
    );
    expect(problems.find((p) => p.code === "dag.unknown_role")?.message).toContain("bookkeeper");

    // A schema problem is named beside the name's: the name of a compiled-in workflow.
    const unparsed = await problemsOf(
      putWorkflow(registry, "acme", { name: "quick-news", nodes: [{ id: "x" }], edges: 3 }, CHECKS),
    );
    expect(unparsed.map((p) => p.code)).toEqual([
      "workflow.reserved_name",
      "dag.invalid_definition",
    ]);
    expect(unparsed[1]?.message).toMatch(/^edges: /);
    await expect(putWorkflow(registry, EVERY_TENANT, [], CHECKS)).rejects.toMatchObject({
      code: "dag.invalid_definition",
    });
    expect(await registry.list(EVERY_TENANT)).toEqual([]);
    expect(await registry.list("acme")).toEqual([]);
  });

  it("finds a tenant's own definition before the one for every tenant", async () => {
    const registry = new InMemoryWorkflowRegistry();
    await putWorkflow(registry, EVERY_TENANT, brief(), CHECKS);
    await putWorkflow(registry, EVERY_TENANT, brief({}, true), CHECKS);
    await putWorkflow(registry, "acme", brief(), CHECKS);

    const acme = await definitionForStart(registry, "acme", "brief");
    expect([acme?.scope, acme?.definition.version]).toEqual(["acme", 1]);
    const other = await definitionForStart(registry, "globex", "brief");
    expect([other?.scope, other?.definition.version]).toEqual([EVERY_TENANT, 2]);
    expect(await definitionForStart(registry, "acme", "unknown")).toBeUndefined();
  });
});

describe("the orchestrator runs a registered workflow", () => {
  const busOn = (registry: InMemoryWorkflowRegistry) =>
    new Bus({
      orchestrator: orchestratorRole({
        stepRoles: STEP_ROLES,
        workflows: REFERENCE_WORKFLOWS,
        registry,
      }),
    });

  it("starts it by name at its newest version and runs it to completion", async () => {
    const registry = new InMemoryWorkflowRegistry();
    await putWorkflow(registry, EVERY_TENANT, brief(), CHECKS);
    const bus = busOn(registry);
    const runId = `run_${ulid()}`;
    bus.start(runId, "brief");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    expect(state.run.workflow).toEqual({ name: "brief", version: 1 });
    expect(state.definition_scope).toBe(EVERY_TENANT);
    expect(Object.keys(state.run.nodes).sort()).toEqual(["topic-selection", "writing"]);
  });

  it("keeps a run started on v1 on v1 to its end after v2 is put; a new start runs v2", async () => {
    const registry = new InMemoryWorkflowRegistry();
    await putWorkflow(registry, EVERY_TENANT, brief(), CHECKS);
    const bus = busOn(registry);
    const onV1 = `run_${ulid()}`;
    bus.start(onV1, "brief");
    // The run starts and topic selection is asked; nothing is answered yet.
    await bus.drain((d) => d.group === "orchestrator");
    expect(bus.state(onV1).run.nodes["topic-selection"]?.state).toBe("RUNNING");

    const v2 = await putWorkflow(registry, EVERY_TENANT, brief({}, true), CHECKS);
    expect(v2.definition.version).toBe(2);
    await bus.drain();
    const first = bus.state(onV1);
    expect(first.run.status).toBe("COMPLETED");
    expect(first.run.workflow.version).toBe(1);
    expect(Object.keys(first.run.nodes).sort()).toEqual(["topic-selection", "writing"]);
    expect(bus.emitted("review.requested")).toEqual([]);

    const onV2 = `run_${ulid()}`;
    bus.start(onV2, "brief");
    await bus.drain();
    const second = bus.state(onV2);
    expect(second.run.status).toBe("COMPLETED");
    expect(second.run.workflow.version).toBe(2);
    expect(second.run.nodes.review?.state).toBe("COMPLETED");
  });

  it("refuses a start whose registered workflow names a role the stack no longer has, and one of a name nobody registered", async () => {
    const registry = new InMemoryWorkflowRegistry();
    await putWorkflow(registry, EVERY_TENANT, brief({}, true), CHECKS);
    const { review: _gone, ...fewer } = STEP_ROLES;
    const bus = new Bus({ orchestrator: orchestratorRole({ stepRoles: fewer, registry }) });
    const changed = `run_${ulid()}`;
    const unknown = `run_${ulid()}`;
    bus.start(changed, "brief");
    bus.start(unknown, "no-such-workflow");
    await bus.drain();

    const rejected = bus.emitted("workflow.rejected").map((e) => e.payload as WorkflowRejected);
    expect(rejected.map((r) => [r.run_id, r.code])).toEqual([
      [changed, "workflow.unknown_step_role"],
      [unknown, "workflow.unknown_kind"],
    ]);
    expect(rejected[0]?.message).toContain("names review, which is not a step role");
    expect(rejected[1]?.message).toContain("nor registered for tenant default or for every tenant");
    expect(bus.emitted("topic_selection.requested")).toEqual([]);
  });

  it("refuses a start whose input does not fit the workflow's declared input, naming every problem", async () => {
    const registry = new InMemoryWorkflowRegistry();
    const input = {
      type: "object",
      properties: {
        topic_hint: { type: "string", minLength: 1 },
        audience: { type: "string", enum: ["experts", "everyone"] },
      },
      required: ["topic_hint", "audience"],
    };
    await putWorkflow(registry, EVERY_TENANT, brief({ input }), CHECKS);
    const bus = busOn(registry);
    const unfit = `run_${ulid()}`;
    const fits = `run_${ulid()}`;
    const content = `run_${ulid()}`;
    // workflow.start.requested v2, whose request is any JSON object (v1's is a content request).
    const start = (runId: string, workflow_name: string, request: Record<string, unknown>) => {
      const v1 = bus.command("workflow.start.requested", runId, {
        workflow: "quick-news",
        request: { topic_hint: "x" },
      });
      const parsed = eventRegistry.parse({
        ...v1,
        schema_version: 2,
        payload: { run_id: runId, workflow_name, request },
      });
      if (!parsed.ok) throw new Error(parsed.message);
      bus.send(parsed.envelope);
    };
    start(unfit, "brief", { topic_hint: "tides", audience: "children" });
    start(fits, "brief", { topic_hint: "tides", audience: "experts" });
    start(content, "quick-news", { topic: "no hint" });
    await bus.drain();

    const rejected = bus.emitted("workflow.rejected").map((e) => e.payload as WorkflowRejected);
    expect(rejected.map((r) => [r.run_id, r.code])).toEqual([
      [unfit, "workflow.invalid_input"],
      [content, "workflow.invalid_input"],
    ]);
    expect(rejected[0]?.message).toBe(
      'workflow brief v1 does not take this input: audience: must be one of "experts", "everyone" (got "children")',
    );
    expect(rejected[1]?.message).toContain("topic_hint: required");
    expect(bus.state(fits).run.status).toBe("COMPLETED");
    expect(bus.state(fits).run.input).toEqual({ topic_hint: "tides", audience: "experts" });
  });
});
