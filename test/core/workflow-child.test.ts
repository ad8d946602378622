import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type { WorkflowDefinitionInput } from "../../functions/core/dag/definition";
import { allowPlanRoles } from "../../functions/core/dag/plan";
import { putWorkflow } from "../../functions/core/dag/register";
import { EVERY_TENANT, InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import { PermanentError } from "../../functions/core/errors";
import type { RolePorts } from "../../functions/core/integration";
import type { Role } from "../../functions/core/role";
import { buildRole, defineStepModule } from "../../functions/core/role-module";
import type { StepContext } from "../../functions/core/step-role";
import { stepRolesOf } from "../../functions/core/steps";
import { traceIdOf } from "../../functions/core/trace-context";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { renderTraceText } from "../../lib/operator/render-text";
import { runView } from "../../lib/operator/runs";
import { buildTrace, type TraceSources } from "../../lib/operator/trace";
import type { TraceView } from "../../lib/operator/views";
import type { Envelope } from "../../schemas";
import type { StepRequested } from "../../schemas/events/step";
import type { WorkflowEnded, WorkflowRejected } from "../../schemas/events/workflow";
import type {
  WorkflowChildEnded,
  WorkflowChildStartRequested,
} from "../../schemas/events/workflow-child";
import * as z from "../../schemas/zod";
import { Bus, type Delivery } from "./workflow-bus";

/**
 * Child runs: a node that runs another workflow as a run of its own, started, cancelled and
 * heard back from by the orchestrator on the in-memory bus; and plans, a workflow an agent
 * produced, run as a child once checked against the language and its tenant's allowed roles.
 */

const Input = z.looseObject({ topic_hint: z.string() });
type Answer = (input: z.output<typeof Input>, context: StepContext) => unknown;

/** A step role whose answer a test chooses (by default it says which node it ran for). */
function stepModule(group: string, answer: Answer) {
  const calls: string[] = [];
  const module = defineStepModule({
    group,
    entry: "test/core/workflow-child.test.ts",
    steps: {
      input: Input,
      output: z.looseObject({}),
      run: () => async (input: z.output<typeof Input>, context) => {
        calls.push(`${context.runId}/${context.nodeId}`);
        return answer(input, context);
      },
    },
  });
  return { module, calls };
}

const said: Answer = (input, { nodeId }) => ({ said: input.topic_hint, node: nodeId });

/** `inner` fails, any other node answers. */
const innerFails: Answer = (input, context) => {
  if (context.nodeId === "inner") throw new PermanentError("echo.refused", "inner refuses");
  return said(input, context);
};

const WORKFLOWS: Record<string, Omit<WorkflowDefinitionInput, "version">> = {
  "sub-flow": { name: "sub-flow", nodes: [{ id: "inner", role: "echo" }] },
  "sub-partial": {
    name: "sub-partial",
    nodes: [
      { id: "inner", role: "echo" },
      { id: "other", role: "echo" },
    ],
  },
  "parent-flow": {
    name: "parent-flow",
    nodes: [
      { id: "first", role: "echo" },
      {
        id: "sub",
        workflow: { name: "sub-flow", input: { seen: { node: "first", path: "said" } } },
      },
      { id: "last", role: "echo" },
    ],
    edges: [
      { from: "first", to: "sub" },
      { from: "sub", to: "last" },
    ],
  },
  "partial-accepted": {
    name: "partial-accepted",
    nodes: [
      { id: "sub", workflow: { name: "sub-partial", acceptPartial: true } },
      { id: "last", role: "echo" },
    ],
    edges: [{ from: "sub", to: "last" }],
  },
  "partial-refused": {
    name: "partial-refused",
    nodes: [{ id: "sub", workflow: { name: "sub-partial" } }],
  },
  "nest-flow": { name: "nest-flow", nodes: [{ id: "sub", workflow: { name: "sub-flow" } }] },
  "grand-flow": { name: "grand-flow", nodes: [{ id: "nest", workflow: { name: "nest-flow" } }] },
  "unknown-child": {
    name: "unknown-child",
    nodes: [
      { id: "first", role: "echo" },
      { id: "sub", workflow: { name: "no-such-flow" } },
    ],
    edges: [{ from: "first", to: "sub" }],
  },
  "sub-needs-audience": {
    name: "sub-needs-audience",
    nodes: [{ id: "inner", role: "echo" }],
    input: {
      type: "object",
      properties: { topic_hint: { type: "string" }, audience: { type: "string" } },
      required: ["topic_hint", "audience"],
    },
  },
  "misfit-child": {
    name: "misfit-child",
    nodes: [
      { id: "first", role: "echo" },
      { id: "sub", workflow: { name: "sub-needs-audience" } },
    ],
    edges: [{ from: "first", to: "sub" }],
  },
  "plan-flow": {
    name: "plan-flow",
    nodes: [
      { id: "planner", role: "planner" },
      { id: "run", workflow: { plan: { node: "planner", path: "plan" } } },
      { id: "after", role: "echo" },
    ],
    edges: [
      { from: "planner", to: "run" },
      { from: "run", to: "after" },
    ],
  },
};

interface Setup {
  readonly echo?: Answer;
  /** The planner's plan (its output is `{ plan }`). */
  readonly plan?: unknown;
  /** The roles the default tenant's plans may name (none set when absent). */
  readonly allowed?: readonly string[];
  readonly duplicate?: boolean;
}

/** A bus with the echo and planner step roles, every workflow above registered. */
async function setUp({ echo = said, plan, allowed, duplicate }: Setup = {}) {
  const echoRole = stepModule("echo", echo);
  const planner = stepModule("planner", () => ({ plan }));
  const modules = [echoRole.module, planner.module];
  const stepRoles = stepRolesOf([...contentAgentModules, ...modules]);
  const registry = new InMemoryWorkflowRegistry();
  for (const definition of Object.values(WORKFLOWS))
    await putWorkflow(registry, EVERY_TENANT, definition, { roles: Object.keys(stepRoles) });
  if (allowed) await allowPlanRoles(registry, "default", allowed, Object.keys(stepRoles));
  const orchestrator = orchestratorRole({ stepRoles, registry });
  const holder: { bus?: Bus } = {};
  const ports = {
    get store() {
      return holder.bus?.store;
    },
  } as unknown as RolePorts;
  const roles: Role<unknown>[] = modules.map((m) => buildRole(m, ports));
  const bus = new Bus({ orchestrator, roles, ...(duplicate ? { duplicate } : {}) });
  holder.bus = bus;
  return { bus, echo: echoRole, orchestrator };
}

const newRunId = () => `run_${ulid()}`;

/** The child runs of `parent`, in the order they were started. */
function childrenOf(bus: Bus, parent: string): OrchestratorState[] {
  return bus
    .emitted("workflow.child.start.requested")
    .map((e) => e.payload as WorkflowChildStartRequested)
    .filter((p) => p.parent_run_id === parent)
    .flatMap((p) => {
      const state = bus.store.states.get(`dag_run#${p.run_id}`)?.data as
        | OrchestratorState
        | undefined;
      return state ? [state] : [];
    });
}

function onlyChild(bus: Bus, parent: string): OrchestratorState {
  const children = childrenOf(bus, parent);
  expect(children).toHaveLength(1);
  return children[0] as OrchestratorState;
}

const failedOf = (state: OrchestratorState, node: string) => state.run.nodes[node]?.error;

describe("a child node runs another workflow as a run of its own", () => {
  it("feeds a completed child's outputs to the parent's downstream, and the child knows its parent", async () => {
    const { bus, echo } = await setUp();
    const runId = newRunId();
    bus.start(runId, "parent-flow", "tidal power");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const parent = bus.state(runId);
    expect(parent.run.status).toBe("COMPLETED");
    const child = onlyChild(bus, runId);
    expect(child.run.status).toBe("COMPLETED");
    expect(child.run.workflow).toEqual({ name: "sub-flow", version: 1 });
    expect(child.parent).toEqual({ run_id: runId, node_id: "sub", generation: 0 });
    // The child's input: the parent's request with the node's input over it.
    expect(child.run.input).toEqual({ topic_hint: "tidal power", seen: "tidal power" });
    const inner = { said: "tidal power", node: "inner" };
    expect(parent.run.nodes.sub?.output).toEqual({
      status: "COMPLETED",
      outputs: { inner },
    });
    // `last` worked from the child's outputs.
    const last = bus
      .emitted("echo.node.requested")
      .map((e) => e.payload as StepRequested)
      .find((p) => p.node_id === "last");
    expect(last?.input).toEqual({ sub: { status: "COMPLETED", outputs: { inner } } });
    // The child's end carries its parent; its end to the parent is ordered with the parent.
    const ended = bus
      .emitted("workflow.completed")
      .find((e) => e.aggregate.id === child.run.run_id);
    expect(ended?.payload).toMatchObject({ parent_run_id: runId, parent_node_id: "sub" });
    const [toParent] = bus.emitted("workflow.child.ended");
    expect(toParent?.order_key).toBe(runId);
    expect(toParent?.aggregate.id).toBe(child.run.run_id);
    expect(echo.calls).toEqual([`${runId}/first`, `${child.run.run_id}/inner`, `${runId}/last`]);
  });

  it("names the parent run on every event of the child run, and one trace covers both runs", async () => {
    const { bus } = await setUp();
    const runId = newRunId();
    bus.start(runId, "parent-flow", "tidal power");
    await bus.drain();
    const child = onlyChild(bus, runId).run.run_id;
    const runOf = (e: Envelope) =>
      e.aggregate.type === "dag_run" ? e.aggregate.id : (e.payload as { run_id?: string }).run_id;
    const ofChild = bus.store.log.filter((e) => runOf(e) === child);
    const ofParent = bus.store.log.filter((e) => runOf(e) === runId);
    // The child's own events, its step's request and the step's answer.
    expect(new Set(ofChild.map((e) => e.event_type))).toEqual(
      new Set([
        "echo.node.requested",
        "step.completed",
        "workflow.completed",
        "workflow.child.ended",
      ]),
    );
    expect(ofChild.map((e) => e.parent_run_id)).toEqual(ofChild.map(() => runId));
    // The parent's events name no parent, the ones its child's end caused included.
    expect(ofParent.length).toBeGreaterThan(3);
    expect(ofParent.filter((e) => e.parent_run_id !== undefined)).toEqual([]);
    expect(new Set(bus.store.log.map(traceIdOf)).size).toBe(1);

    // `agentbus trace <run>`: the trace id, the parent run of the child and the child of the parent.
    const sources: TraceSources = {
      reader: bus.store,
      groups: [],
      sideEffects: async () => [],
      stream: async (ref) =>
        bus.store.log.filter((e) => e.aggregate.type === ref.type && e.aggregate.id === ref.id),
    };
    for (const asked of [runId, child]) {
      const view = await buildTrace(sources, asked);
      expect(view?.traceIds).toEqual([traceIdOf(bus.store.log[0] as Envelope)]);
      expect(view?.runs).toEqual([
        { runId, childRunIds: [child] },
        { runId: child, parentRunId: runId, childRunIds: [] },
      ]);
      const text = renderTraceText(view as TraceView);
      expect(text).toContain(`trace id    ${traceIdOf(bus.store.log[0] as Envelope)}`);
      expect(text).toContain(`run         ${child}, child of ${runId}`);
    }
    expect(runView(bus.state(runId)).childRuns).toEqual([{ nodeId: "sub", runId: child }]);
    expect(runView(bus.state(child)).parentRunId).toBe(runId);
  });

  it("fails the parent's node when the child fails, and accepts a PARTIAL child only under acceptPartial", async () => {
    const { bus } = await setUp({ echo: innerFails });
    const failing = newRunId();
    const accepted = newRunId();
    const refused = newRunId();
    bus.start(failing, "parent-flow");
    bus.start(accepted, "partial-accepted");
    bus.start(refused, "partial-refused");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);

    const first = bus.state(failing);
    expect(onlyChild(bus, failing).run.status).toBe("FAILED");
    expect(first.run.nodes.sub?.state).toBe("FAILED");
    expect(failedOf(first, "sub")?.code).toBe("dag.child_failed");
    expect(first.run.nodes.last?.state).toBe("CANCELLED");
    expect(first.run.status).toBe("PARTIAL");

    const partial = bus.state(accepted);
    expect(onlyChild(bus, accepted).run.status).toBe("PARTIAL");
    expect(partial.run.status).toBe("COMPLETED");
    expect(partial.run.nodes.sub?.output).toMatchObject({ status: "PARTIAL" });

    const strict = bus.state(refused);
    expect(failedOf(strict, "sub")?.code).toBe("dag.child_partial");
    expect(strict.run.status).toBe("FAILED");
  });

  it("cancels the child and the grandchild with the parent, and their late ends change nothing", async () => {
    const { bus, echo } = await setUp();
    const runId = newRunId();
    bus.start(runId, "grand-flow");
    // Everything but the step role's work: the grandchild's node stays RUNNING.
    const notEcho = (d: Delivery) => d.group !== "echo";
    await bus.drain(notEcho);
    const child = onlyChild(bus, runId);
    const grandchild = onlyChild(bus, child.run.run_id);
    expect(grandchild.run.nodes.inner?.state).toBe("RUNNING");

    bus.send(
      bus.command("workflow.cancel.requested", runId, { requested_by: "alice", reason: "pulled" }),
    );
    await bus.drain(notEcho);
    for (const id of [runId, child.run.run_id, grandchild.run.run_id])
      expect(bus.state(id).run.status).toBe("CANCELLED");
    const cancelled = bus
      .emitted("workflow.cancelled")
      .find((e) => e.aggregate.id === grandchild.run.run_id)?.payload as WorkflowEnded;
    expect(cancelled.parent_run_id).toBe(child.run.run_id);
    // The grandchild's step was told its assignment no longer counts.
    expect(bus.emitted("echo.node.cancel.requested")).toHaveLength(1);
    // The ends reached each parent and were ignored there.
    expect(bus.emitted("workflow.child.ended")).toHaveLength(2);
    const runs = [runId, child.run.run_id, grandchild.run.run_id];
    const before = runs.map((id) => bus.state(id));
    // The step already queued still runs (a step role has no look-ahead for a cancel); its
    // answer changes nothing.
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(echo.calls).toEqual([`${grandchild.run.run_id}/inner`]);
    expect(runs.map((id) => bus.state(id))).toEqual(before);
  });

  it("ignores the end of a child whose node was re-run meanwhile; the new child's end counts", async () => {
    const { bus, echo } = await setUp();
    const runId = newRunId();
    bus.start(runId, "nest-flow");
    const notEcho = (d: Delivery) => d.group !== "echo";
    await bus.drain(notEcho);
    const old = onlyChild(bus, runId);

    bus.send(bus.command("workflow.rerun.requested", runId, { node_id: "sub" }));
    await bus.drain(notEcho);
    const children = childrenOf(bus, runId);
    expect(children).toHaveLength(2);
    const renewed = children[1] as OrchestratorState;
    expect(renewed.parent).toEqual({ run_id: runId, node_id: "sub", generation: 1 });
    expect(bus.state(old.run.run_id).run.status).toBe("CANCELLED");
    // The old child's end reached the parent, which runs the node's new assignment.
    const [late] = bus.emitted("workflow.child.ended").map((e) => e.payload as WorkflowChildEnded);
    expect(late).toMatchObject({
      child_run_id: old.run.run_id,
      status: "CANCELLED",
      generation: 0,
    });
    expect(bus.state(runId).run.nodes.sub).toMatchObject({
      state: "RUNNING",
      assigned_generation: 1,
    });

    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    const parent = bus.state(runId);
    expect(parent.run.status).toBe("COMPLETED");
    expect(parent.run.nodes.sub?.output).toEqual({
      status: "COMPLETED",
      outputs: { inner: { said: "energy storage in cities", node: "inner" } },
    });
    expect(echo.calls).toEqual([`${old.run.run_id}/inner`, `${renewed.run.run_id}/inner`]);
  });

  it("starts one child for a redelivered start, and a start for a child that exists changes nothing", async () => {
    const { bus, echo, orchestrator } = await setUp({ duplicate: true });
    const runId = newRunId();
    bus.start(runId, "parent-flow");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(bus.emitted("workflow.child.start.requested")).toHaveLength(1);
    expect(echo.calls.filter((c) => c.endsWith("/inner"))).toHaveLength(1);

    // The parent's start command once more, as a copy with an id of its own: the child exists.
    const [start] = bus.emitted("workflow.child.start.requested");
    const child = onlyChild(bus, runId);
    const again = { ...structuredClone(start), event_id: ulid() } as NonNullable<typeof start>;
    const decision = await orchestrator.decide(child, again, {
      now: bus.clock.now(),
      receiveCount: 1,
      stored: undefined,
      repaired: false,
    });
    expect(decision).toEqual({});
  });

  it("fails the node clearly when the child names a workflow nobody has", async () => {
    const { bus } = await setUp();
    const runId = newRunId();
    bus.start(runId, "unknown-child");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    const parent = bus.state(runId);
    expect(parent.run.status).toBe("PARTIAL");
    const error = failedOf(parent, "sub");
    expect(error?.code).toBe("workflow.unknown_kind");
    expect(error?.message).toContain("no-such-flow");
    const [rejected] = bus.emitted("workflow.rejected").map((e) => e.payload as WorkflowRejected);
    expect(rejected).toMatchObject({ code: "workflow.unknown_kind", parent_run_id: runId });
    expect(childrenOf(bus, runId)).toEqual([]);
  });

  it("fails the node when the child's request does not fit the child workflow's input, starting nothing", async () => {
    const { bus, echo } = await setUp();
    const runId = newRunId();
    bus.start(runId, "misfit-child");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);
    const error = failedOf(bus.state(runId), "sub");
    expect(error?.code).toBe("workflow.invalid_child_input");
    expect(error?.message).toContain("audience");
    expect(childrenOf(bus, runId)).toEqual([]);
    expect(echo.calls).toEqual([`${runId}/first`]);
  });
});

/** One echo node, as a planner would write it. */
const PLAN = { name: "made-plan", nodes: [{ id: "x", role: "echo" }] };

describe("a plan an agent produced runs as a child", () => {
  it("runs a plan whose roles the tenant allows, pinned in the child run", async () => {
    const { bus, echo } = await setUp({ plan: PLAN, allowed: ["echo"] });
    const runId = newRunId();
    bus.start(runId, "plan-flow");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);

    expect(bus.state(runId).run.status).toBe("COMPLETED");
    const child = onlyChild(bus, runId);
    expect(child.run.workflow).toEqual({ name: "made-plan", version: 1 });
    expect(child.plan).toMatchObject(PLAN);
    expect(child.run.status).toBe("COMPLETED");
    expect(echo.calls).toEqual([`${child.run.run_id}/x`, `${runId}/after`]);
  });

  it("a plan produced by an agent is refused when it names a role the tenant may not use", async () => {
    const plan = {
      name: "made-plan",
      nodes: [
        { id: "x", role: "echo" },
        { id: "y", role: "writing" },
        { id: "z", role: "bookkeeper" },
      ],
    };
    const { bus, echo } = await setUp({ plan, allowed: ["echo"] });
    const runId = newRunId();
    bus.start(runId, "plan-flow");
    await bus.drain();
    expect(bus.deadLettered).toEqual([]);

    const parent = bus.state(runId);
    const error = failedOf(parent, "run");
    expect(error?.code).toBe("workflow.plan_role_not_allowed");
    expect(error?.message).toContain("names bookkeeper, writing, which it may not");
    expect(error?.message).toContain("tenant default's plans may name echo");
    expect(parent.run.nodes.after?.state).toBe("CANCELLED");
    // Nothing of the plan ran.
    expect(childrenOf(bus, runId)).toEqual([]);
    expect(echo.calls).toEqual([]);
    expect(bus.emitted("writing.requested")).toEqual([]);
  });

  it("refuses every plan of a tenant with no policy, saying how to allow roles", async () => {
    const { bus, echo } = await setUp({ plan: PLAN });
    const runId = newRunId();
    bus.start(runId, "plan-flow");
    await bus.drain();
    const error = failedOf(bus.state(runId), "run");
    expect(error?.code).toBe("workflow.plan_role_not_allowed");
    expect(error?.message).toContain(
      "tenant default's plans may name no role (agentbus workflow allow --tenant default <role...>)",
    );
    expect(echo.calls).toEqual([]);
  });

  it("refuses a malformed plan naming every problem, and one that is not there", async () => {
    const plan = {
      name: "made_plan",
      nodes: [
        { id: "a", role: "echo" },
        { id: "a", role: "echo" },
      ],
      edges: [{ from: "a", to: "nowhere" }],
    };
    const { bus, echo } = await setUp({ plan, allowed: ["echo"] });
    const runId = newRunId();
    bus.start(runId, "plan-flow");
    await bus.drain();
    const error = failedOf(bus.state(runId), "run");
    expect(error?.code).toBe("workflow.invalid_plan");
    expect(error?.message).toContain("3 problems");
    for (const code of ["workflow.bad_name", "dag.duplicate_node", "dag.unknown_node"])
      expect(error?.message).toContain(code);
    expect(echo.calls).toEqual([]);

    const { bus: empty } = await setUp({ allowed: ["echo"] });
    const none = newRunId();
    empty.start(none, "plan-flow");
    await empty.drain();
    expect(failedOf(empty.state(none), "run")).toMatchObject({
      code: "workflow.invalid_plan",
      message: expect.stringContaining("there is no plan"),
    });
  });

  it("refuses to allow a role the stack does not have, and sets nothing", async () => {
    const registry = new InMemoryWorkflowRegistry();
    await expect(
      allowPlanRoles(registry, "acme", ["echo", "bookkeeper"], ["echo", "writing"]),
    ).rejects.toMatchObject({ code: "workflow.unknown_role" });
    expect(await registry.allowedRoles("acme")).toBeUndefined();
    expect(
      await allowPlanRoles(registry, "acme", ["writing", "echo", "echo"], ["echo", "writing"]),
    ).toEqual(["echo", "writing"]);
    expect(await registry.allowedRoles("acme")).toEqual(["echo", "writing"]);
    expect(await registry.allowedRoles("globex")).toBeUndefined();
  });
});
