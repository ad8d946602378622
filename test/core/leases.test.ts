import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { StoredState } from "../../functions/core/ports";
import type { Role } from "../../functions/core/role";
import { planSweep } from "../../functions/core/sweeper";
import {
  agentRunIdOf,
  agentRunKey,
  contentAgentRole,
} from "../../functions/roles/content-agents/content-agent";
import {
  DEFAULT_LEASE_SECONDS,
  DEFAULT_QUEUED_LEASE_SECONDS,
} from "../../functions/roles/orchestrator/orchestrator";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../schemas";
import { referenceLocalModel, referenceOrchestrator } from "../support/reference";
import { makeDeps } from "./fixtures";

/**
 * Node leases, the heartbeat and the due time of the orchestrator: what it records per RUNNING
 * node, how `node.heartbeat` extends it, when a lease report is honoured, and the `dueAt` each
 * state write carries into the store's due index.
 */

const T0 = "2026-09-01T10:00:00.000Z";
const plus = (iso: string, seconds: number) =>
  new Date(Date.parse(iso) + seconds * 1000).toISOString();

/** Messages about one run, as its callers and its agents send them. */
function runMessages(clock: { now(): Date }, runId: string) {
  const correlationId = `corr_${ulid()}`;
  const command = (type: string, payload: Record<string, unknown>): Envelope =>
    ({
      event_id: ulid(),
      event_type: type,
      schema_version: 1,
      occurred_at: clock.now().toISOString(),
      correlation_id: correlationId,
      causation_id: null,
      task_id: `task_${runId.slice(4)}`,
      aggregate: { type: "dag_run", id: runId, version: 0 },
      order_key: runId,
      producer: "test",
      attempt: 1,
      payload: { run_id: runId, ...payload },
    }) as Envelope;
  /** An agent's answer for a node, or for the map item `item` of one. */
  const completed = (
    type: string,
    nodeId: string,
    generation: number,
    output: unknown,
    item?: number,
  ) =>
    ({
      ...command(type, {}),
      aggregate: {
        type: "agent_run",
        id: agentRunKey(runId, nodeId, generation, item),
        version: 1,
      },
      payload: {
        run_id: runId,
        node_id: nodeId,
        generation,
        output,
        ...(item === undefined ? {} : { item }),
      },
    }) as Envelope;
  return { command, completed };
}

function setup(role: Role<OrchestratorState> = referenceOrchestrator()) {
  const { clock, store, deps } = makeDeps(T0);
  const runId = `run_${ulid()}`;
  const { command, completed } = runMessages(clock, runId);
  const send = (event: Envelope) => consume(event, role, deps);
  const stored = () => store.states.get(`dag_run#${runId}`);
  const state = () => stored()?.data as OrchestratorState;
  const due = () => store.dueIndex.get(`dag_run#${runId}`)?.dueAt;
  const start = (workflow = "long-form") =>
    send(command("workflow.start.requested", { workflow, request: { topic_hint: "tides" } }));
  const heartbeat = (nodeId: string, generation: number, leaseSeconds: number) =>
    send(
      command("node.heartbeat", {
        node_id: nodeId,
        generation,
        lease_seconds: leaseSeconds,
      }),
    );
  return {
    clock,
    store,
    runId,
    command,
    completed,
    send,
    stored,
    state,
    due,
    start,
    heartbeat,
  };
}

/** Topic selection's answer: one claim, so one map item of the fact check. */
const TOPIC = { topic: "t", angle: "a", sources: ["s"], claims: ["The tide turns twice a day."] };

describe("orchestrator leases", () => {
  it("a released node gets a queued lease (default 4 h): its request may wait in the agent's queue", async () => {
    const t = setup();
    await t.start();
    expect(DEFAULT_QUEUED_LEASE_SECONDS).toBe(4 * 3600);
    expect(t.state().leases).toEqual({
      "topic-selection": { generation: 0, expires_at: plus(T0, 4 * 3600) },
    });
    expect(t.due()).toBe(plus(T0, 4 * 3600));
    expect(t.state().origin?.correlation_id).toMatch(/^corr_/);
  });

  it("the agent's first heartbeat starts the lease: leaseSeconds (default 900 s, per role) from then", async () => {
    const t = setup(
      referenceOrchestrator({
        queuedLeaseSeconds: 3600,
        leaseSeconds: 60,
        leaseSecondsByRole: { writing: 600 },
      }),
    );
    await t.start("quick-news");
    expect(DEFAULT_LEASE_SECONDS).toBe(900);
    expect(t.state().leases?.["topic-selection"]?.expires_at).toBe(plus(T0, 3600));
    t.clock.advance(10_000);
    await t.send(t.completed("topic_selection.completed", "topic-selection", 0, TOPIC));
    const at = plus(T0, 10);
    expect(t.state().leases?.writing?.expires_at).toBe(plus(at, 3600));
    // The run's due time stays the topic's lease's, which has not passed: never later than any.
    expect(t.due()).toBe(plus(T0, 3600));
    // Half an hour in the queue, then the agents start: a lease from their start, not the release.
    t.clock.advance(1_800_000);
    await t.heartbeat("fact-check", 0, 30);
    await t.heartbeat("writing", 0, 30);
    const started = plus(at, 1800);
    expect(t.state().leases).toEqual({
      "fact-check": { generation: 0, expires_at: plus(started, 60), started: true },
      writing: { generation: 0, expires_at: plus(started, 600), started: true },
    });
    // The earliest lease of a RUNNING node.
    expect(t.due()).toBe(plus(started, 60));
  });

  it("a node that leaves RUNNING loses its lease; a run with nothing RUNNING or held is not due", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 60 }));
    // Quick news: each of its nodes is a role's (long form's fact check is a child run, unleased).
    await t.start("quick-news");
    const outputs: [string, string, unknown, number?][] = [
      ["topic_selection.completed", "topic-selection", TOPIC],
      [
        "fact_check.completed",
        "fact-check",
        { verdict: "pass", checked_claims: 1, notes: "ok" },
        0,
      ],
      ["writing.completed", "writing", { title: "T", body: "B" }],
      ["review.completed", "review", { approved: true, edits: 0, final_title: "T" }],
    ];
    for (const [type, node, output, item] of outputs) {
      t.clock.advance(1000);
      await t.send(t.completed(type, node, 0, output, item));
      expect(Object.keys(t.state().leases ?? {}), node).not.toContain(node);
    }
    expect(t.state().run.status).toBe("COMPLETED");
    expect(t.state().leases).toEqual({});
    expect(t.due()).toBeUndefined();
  });

  it("a run's due time moves earlier at once and later only once it has passed: then the sweeper nudges the run, which writes the true one", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 60 }));
    await t.start("quick-news");
    await t.heartbeat("topic-selection", 0, 30);
    expect(t.due()).toBe(plus(T0, 60));
    // The answer releases two nodes (queued leases, 4 h): the index keeps the earlier time.
    t.clock.advance(10_000);
    await t.send(t.completed("topic_selection.completed", "topic-selection", 0, TOPIC));
    expect(t.due()).toBe(plus(T0, 60));
    const started = plus(T0, 20);
    t.clock.advance(10_000);
    await t.heartbeat("writing", 0, 30);
    expect(t.state().leases?.writing?.expires_at).toBe(plus(started, 60));
    expect(t.due()).toBe(plus(T0, 60));
    // At T0 + 60 s no lease has run out: the sweeper nudges the run instead of reporting one.
    const at = new Date(plus(T0, 60));
    const swept = planSweep([t.stored() as StoredState<unknown>], at, registry);
    expect(swept.messages.map((m) => [m.envelope.event_type, m.envelope.payload])).toEqual([
      ["workflow.release.requested", { run_id: t.runId }],
    ]);
    t.clock.advance(40_000);
    const nudged = await t.send(t.command("workflow.release.requested", {}));
    expect(nudged.status).toBe("applied");
    // The true time: the writing node's lease, the earliest left.
    expect(t.due()).toBe(plus(started, 60));
    expect(planSweep([t.stored() as StoredState<unknown>], at, registry).messages).toEqual([]);
  });

  it("a state stored before leases is read as having none, and gains them on its next write", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 60 }));
    await t.start("quick-news");
    const key = `dag_run#${t.runId}`;
    const old = t.store.states.get(key);
    if (!old) throw new Error("no state");
    const { leases: _leases, origin: _origin, ...legacy } = old.data as OrchestratorState;
    t.store.states.set(key, { ...old, data: legacy });
    t.clock.advance(5000);
    await t.send(t.completed("topic_selection.completed", "topic-selection", 0, TOPIC));
    expect(Object.keys(t.state().leases ?? {}).sort()).toEqual(["fact-check", "writing"]);
  });
});

describe("node.heartbeat", () => {
  it("the first one starts the lease, even a shorter one; later ones extend it to now + lease_seconds; nothing is emitted", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 60 }));
    await t.start();
    t.clock.advance(50_000);
    const result = await t.heartbeat("topic-selection", 0, 300);
    expect(result.status).toBe("applied");
    expect(result.steps.at(-1)?.emitted).toEqual([]);
    const now = plus(T0, 50);
    expect(t.state().leases?.["topic-selection"]).toEqual({
      generation: 0,
      expires_at: plus(now, 300),
      started: true,
    });
    expect(t.due()).toBe(plus(now, 300));
    t.clock.advance(100_000);
    await t.heartbeat("topic-selection", 0, 300);
    expect(t.state().leases?.["topic-selection"]?.expires_at).toBe(plus(T0, 450));
  });

  it("never shortens a started lease: a shorter heartbeat changes nothing", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 600 }));
    await t.start();
    await t.heartbeat("topic-selection", 0, 10);
    expect(t.state().leases?.["topic-selection"]?.expires_at).toBe(plus(T0, 600));
    const before = t.stored();
    t.clock.advance(1000);
    await t.heartbeat("topic-selection", 0, 10);
    expect(t.stored()?.data).toBe(before?.data);
    expect(t.state().leases?.["topic-selection"]?.expires_at).toBe(plus(T0, 600));
  });

  it("a stale generation, a node not RUNNING or an unknown run is ignored", async () => {
    const t = setup(referenceOrchestrator({ leaseSeconds: 60 }));
    await t.start();
    const before = t.stored();
    await t.heartbeat("topic-selection", 1, 900);
    await t.heartbeat("review", 0, 900);
    // The run is the same object, and nothing recorded the two messages.
    expect(t.stored()?.data).toBe(before?.data);
    expect(t.stored()?.version).toBe(before?.version);
    expect(t.stored()?.revision).toBe(before?.revision);
    const other = setup();
    const result = await other.heartbeat("topic-selection", 0, 900);
    expect(result.status).toBe("applied");
    // No run: nothing is stored (the orchestrator keeps no record of a heartbeat).
    expect(other.stored()).toBeUndefined();
  });
});

describe("node.lease.expired and the lease", () => {
  const expired = (t: ReturnType<typeof setup>, at: string) =>
    t.send(
      t.command("node.lease.expired", {
        node_id: "topic-selection",
        generation: 0,
        expired_at: at,
      }),
    );

  it("a report of an expiry that a heartbeat has since pushed back is ignored", async () => {
    const t = setup(referenceOrchestrator({ queuedLeaseSeconds: 60 }));
    await t.start();
    t.clock.advance(61_000);
    await t.heartbeat("topic-selection", 0, 300);
    await expired(t, plus(T0, 60));
    expect(t.state().run.nodes["topic-selection"]?.state).toBe("RUNNING");
    expect(t.state().leases?.["topic-selection"]?.redeliveries).toBeUndefined();
  });

  it("a lease that ran out makes the outcome unknown: the same assignment is sent again, then the node fails", async () => {
    const t = setup(referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 2 }));
    const started = await t.start();
    const [request] = started.steps.at(-1)?.emitted ?? [];
    for (const n of [1, 2]) {
      t.clock.advance(61_000);
      const result = await expired(t, t.state().leases?.["topic-selection"]?.expires_at ?? "");
      const [again] = result.steps.at(-1)?.emitted ?? [];
      expect(again?.event_type).toBe("topic_selection.requested");
      expect(again?.payload).toEqual({ ...(request?.payload as object), redelivered: true }); // same generation, attempt and input
      expect(t.state().run.nodes["topic-selection"]?.state).toBe("RUNNING");
      expect(t.state().leases?.["topic-selection"]).toEqual({
        generation: 0,
        expires_at: plus(t.clock.now().toISOString(), 60),
        redeliveries: n,
      });
      expect(t.state().timeline.at(-1)).toMatchObject({ event: "node.redelivered" });
    }
    t.clock.advance(61_000);
    await expired(t, t.state().leases?.["topic-selection"]?.expires_at ?? "");
    expect(t.state().run.nodes["topic-selection"]).toMatchObject({
      state: "FAILED",
      error: { code: "agent_run.lease_expired", error_class: "transient" },
    });
    expect(t.state().run.nodes["topic-selection"]?.error?.message).toContain("sent 2 more time(s)");
    expect(t.state().leases).toEqual({});
    expect(t.due()).toBeUndefined();
  });

  it("with no redeliveries allowed, the first expiry fails the node", async () => {
    const t = setup(referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 0 }));
    await t.start();
    t.clock.advance(61_000);
    await expired(t, plus(T0, 60));
    expect(t.state().run.nodes["topic-selection"]?.state).toBe("FAILED");
  });
});

describe("release nudges", () => {
  it("nothing RUNNING but nodes held: due in 30 s, and each fruitless release re-arms it", async () => {
    let depth = 500;
    const t = setup(
      referenceOrchestrator({
        queueDepth: (groups) => Object.fromEntries(groups.map((g) => [g, depth])),
      }),
    );
    await t.start();
    expect(t.state().held.map((h) => h.node_id)).toEqual(["topic-selection"]);
    expect(t.state().leases).toEqual({});
    expect(t.due()).toBe(plus(T0, 30));

    t.clock.advance(31_000);
    const revision = t.stored()?.revision ?? 0;
    await t.send(t.command("workflow.release.requested", {}));
    expect(t.stored()?.revision).toBe(revision + 1);
    expect(t.due()).toBe(plus(T0, 61));

    depth = 0;
    t.clock.advance(31_000);
    const released = await t.send(t.command("workflow.release.requested", {}));
    expect(released.steps.at(-1)?.emitted.map((e) => e.event_type)).toEqual([
      "topic_selection.requested",
    ]);
    expect(t.state().held).toEqual([]);
    expect(t.due()).toBe(plus(plus(T0, 62), DEFAULT_QUEUED_LEASE_SECONDS));
  });

  it("a map whose items are all held, none RUNNING, is nudged as a run with nothing RUNNING is", async () => {
    // Long form's fact check, a child run: one map node over the request's claims.
    let depth = 99;
    const t = setup(
      referenceOrchestrator({
        queueDepth: (groups) => Object.fromEntries(groups.map((g) => [g, depth])),
      }),
    );
    const claims = ["The tide turns twice a day.", "The moon drives it."];
    const request = { topic_hint: "tides", claims, sources: ["s"] };
    const parent = `run_${ulid()}`;
    const start = t.command("workflow.child.start.requested", {
      parent_run_id: parent,
      parent_node_id: "fact-check",
      parent_generation: 0,
      workflow_name: "content.fact-check",
      request,
    });
    // On its parent's stream, as the parent's orchestrator sends it.
    await t.send({
      ...start,
      schema_version: registry.find(start.event_type)?.schemaVersion ?? 1,
      aggregate: { type: "dag_run", id: parent, version: 1 },
    });
    // One item under the queue-depth gate (threshold 100), the other held behind it.
    const items = () => t.state().run.nodes["fact-check"]?.items?.map((i) => i.state);
    expect(items()).toEqual(["RUNNING", "PENDING"]);
    expect(t.due()).toBe(plus(T0, DEFAULT_QUEUED_LEASE_SECONDS));

    // The item in flight answers while the queue is deep: nothing of the run is in flight any
    // more, and no answer is coming that would release the held item.
    depth = 500;
    t.clock.advance(1000);
    const answer = { verdict: "pass", checked_claims: 1, notes: "ok" };
    await t.send(t.completed("fact_check.completed", "fact-check", 0, answer, 0));
    expect(items()).toEqual(["COMPLETED", "PENDING"]);
    expect(t.state().held.map((h) => h.node_id)).toEqual(["fact-check"]);
    expect(t.due()).toBe(plus(T0, 31));
    const swept = planSweep([t.stored() as StoredState<unknown>], new Date(plus(T0, 31)), registry);
    expect(swept.messages.map((m) => m.envelope.event_type)).toEqual([
      "workflow.release.requested",
    ]);

    depth = 0;
    t.clock.advance(30_000);
    const released = await t.send(t.command("workflow.release.requested", {}));
    expect(released.steps.at(-1)?.emitted.map((e) => e.event_type)).toEqual([
      "fact_check.requested",
    ]);
    expect(items()).toEqual(["COMPLETED", "RUNNING"]);
  });
});

describe("content agents' heartbeat", () => {
  it("is a node.heartbeat for the request's run, node and generation, with the agent's lease, acknowledged first with node.started", () => {
    const agent = contentAgentRole({
      role: "writing",
      model: referenceLocalModel(),
      leaseSeconds: 240,
    });
    const t = setup();
    const request = {
      ...t.command("writing.requested", {}),
      payload: {
        run_id: t.runId,
        node_id: "writing",
        generation: 3,
        attempt: 1,
        input: {},
        run_input: { topic_hint: "tides" },
      },
    } as Envelope;
    // The run the processing is: the run id `decide` gives the same delivery.
    const runId = agentRunIdOf("writing", request, 2);
    expect(agent.heartbeat?.(request, 2)).toEqual({
      type: "node.heartbeat",
      payload: { run_id: t.runId, node_id: "writing", generation: 3, lease_seconds: 240 },
      aggregate: { type: "dag_run", id: t.runId },
      orderKey: t.runId,
      runId,
      // Each beat renews the 240 s lease: the consumer sends the next one after 120 s.
      leaseSeconds: 240,
      first: {
        type: "node.started",
        payload: {
          run_id: t.runId,
          node_id: "writing",
          generation: 3,
          attempt: 1,
          agent: "writing",
          lease_seconds: 240,
        },
        aggregate: { type: "dag_run", id: t.runId },
        orderKey: t.runId,
        runId,
      },
    });
    expect(agent.heartbeat?.(request, 3)?.runId).not.toBe(runId);
    expect(agent.heartbeat?.({ ...request, event_type: "review.requested" }, 1)).toBeUndefined();
    // Capped at what node.heartbeat accepts.
    const long = contentAgentRole({
      role: "writing",
      model: referenceLocalModel(),
      leaseSeconds: 10_000,
    });
    expect(long.heartbeat?.(request, 1)?.payload).toMatchObject({ lease_seconds: 3600 });
    expect(long.heartbeat?.(request, 1)?.leaseSeconds).toBe(3600);
  });
});
