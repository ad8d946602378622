import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { buildRole, defineStepModule } from "../../functions/core/role-module";
import { stepRunKey } from "../../functions/core/step-role";
import { stepRolesOf } from "../../functions/core/steps";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { orchestratorRole } from "../../functions/roles/orchestrator/orchestrator";
import { refundReviewModule } from "../../functions/roles/refund-review/index";
import type { RefundReviewStepOutput } from "../../functions/roles/refund-review/step";
import { memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import type { StepCompleted, StepFailed } from "../../schemas/events/step";
import type { WorkflowRejected } from "../../schemas/events/workflow";
import * as z from "../../schemas/zod";
import { Bus } from "./workflow-bus";

/**
 * Any role that declares steps is a node: a step role written here with the kit
 * (`defineStepModule`), in one workflow with content agents, run by the orchestrator on the
 * in-memory bus through the pipeline every consumer runs.
 */

const TopicOutput = z.looseObject({ topic: z.string(), sources: z.array(z.string()) });
const TallyInput = z.looseObject({ topic_hint: z.string(), "topic-selection": TopicOutput });
const TallyOutput = z.object({ topic: z.string(), sources: z.int().check(z.positive()) });

/** A step role that counts the topic's sources; `calls` counts its runs, `answer` what it returns. */
function tallyModule(group: string, answer?: (input: z.output<typeof TallyInput>) => unknown) {
  const calls: string[] = [];
  const module = defineStepModule({
    group,
    entry: "test/core/workflow-steps.test.ts",
    steps: {
      input: TallyInput,
      output: TallyOutput,
      leaseSeconds: 60,
      run: () => async (input: z.output<typeof TallyInput>, context) => {
        calls.push(`${context.nodeId}@${context.generation}`);
        if (answer) return answer(input);
        const topic = input["topic-selection"];
        return { topic: topic.topic, sources: topic.sources.length };
      },
    },
  });
  return { module, calls };
}

/** Topic selection, then the step role, then writing (a content agent) with its output. */
const workflowWith = (role: string) =>
  defineWorkflow({
    name: `${role}-news`,
    version: 1,
    nodes: [
      { id: "topic-selection", role: "topic-selection" },
      { id: "tally", role },
      { id: "writing", role: "writing" },
    ],
    edges: [
      { from: "topic-selection", to: "tally" },
      { from: "tally", to: "writing" },
    ],
  });

/** A bus with the content agents, `modules`' roles, and an orchestrator that knows them all. */
function busWith(modules: ReturnType<typeof tallyModule>["module"][], duplicate = false) {
  const stepRoles = stepRolesOf([...contentAgentModules, ...modules]);
  const orchestrator = orchestratorRole({
    stepRoles,
    workflows: modules.map((m) => workflowWith(m.descriptor.group)),
  });
  return new Bus({ orchestrator, modules, duplicate });
}

const newRunId = () => `run_${ulid()}`;

describe("a step role of the stack as a node beside the content agents", () => {
  it("runs a workflow mixing a content agent and a team's step role to completion", async () => {
    const tally = tallyModule("tally");
    const bus = busWith([tally.module]);
    const runId = newRunId();
    bus.start(runId, "tally-news");
    await bus.drain();

    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    // The step role was asked with its own request type and answered with step.completed.
    expect(bus.emitted("tally.node.requested")).toHaveLength(1);
    const [answer] = bus.emitted("step.completed");
    const completed = answer?.payload as StepCompleted;
    expect(completed.role).toBe("tally");
    expect(completed.node_id).toBe("tally");
    const topic = state.run.nodes["topic-selection"]?.output as {
      topic: string;
      sources: string[];
    };
    expect(completed.output).toEqual({ topic: topic.topic, sources: topic.sources.length });
    // Writing, a content agent, got the step's output as its input.
    const writing = bus.emitted("writing.requested")[0]?.payload as {
      input: Record<string, unknown>;
    };
    expect(writing.input).toEqual({ tally: completed.output });
    expect(tally.calls).toEqual(["tally@0"]);
  });

  it("does not run a step twice for a redelivered request, nor for the request sent again after its lease ran out", async () => {
    const tally = tallyModule("tally");
    const bus = busWith([tally.module], true);
    const runId = newRunId();
    bus.start(runId, "tally-news");
    // The answer is lost on its way to the orchestrator: the node's lease runs out.
    const lost = (d: { group: string; event: { event_type: string } }) =>
      d.group === "orchestrator" && d.event.event_type === "step.completed";
    await bus.drain((d) => !lost(d));
    bus.pending.splice(0, bus.pending.length);
    expect(tally.calls).toEqual(["tally@0"]);
    bus.clock.advance(5 * 3600 * 1000);
    const swept = bus.sweep();
    expect(swept.map((e) => e.event_type)).toContain("node.lease.expired");
    await bus.drain();

    expect(bus.state(runId).run.status).toBe("COMPLETED");
    expect(bus.emitted("tally.node.requested")).toHaveLength(2);
    // The request sent again is answered from the step run's record, the same answer.
    const answers = bus.emitted("step.completed").map((e) => (e.payload as StepCompleted).output);
    expect(answers).toHaveLength(2);
    expect(answers[1]).toEqual(answers[0]);
    expect(tally.calls).toEqual(["tally@0"]);
    expect(
      bus.handled.filter((h) => h.group === "tally" && h.status === "duplicate").length,
    ).toBeGreaterThan(0);
  });

  it("discards unrun a request queued when its run was cancelled, and records its assignment CANCELLED", async () => {
    const tally = tallyModule("tally");
    const bus = busWith([tally.module]);
    const runId = newRunId();
    bus.start(runId, "tally-news");
    await bus.drain((d) => d.group !== "tally");
    expect(bus.state(runId).run.nodes.tally?.state).toBe("RUNNING");
    bus.send(bus.command("workflow.cancel.requested", runId, { requested_by: "ops" }));
    await bus.drain((d) => d.group !== "tally");
    expect(bus.state(runId).run.status).toBe("CANCELLED");
    await bus.drain();

    expect(tally.calls).toEqual([]);
    expect(bus.handled.filter((h) => h.group === "tally")).toEqual([
      { group: "tally", type: "tally.node.requested", status: "discarded", reason: "cancelled" },
      { group: "tally", type: "tally.node.cancel.requested", status: "applied" },
    ]);
    expect(bus.emitted("step.completed")).toEqual([]);
    const key = stepRunKey(runId, "tally", 0);
    expect(bus.store.states.get(`step_run#${key}`)?.data).toMatchObject({
      status: "CANCELLED",
      node_id: "tally",
    });
    expect(bus.state(runId).run.status).toBe("CANCELLED");
  });

  it("runs a request whose assignment was not cancelled: a cancel of another generation does not count", async () => {
    const tally = tallyModule("tally");
    const bus = busWith([tally.module]);
    const runId = newRunId();
    bus.start(runId, "tally-news");
    await bus.drain((d) => d.group !== "tally");
    // A re-run of tally: the first request is cancelled (rerun), the second is not.
    bus.send(bus.command("workflow.rerun.requested", runId, { node_id: "tally" }));
    await bus.drain((d) => d.group !== "tally");
    await bus.drain();

    expect(tally.calls).toEqual(["tally@1"]);
    expect(bus.handled.filter((h) => h.group === "tally").map((h) => [h.type, h.status])).toEqual([
      ["tally.node.requested", "discarded"],
      ["tally.node.cancel.requested", "applied"],
      ["tally.node.requested", "applied"],
    ]);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });

  it("refuses a workflow whose node names a role that is not a step role of the stack, naming the step roles", async () => {
    const tally = tallyModule("tally");
    const stepRoles = stepRolesOf([...contentAgentModules, tally.module]);
    const orchestrator = orchestratorRole({ stepRoles, workflows: [workflowWith("bookkeeper")] });
    const bus = new Bus({ orchestrator });
    const runId = newRunId();
    bus.start(runId, "bookkeeper-news");
    await bus.drain();

    const [rejected] = bus.emitted("workflow.rejected");
    const payload = rejected?.payload as WorkflowRejected;
    expect(payload.code).toBe("workflow.unknown_step_role");
    expect(payload.message).toContain("names bookkeeper, which is not a step role of this stack");
    expect(payload.message).toContain(
      "(step roles: fact-check, review, tally, topic-selection, writing)",
    );
    expect(bus.store.states.get(`dag_run#${runId}`)?.data ?? null).toBeNull();
    expect(bus.emitted("topic_selection.requested")).toEqual([]);
  });

  it("answers step.failed when the step's output does not fit its schema, and the run fails there", async () => {
    const liar = tallyModule("liar", () => ({ topic: "x", sources: "many" }));
    const bus = busWith([liar.module]);
    const runId = newRunId();
    bus.start(runId, "liar-news");
    await bus.drain();

    const [failed] = bus.emitted("step.failed");
    const payload = failed?.payload as StepFailed;
    expect(payload.role).toBe("liar");
    expect(payload.error.code).toBe("step.invalid_output");
    expect(payload.error.errorClass).toBe("permanent");
    expect(payload.error.message).toContain("sources");
    expect(bus.emitted("step.completed")).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.nodes.tally?.state).toBe("FAILED");
    expect(state.run.nodes.writing?.state).toBe("CANCELLED");
    expect(state.run.status).toBe("PARTIAL");
  });

  it("answers step.failed without running the step when its input does not fit its schema", async () => {
    const strict = tallyModule("strict");
    const bus = busWith([strict.module]);
    const runId = newRunId();
    // The step wants topic-selection's output under its node id: a workflow without that edge.
    const orchestrator = orchestratorRole({
      stepRoles: stepRolesOf([...contentAgentModules, strict.module]),
      workflows: [
        defineWorkflow({ name: "bare", version: 1, nodes: [{ id: "tally", role: "strict" }] }),
      ],
    });
    const direct = new Bus({
      orchestrator,
      roles: bus.roles.filter((r) => r.group === "strict"),
    });
    direct.start(runId, "bare");
    await direct.drain();

    const payload = direct.emitted("step.failed")[0]?.payload as StepFailed;
    expect(payload.error.code).toBe("step.invalid_input");
    expect(payload.error.message).toContain("topic-selection");
    expect(strict.calls).toEqual([]);
    expect(direct.state(runId).run.status).toBe("FAILED");
  });
});

describe("the refund agent as a node", () => {
  const reviewThenWrite = defineWorkflow({
    name: "refund-note",
    version: 1,
    nodes: [
      { id: "review-refund", role: "refund-review" },
      { id: "writing", role: "writing" },
    ],
    edges: [{ from: "review-refund", to: "writing" }],
  });

  /** A run of refund-note for `request` (the run's input), to its end. */
  async function reviewed(request: Record<string, unknown>) {
    const stepRoles = stepRolesOf([...contentAgentModules, refundReviewModule]);
    const orchestrator = orchestratorRole({ stepRoles, workflows: [reviewThenWrite] });
    const holder: { bus?: Bus } = {};
    const store = new Proxy({}, { get: (_t, key) => Reflect.get(holder.bus?.store ?? {}, key) });
    const refund = buildRole(
      refundReviewModule,
      memoryRolePorts(store as never, refundReviewModule.uses) as never,
    );
    const bus = new Bus({ orchestrator, roles: [refund] });
    holder.bus = bus;
    const runId = newRunId();
    bus.send(bus.command("workflow.start.requested", runId, { workflow: "refund-note", request }));
    await bus.drain();
    return { bus, runId };
  }

  it("reviews a refund request by its module's declared steps, and the run goes on to writing", async () => {
    expect(refundReviewModule.deployment.needs?.steps).toEqual({
      requested: "refund_review.node.requested",
      cancel: "refund_review.node.cancel.requested",
      items: true,
      // Its step decides and refunds nothing, but its module may write: a plan naming it waits
      // for a person's approval.
      writes: ["content", "payments", "sideEffects"],
    });
    const { bus, runId } = await reviewed({
      topic_hint: "a refund for a delivered order",
      order_id: "456",
      customer_id: "cust_bob",
      reason: "the kettle stopped working",
    });
    expect(bus.deadLettered).toEqual([]);
    const state = bus.state(runId);
    expect(state.run.status).toBe("COMPLETED");
    const decision = state.run.nodes["review-refund"]?.output as RefundReviewStepOutput;
    expect(decision).toEqual({
      decision: "approve",
      reason: "order 456 is delivered and refundable",
      order_status: "delivered",
      amount_cents: 3450,
    });
    // A review refunds nothing: no refund, no conversation traffic.
    expect(bus.emitted("refund.approved")).toEqual([]);
    expect(bus.emitted("reply.generation.requested")).toEqual([]);
  });

  it("fails the node for another customer's order, and says an order refunded before was", async () => {
    const other = await reviewed({
      topic_hint: "t",
      order_id: "456",
      customer_id: "cust_alice",
      reason: "not mine",
    });
    const failed = other.bus.emitted("step.failed")[0]?.payload as StepFailed;
    expect(failed.error.code).toBe("refund.order_not_found");
    expect(other.bus.state(other.runId).run.status).toBe("FAILED");

    const again = await reviewed({
      topic_hint: "t",
      order_id: "B-2002",
      customer_id: "cust_bob",
      reason: "twice?",
    });
    const output = again.bus.state(again.runId).run.nodes["review-refund"]?.output;
    expect((output as RefundReviewStepOutput).decision).toBe("already_refunded");
  });
});
