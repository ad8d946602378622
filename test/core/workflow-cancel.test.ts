import { ulid } from "ulid";
import { beforeEach, describe, expect, it } from "vitest";
import type { AgentRun } from "../../functions/core/agent-run";
import type { ModelPort } from "../../functions/core/model";
import { consume } from "../../functions/core/pipeline";
import type { ConsumeResult, Role } from "../../functions/core/role";
import { agentRunKey, contentAgentRole } from "../../functions/roles/content-agents/content-agent";
import { CONTENT_ROLES, type ContentRole } from "../../functions/roles/content-agents/events";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../schemas";
import type { NodeCancelRequested, WorkflowCancelled } from "../../schemas/events/workflow-cancel";
import { orchestrator, referenceLocalModel } from "../support/reference";
import { makeDeps } from "./fixtures";
import { statedClaims } from "./workflow-bus";

/**
 * Cancelling a run: the orchestrator's handler of workflow.cancel.requested and
 * the content agents' handling of `<role>.cancel.requested`, through `consume` with the in-memory
 * store. Messages are delivered by hand, one group at a time, so a test decides what an agent has
 * received when.
 */

const OPERATOR = { requested_by: "alice", reason: "the story was pulled" };

class Desk {
  readonly model = referenceLocalModel();
  readonly fixtures = makeDeps();
  readonly agents: Record<ContentRole, Role<AgentRun>>;
  /** What each group has been sent and not yet handled, in order. */
  readonly queues = new Map<string, Envelope[]>();

  constructor(model?: ModelPort) {
    const store = this.fixtures.store;
    const used = model ?? this.model;
    this.agents = Object.fromEntries(
      CONTENT_ROLES.map((role) => [
        role,
        contentAgentRole({ role, model: used, commandStream: store }),
      ]),
    ) as Record<ContentRole, Role<AgentRun>>;
  }

  get store() {
    return this.fixtures.store;
  }

  private roles(): Role<unknown>[] {
    return [orchestrator as Role<unknown>, ...(Object.values(this.agents) as Role<unknown>[])];
  }

  /** Queue an event for every group subscribed to it. */
  send(event: Envelope): void {
    for (const role of this.roles())
      if (role.subscriptions.includes(event.event_type))
        this.queues.set(role.group, [...(this.queues.get(role.group) ?? []), event]);
  }

  /** Handle everything queued for `group` (and what that emits, for the groups in `groups`). */
  async deliver(group: string): Promise<ConsumeResult[]> {
    const role = this.roles().find((r) => r.group === group);
    if (!role) throw new Error(`no group ${group}`);
    const results: ConsumeResult[] = [];
    for (let next = this.take(group); next; next = this.take(group)) {
      this.fixtures.clock.advance(1000);
      const result = await consume(next, role, this.fixtures.deps);
      results.push(result);
      for (const step of result.steps) for (const e of step.emitted) this.send(e);
    }
    return results;
  }

  /** Deliver until nothing is queued for the given groups. */
  async drain(groups: readonly string[]): Promise<void> {
    while (groups.some((g) => (this.queues.get(g) ?? []).length > 0))
      for (const g of groups) await this.deliver(g);
  }

  queued(group: string): Envelope[] {
    return this.queues.get(group) ?? [];
  }

  private take(group: string): Envelope | undefined {
    const queue = this.queues.get(group) ?? [];
    const next = queue.shift();
    this.queues.set(group, queue);
    return next;
  }

  command(type: string, runId: string, payload: Record<string, unknown>): Envelope {
    const parsed = registry.parse({
      event_id: ulid(),
      event_type: type,
      schema_version: 1,
      occurred_at: this.fixtures.clock.now().toISOString(),
      correlation_id: `corr_${ulid()}`,
      causation_id: null,
      task_id: `task_${ulid()}`,
      aggregate: { type: "dag_run", id: runId, version: 0 },
      order_key: runId,
      producer: "agentbus-cli",
      attempt: 1,
      payload: { run_id: runId, ...payload },
    });
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.envelope;
  }

  start(runId: string, workflow: "quick-news" | "long-form"): void {
    this.send(
      this.command("workflow.start.requested", runId, {
        workflow,
        request: { topic_hint: "tidal power" },
      }),
    );
  }

  cancel(runId: string, payload: Record<string, unknown> = OPERATOR): Envelope {
    const event = this.command("workflow.cancel.requested", runId, payload);
    this.send(event);
    return event;
  }

  run(runId: string): OrchestratorState {
    const data = this.store.states.get(`dag_run#${runId}`)?.data as OrchestratorState | undefined;
    if (!data) throw new Error(`no run ${runId}`);
    return data;
  }

  agentRun(runId: string, nodeId: string, generation = 0): AgentRun | undefined {
    return this.store.states.get(`agent_run#${agentRunKey(runId, nodeId, generation)}`)?.data as
      | AgentRun
      | undefined;
  }

  emitted(type: string, runId: string): Envelope[] {
    return this.store.log.filter((e) => e.event_type === type && e.aggregate.id === runId);
  }

  /** The claims topic selection stated for a run: the fact check's map items. */
  claims(runId: string): string[] {
    return statedClaims(this.store.log, runId);
  }
}

const newRunId = () => `run_${ulid()}`;

describe("the orchestrator cancels a run", () => {
  let desk: Desk;
  let runId: string;

  beforeEach(() => {
    desk = new Desk();
    runId = newRunId();
  });

  it("a running run ends CANCELLED, its running nodes' agents are told (each map item's too), the end says who and why", async () => {
    desk.start(runId, "quick-news");
    await desk.deliver("orchestrator");
    await desk.deliver("topic-selection");
    await desk.deliver("orchestrator");
    const running = desk.run(runId);
    expect(running.run.nodes["fact-check"]?.state).toBe("RUNNING");
    expect(running.run.nodes.writing?.state).toBe("RUNNING");
    const claims = desk.claims(runId);
    expect(claims.length).toBeGreaterThanOrEqual(2);

    desk.cancel(runId);
    const [result] = await desk.deliver("orchestrator");
    expect(result?.status).toBe("applied");

    const state = desk.run(runId);
    expect(state.run.status).toBe("CANCELLED");
    expect(state.run.nodes["topic-selection"]?.state).toBe("COMPLETED");
    for (const node of ["fact-check", "writing", "review"])
      expect(state.run.nodes[node]?.state, node).toBe("CANCELLED");
    expect(state.leases).toEqual({});
    const cancels = [
      ...desk.emitted("fact_check.cancel.requested", runId),
      ...desk.emitted("writing.cancel.requested", runId),
    ].map((e) => e.payload as NodeCancelRequested);
    expect(cancels).toEqual([
      ...claims.map((_, item) => ({
        run_id: runId,
        node_id: "fact-check",
        generation: 0,
        item,
        reason: "run_cancelled",
      })),
      { run_id: runId, node_id: "writing", generation: 0, reason: "run_cancelled" },
    ]);
    // Review was never released: no agent has anything to drop.
    expect(desk.emitted("review.cancel.requested", runId)).toEqual([]);
    const [ended] = desk.emitted("workflow.cancelled", runId);
    const payload = ended?.payload as WorkflowCancelled;
    expect(payload).toMatchObject({ run_id: runId, ...OPERATOR });
    expect(payload.result).toMatchObject({
      status: "CANCELLED",
      completed: ["topic-selection"],
      cancelled: ["fact-check", "review", "writing"],
    });
    expect(Object.keys(payload.result.outputs)).toEqual(["topic-selection"]);
    // Every command of the run keeps the run's order key.
    expect(new Set(desk.store.log.map((e) => e.order_key))).toEqual(new Set([runId]));
  });

  it("a second cancel changes nothing; late answers of the cancelled nodes change nothing", async () => {
    desk.start(runId, "quick-news");
    await desk.deliver("orchestrator");
    await desk.deliver("topic-selection");
    await desk.deliver("orchestrator");
    // The agents take their requests before the cancel reaches them: they answer anyway.
    const late = [...(await desk.deliver("fact-check")), ...(await desk.deliver("writing"))];
    const claims = desk.claims(runId);
    expect(late.map((r) => r.status)).toEqual([...claims, "writing"].map(() => "applied"));
    desk.queues.set("orchestrator", []); // hold the answers back: the cancel goes first
    desk.cancel(runId);
    await desk.deliver("orchestrator");
    const cancelled = structuredClone(desk.store.states.get(`dag_run#${runId}`));
    const logged = desk.store.log.length;

    desk.cancel(runId, { requested_by: "bob" });
    for (const step of late.flatMap((r) => r.steps)) for (const e of step.emitted) desk.send(e);
    const results = await desk.deliver("orchestrator");
    expect(results.map((r) => [r.event.event_type, r.status])).toEqual([
      ["workflow.cancel.requested", "applied"],
      ...claims.map(() => ["fact_check.completed", "applied"]),
      ["writing.completed", "applied"],
    ]);
    // The run's state and stream stay as they were (only the group's checkpoints moved with it).
    const after = desk.store.states.get(`dag_run#${runId}`);
    expect([after?.data, after?.version]).toEqual([cancelled?.data, cancelled?.version]);
    expect(desk.store.log).toHaveLength(logged);
    expect(desk.emitted("workflow.cancelled", runId)).toHaveLength(1);
  });

  it("refuses a cancel of an unknown run, or of a run that ended otherwise", async () => {
    const unknown = newRunId();
    desk.cancel(unknown);
    desk.start(runId, "long-form");
    await desk.drain(["orchestrator", ...CONTENT_ROLES]);
    expect(desk.run(runId).run.status).toBe("COMPLETED");
    const completed = structuredClone(desk.run(runId));

    desk.cancel(runId);
    const [result] = await desk.deliver("orchestrator");
    expect(result?.status).toBe("rejected");
    expect(result?.reason).toBe("workflow.run_ended");
    expect(
      desk.store.log.filter((e) => e.event_type === "workflow.rejected").map((e) => e.payload),
    ).toEqual([
      expect.objectContaining({ run_id: unknown, request: "cancel", code: "workflow.unknown_run" }),
      expect.objectContaining({ run_id: runId, request: "cancel", code: "workflow.run_ended" }),
    ]);
    expect(desk.run(runId)).toEqual(completed);
    expect(desk.emitted("workflow.cancelled", runId)).toEqual([]);
  });

  it("refuses an invalid cancel at the envelope: no requester, or a reason over 1000 characters", () => {
    const bad = (payload: Record<string, unknown>) => () =>
      desk.command("workflow.cancel.requested", runId, payload);
    expect(bad({})).toThrow(/requested_by/);
    expect(bad({ requested_by: "" })).toThrow(/requested_by/);
    expect(bad({ requested_by: "alice", reason: "x".repeat(1001) })).toThrow(/reason/);
  });
});

describe("a content agent told to cancel", () => {
  it("discards the request still queued behind which the cancel was committed: no model call", async () => {
    const desk = new Desk();
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    expect(desk.queued("topic-selection").map((e) => e.event_type)).toEqual([
      "topic_selection.requested",
    ]);
    desk.cancel(runId);
    await desk.deliver("orchestrator");
    expect(desk.queued("topic-selection").map((e) => e.event_type)).toEqual([
      "topic_selection.requested",
      "topic_selection.cancel.requested",
    ]);

    const results = await desk.deliver("topic-selection");
    expect(results.map((r) => [r.event.event_type, r.status, r.reason])).toEqual([
      ["topic_selection.requested", "discarded", "cancelled"],
      ["topic_selection.cancel.requested", "applied", undefined],
    ]);
    expect(desk.model.callCount("topic-selection")).toBe(0);
    expect(desk.emitted("topic_selection.completed", runId)).toEqual([]);
    const run = desk.agentRun(runId, "topic-selection");
    expect(run?.state).toBe("CANCELLED");
    expect(run?.history.map((h) => h.trigger)).toEqual(["TaskCancelled"]);
    expect(run?.history[0]?.reason).toMatch(/^run_cancelled: topic_selection\.cancel\.requested/);
    // Nothing else reached an agent, and the run is over.
    expect(desk.run(runId).run.status).toBe("CANCELLED");
    for (const role of CONTENT_ROLES) expect(desk.model.callCount(role)).toBe(0);
  });

  it("a cancel handled before its request (dead-lettered, say): the gap repair discards the request", async () => {
    const desk = new Desk();
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    const [request] = desk.queued("topic-selection");
    desk.queues.set("topic-selection", []);
    desk.cancel(runId);
    await desk.deliver("orchestrator");
    // The gap repair reads the request from the store first, and discards it.
    const first = await desk.deliver("topic-selection");
    expect(first.flatMap((r) => r.steps.map((s) => [s.eventType, s.status, s.repaired]))).toEqual([
      ["topic_selection.requested", "discarded", true],
      ["topic_selection.cancel.requested", "applied", false],
    ]);
    // Redriven later: a duplicate of what the group already handled.
    desk.send(request as Envelope);
    const [again] = await desk.deliver("topic-selection");
    expect(again?.status).toBe("duplicate");
    expect(desk.model.callCount("topic-selection")).toBe(0);
  });

  it("discards a request for an assignment it has stored as cancelled", async () => {
    const desk = new Desk();
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    const [request] = desk.queued("topic-selection");
    desk.cancel(runId);
    await desk.deliver("orchestrator");
    await desk.deliver("topic-selection");
    const cancelled = desk.agentRun(runId, "topic-selection");
    const agent = desk.agents["topic-selection"];
    const now = desk.fixtures.clock.now();
    expect(await agent.discard?.(cancelled, request as Envelope, now)).toBe("cancelled");
    expect(await agent.discard?.(undefined, request as Envelope, now)).toBe("cancelled");
    // Without the stream reader, only a cancel already received counts.
    const blind = contentAgentRole({ role: "topic-selection", model: desk.model });
    expect(await blind.discard?.(cancelled, request as Envelope, now)).toBe("cancelled");
    expect(await blind.discard?.(undefined, request as Envelope, now)).toBeUndefined();
  });

  it("ends a run in progress CANCELLED when the cancel was committed during its model call", async () => {
    const inner = referenceLocalModel();
    let duringCall: (() => Promise<void>) | undefined;
    const model: ModelPort = {
      name: inner.name,
      async converse(request) {
        const hook = duringCall;
        duringCall = undefined;
        await hook?.();
        return inner.converse(request);
      },
    };
    const desk = new Desk(model);
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    const cancel = desk.command("workflow.cancel.requested", runId, OPERATOR);
    duringCall = async () => {
      await consume(cancel, orchestrator, desk.fixtures.deps);
    };

    const [result] = await desk.deliver("topic-selection");
    expect(result?.status).toBe("discarded");
    expect(result?.reason).toBe("cancelled");
    expect(inner.callCount("topic-selection")).toBe(1);
    expect(desk.emitted("topic_selection.completed", runId)).toEqual([]);
    const run = desk.agentRun(runId, "topic-selection");
    expect(run?.state).toBe("CANCELLED");
    expect(run?.history.map((h) => h.to)).toEqual(["READY", "RUNNING", "CANCELLED"]);
    expect(run?.lease_expires_at).toBeUndefined();
  });

  it("leaves an assignment it already answered as it is", async () => {
    const desk = new Desk();
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    await desk.deliver("topic-selection");
    const answered = structuredClone(desk.agentRun(runId, "topic-selection"));
    expect(answered?.state).toBe("COMPLETED");
    desk.queues.set("orchestrator", []); // the answer is late: the cancel goes first
    desk.cancel(runId);
    await desk.deliver("orchestrator");
    const [result] = await desk.deliver("topic-selection");
    expect(result?.event.event_type).toBe("topic_selection.cancel.requested");
    expect(result?.status).toBe("applied");
    expect(desk.agentRun(runId, "topic-selection")).toEqual(answered);
  });

  it("a re-run cancels the old assignment still running: its queued request is dropped", async () => {
    const desk = new Desk();
    const runId = newRunId();
    desk.start(runId, "long-form");
    await desk.deliver("orchestrator");
    desk.send(desk.command("workflow.rerun.requested", runId, { node_id: "topic-selection" }));
    await desk.deliver("orchestrator");
    expect(desk.emitted("topic_selection.cancel.requested", runId).map((e) => e.payload)).toEqual([
      { run_id: runId, node_id: "topic-selection", generation: 0, reason: "rerun" },
    ]);
    const results = await desk.deliver("topic-selection");
    expect(results.map((r) => [r.event.event_type, r.status])).toEqual([
      ["topic_selection.requested", "discarded"],
      ["topic_selection.cancel.requested", "applied"],
      ["topic_selection.requested", "applied"],
    ]);
    expect(desk.model.callCount("topic-selection")).toBe(1);
    expect(desk.agentRun(runId, "topic-selection", 0)?.state).toBe("CANCELLED");
    expect(desk.agentRun(runId, "topic-selection", 1)?.state).toBe("COMPLETED");
    await desk.drain(["orchestrator", ...CONTENT_ROLES]);
    expect(desk.run(runId).run.status).toBe("COMPLETED");
  });
});
