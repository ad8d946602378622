import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { type AgentRun, upcastRun } from "../../functions/core/agent-run";
import { TransientError } from "../../functions/core/errors";
import type { ModelRequest } from "../../functions/core/model";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import {
  AGENT_RUN_AGGREGATE,
  agentRunIdOf,
  agentRunKey,
  contentAgentRole,
} from "../../functions/roles/content-agents/content-agent";
import type { Envelope } from "../../schemas";
import { Bus } from "./workflow-bus";

/**
 * Run ids as seed 000 §4.1–4.2 defines them: `run_id` names one agent run and is new for each run
 * and each resume; the agent run key (the `agent_run` aggregate id) stays the DAG node's at its
 * generation through all of them.
 */

const runIdOf = (e: Envelope | undefined) => e?.run_id;

/** A bus whose reviewer asks for a confirmation `times` times before it answers. */
function askingBus(times: number): Bus {
  const bus = new Bus({ acknowledge: true });
  const converse = bus.model.converse.bind(bus.model);
  let asked = 0;
  Object.assign(bus.model, {
    converse: async (request: ModelRequest) => {
      const answer = await converse(request);
      if (request.metadata?.role !== "review" || asked >= times) return answer;
      asked++;
      const question = `is quote ${asked} right?`;
      return { ...answer, text: JSON.stringify({ needs_confirmation: { question } }) };
    },
  });
  return bus;
}

const confirm = (bus: Bus, runId: string) =>
  bus.send(
    bus.command("workflow.confirm.requested", runId, {
      node_id: "review",
      answer: "confirmed",
      requested_by: "alice",
    }),
  );

describe("run_id of a content agent", () => {
  it("is new for each resume of a BLOCKED agent run, while the DAG keeps one agent run for the node", async () => {
    const bus = askingBus(2);
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain();
    confirm(bus, runId);
    await bus.drain();
    confirm(bus, runId);
    await bus.drain();

    const [blocked1, blocked2] = bus.emitted("node.blocked");
    const [completed] = bus.emitted("review.completed");
    const runs = [blocked1, blocked2, completed].map(runIdOf);
    expect(runs.every((r) => r?.startsWith("agrun_"))).toBe(true);
    expect(new Set(runs).size).toBe(3);
    // Each resumed run names the run it resumed.
    expect([blocked1, blocked2, completed].map((e) => e?.resumed_from)).toEqual([
      undefined,
      runIdOf(blocked1),
      runIdOf(blocked2),
    ]);

    // One agent run throughout: one stream, the DAG node's at generation 0.
    const key = agentRunKey(runId, "review", 0);
    for (const e of [blocked1, blocked2, completed])
      expect(e?.aggregate).toMatchObject({ type: AGENT_RUN_AGGREGATE, id: key });
    const agentRun = bus.agentRun(runId, "review");
    expect(agentRun).toMatchObject({ agent_run_key: key, run_id: runIdOf(completed) });
    // Its history says which run each change happened in.
    const resumes = agentRun?.history.filter((h) => h.trigger === "ExternalUnblocked");
    expect(resumes?.map((h) => h.run_id)).toEqual([runIdOf(blocked2), runIdOf(completed)]);

    // Each run was acknowledged under the run id its answer carries.
    const reviewAcks = bus.acknowledged.filter(
      (e) => e.event_type === "node.started" && e.aggregate.id === runId && e.producer === "review",
    );
    expect(reviewAcks.map(runIdOf)).toEqual(runs);

    // The DAG recognised the node's answers across the resumes and finished the run.
    expect(bus.state(runId).run.nodes.review?.state).toBe("COMPLETED");
    expect(bus.ended(runId).map((e) => e.type)).toEqual(["workflow.completed"]);
  });

  it("is new for a redelivery after a failed run; the answer carries the run that committed, at its attempt", async () => {
    const bus = new Bus();
    bus.model.failNext("writing", new TransientError("model.throttled", "slow down"));
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain();

    const [request] = bus.emitted("writing.requested");
    const [completed] = bus.emitted("writing.completed");
    if (!request || !completed) throw new Error("no writing request or answer");
    expect(completed.run_id).toBe(agentRunIdOf("writing", request, 2));
    expect(completed.attempt).toBe(2);
    // The failed first delivery was a run of its own, recorded under its id.
    const agentRun = bus.agentRun(runId, "writing");
    const starts = agentRun?.history.filter((h) => h.trigger === "DependenciesSatisfied");
    expect(starts?.map((h) => h.run_id)).toEqual([
      agentRunIdOf("writing", request, 1),
      agentRunIdOf("writing", request, 2),
    ]);
    expect(agentRun?.attempt).toBe(2);
    expect(bus.state(runId).run.status).toBe("COMPLETED");
  });

  it("stays what was committed when the request comes again: a redelivery is a duplicate, a repeated request answers under the same run", async () => {
    const bus = new Bus();
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain();
    const [request] = bus.emitted("writing.requested");
    const [answer] = bus.emitted("writing.completed");
    if (!request || !answer) throw new Error("no writing request or answer");
    const writer = bus.roles.find((r) => r.group === "writing") as Role<AgentRun>;

    const again = await consume(request, writer, bus.deps, { receiveCount: 3 });
    expect(again.status).toBe("duplicate");
    expect(bus.emitted("writing.completed")).toHaveLength(1);
    expect(bus.agentRun(runId, "writing")?.run_id).toBe(answer.run_id);

    // Asked again by a new message (the orchestrator does when a lease ran out): the same answer,
    // under the run that made it, not the run id this delivery would have.
    const stored = bus.agentRun(runId, "writing");
    const decision = await writer.decide(
      stored,
      { ...request, event_id: ulid() },
      {
        now: bus.clock.now(),
        receiveCount: 1,
        stored: undefined,
        repaired: false,
      },
    );
    expect(decision.emit?.map((s) => [s.type, s.runId])).toEqual([
      ["writing.completed", answer.run_id],
    ]);
  });

  it("is the same when one delivery decides again (a version conflict), so one run has one id", async () => {
    const bus = new Bus();
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain((d) => d.event.event_type !== "writing.requested");
    const request = bus.pending.find((d) => d.event.event_type === "writing.requested")?.event;
    if (!request) throw new Error("no writing request");
    const writer = contentAgentRole({ role: "writing", model: bus.model });
    const context = { now: bus.clock.now(), receiveCount: 2, stored: undefined, repaired: false };
    const first = await writer.decide(undefined, request, context);
    const second = await writer.decide(undefined, request, context);
    expect(first.state?.run_id).toBe(agentRunIdOf("writing", request, 2));
    expect(second.state?.run_id).toBe(first.state?.run_id);
    expect(second.emit?.[0]?.runId).toBe(first.emit?.[0]?.runId);
  });
});

describe("an agent run stored before run ids were per run", () => {
  it("keeps its key (its old run_id) and answers a repeated request under that id", async () => {
    const bus = new Bus();
    const runId = `run_${ulid()}`;
    bus.start(runId, "long-form");
    await bus.drain();
    const [request] = bus.emitted("writing.requested");
    if (!request) throw new Error("no writing request");
    const current = bus.agentRun(runId, "writing");
    if (!current) throw new Error("no agent run");
    const key = agentRunKey(runId, "writing", 0);
    const { agent_run_key: _k, ...rest } = current;
    const old = { ...rest, run_id: key } as AgentRun;
    expect(upcastRun(old)).toMatchObject({ agent_run_key: key, run_id: key });

    const writer = bus.roles.find((r) => r.group === "writing") as Role<AgentRun>;
    const decision = await writer.decide(
      old,
      { ...request, event_id: ulid() },
      {
        now: bus.clock.now(),
        receiveCount: 1,
        stored: undefined,
        repaired: false,
      },
    );
    expect(decision.emit?.map((s) => s.runId)).toEqual([key]);
    expect(writer.summarize?.(old)?.label).toContain(key);
  });
});
