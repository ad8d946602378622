import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { StoredState } from "../../functions/core/ports";
import {
  deadlinesNear,
  deterministicUlid,
  planSweep,
  SWEEPER_PRODUCER,
  type SweptRunState,
} from "../../functions/core/sweeper";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../schemas";
import { ULID_PATTERN } from "../../schemas/ids";
import { referenceOrchestrator } from "../support/reference";
import { makeDeps } from "./fixtures";

/** The lease sweeper's plan: which reports and nudges it sends for the due runs, and their ids. */

const NOW = new Date("2026-09-01T10:10:00.000Z");
const EARLIER = "2026-09-01T10:05:00.000Z";
const LATER = "2026-09-01T10:15:00.000Z";

function runState(
  overrides: Partial<SweptRunState> & {
    nodes?: Record<string, { state: string; assigned_generation?: number }>;
    status?: string;
  } = {},
  revision = 3,
): StoredState<SweptRunState> {
  const runId = "run_sweep1";
  return {
    aggregate: { type: "dag_run", id: runId },
    revision,
    version: 2,
    data: {
      run: {
        run_id: runId,
        status: overrides.status ?? "RUNNING",
        nodes: overrides.nodes ?? {
          a: { state: "RUNNING", assigned_generation: 1 },
          b: { state: "RUNNING", assigned_generation: 1 },
          c: { state: "READY" },
        },
      },
      held: overrides.held ?? [],
      leases: overrides.leases ?? {
        a: { generation: 1, expires_at: EARLIER },
        b: { generation: 1, expires_at: LATER },
      },
      origin: overrides.origin ?? { correlation_id: "corr_sweep1", task_id: "task_sweep1" },
    },
  };
}

const types = (plan: ReturnType<typeof planSweep>) =>
  plan.messages.map((m) => `${m.topic} ${m.envelope.event_type}`);

describe("planSweep", () => {
  it("reports each RUNNING node whose lease has run out, on the events topic", () => {
    const plan = planSweep([runState()], NOW, registry);
    expect(types(plan)).toEqual(["events node.lease.expired"]);
    const [message] = plan.messages;
    expect(message?.envelope).toMatchObject({
      event_type: "node.lease.expired",
      producer: SWEEPER_PRODUCER,
      correlation_id: "corr_sweep1",
      task_id: "task_sweep1",
      causation_id: null,
      aggregate: { type: "dag_run", id: "run_sweep1", version: 0 },
      order_key: "run_sweep1",
      payload: { run_id: "run_sweep1", node_id: "a", generation: 1, expired_at: EARLIER },
    });
    expect(message?.envelope.event_id).toMatch(ULID_PATTERN);
  });

  it("the same lease gives the same event id on every sweep; another expiry another id", () => {
    const first = planSweep([runState()], NOW, registry).messages[0]?.envelope.event_id;
    const again = planSweep([runState()], new Date(NOW.getTime() + 60_000), registry).messages[0]
      ?.envelope.event_id;
    expect(again).toBe(first);
    const extended = planSweep(
      [
        runState({
          leases: {
            a: { generation: 1, expires_at: "2026-09-01T10:06:00.000Z" },
            b: { generation: 1, expires_at: LATER },
          },
        }),
      ],
      NOW,
      registry,
    ).messages[0]?.envelope.event_id;
    expect(extended).not.toBe(first);
  });

  it("leaves alone leases not yet expired, stale leases, nodes not RUNNING and ended runs", () => {
    const alive = runState({
      leases: {
        a: { generation: 0, expires_at: EARLIER }, // an older assignment
        b: { generation: 1, expires_at: LATER },
      },
    });
    expect(planSweep([alive], NOW, registry).messages).toEqual([]);
    const done = runState({ status: "COMPLETED" });
    expect(planSweep([done], NOW, registry)).toEqual({ messages: [], skipped: 1 });
    const other: StoredState = {
      aggregate: { type: "task", id: "task_x" },
      revision: 1,
      version: 1,
      data: { status: "x" },
    };
    expect(planSweep([other], NOW, registry)).toEqual({ messages: [], skipped: 1 });
  });

  it("nudges a run with nothing RUNNING and nodes held, on the commands topic, one id per revision", () => {
    const held = (revision: number) =>
      runState(
        {
          nodes: { a: { state: "READY" }, b: { state: "COMPLETED" } },
          leases: {},
          held: [{ node_id: "a", role: "writer", reason: "queue_depth" }],
        },
        revision,
      );
    const plan = planSweep([held(4)], NOW, registry);
    expect(types(plan)).toEqual(["commands workflow.release.requested"]);
    expect(plan.messages[0]?.envelope.payload).toEqual({ run_id: "run_sweep1" });
    const same = planSweep([held(4)], new Date(NOW.getTime() + 5000), registry);
    expect(same.messages[0]?.envelope.event_id).toBe(plan.messages[0]?.envelope.event_id);
    const next = planSweep([held(5)], NOW, registry);
    expect(next.messages[0]?.envelope.event_id).not.toBe(plan.messages[0]?.envelope.event_id);
    // Something still RUNNING: no nudge (its outcome triggers the next release pass).
    const busy = runState({ held: [{ node_id: "c", role: "writer", reason: "role_cap" }] });
    expect(types(planSweep([busy], NOW, registry))).toEqual(["events node.lease.expired"]);
  });

  it("without the start's origin, correlation and task ids are derived from the run id", () => {
    const state = runState();
    const { origin: _origin, ...legacy } = state.data;
    const plan = planSweep([{ ...state, data: legacy }], NOW, registry);
    expect(plan.messages[0]?.envelope).toMatchObject({
      correlation_id: "corr_sweep1",
      task_id: "task_sweep1",
    });
  });
});

describe("deterministicUlid", () => {
  it("is a ULID whose time part is the given time, and a function of its key", () => {
    const id = deterministicUlid("k1", Date.parse(EARLIER));
    expect(id).toMatch(ULID_PATTERN);
    expect(id).toBe(deterministicUlid("k1", Date.parse(EARLIER)));
    expect(id).not.toBe(deterministicUlid("k2", Date.parse(EARLIER)));
    expect(id.slice(0, 10)).toBe(ulid(Date.parse(EARLIER)).slice(0, 10));
  });
});

describe("sweeping with the orchestrator and the in-memory store", () => {
  it("a hung node is found through the due index, failed once, and a repeated report is a duplicate", async () => {
    const { clock, store, deps } = makeDeps("2026-09-01T10:00:00.000Z");
    const role = referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 0 });
    const runId = `run_${ulid()}`;
    const start = {
      event_id: ulid(),
      event_type: "workflow.start.requested",
      schema_version: 1,
      occurred_at: clock.now().toISOString(),
      correlation_id: `corr_${ulid()}`,
      causation_id: null,
      task_id: `task_${ulid()}`,
      aggregate: { type: "dag_run", id: runId, version: 0 },
      order_key: runId,
      producer: "test",
      attempt: 1,
      payload: { run_id: runId, workflow: "long-form", request: { topic_hint: "tides" } },
    } as Envelope;
    await consume(start, role, deps);

    clock.advance(59_000);
    expect(await store.due(clock.now(), 10)).toEqual([]);
    clock.advance(1000);
    const due = await store.due(clock.now(), 10);
    expect(due).toEqual([{ type: "dag_run", id: runId }]);
    const plan = planSweep(await store.loadStates(due), clock.now(), registry);
    expect(plan.messages.map((m) => m.envelope.correlation_id)).toEqual([start.correlation_id]);
    const report = plan.messages[0]?.envelope as Envelope;
    const first = await consume(report, role, deps);
    expect(first.status).toBe("applied");
    const state = store.states.get(`dag_run#${runId}`)?.data as OrchestratorState;
    expect(state.run.status).toBe("FAILED");
    expect(state.run.nodes["topic-selection"]?.error?.code).toBe("agent_run.lease_expired");
    expect(await store.due(clock.now(), 10)).toEqual([]);
    // The next sweep (before the index caught up) sends the same id: the inbox drops it.
    const again = await consume(structuredClone(report), role, deps);
    expect(again.status).toBe("duplicate");
  });
});

describe("deadlinesNear", () => {
  const WINDOW = 10 * 60_000;
  const at = (minutes: number) => new Date(NOW.getTime() + minutes * 60_000).toISOString();
  const agentRun = (status: string, deadline?: string): StoredState => ({
    aggregate: { type: "agent_run", id: `ar_${status}_${deadline}` },
    revision: 1,
    version: 1,
    data: {
      run_id: "ar_1",
      task_id: "task_1",
      status,
      decision_type: "refund.agent.decision.requested",
      correlation_id: "corr_1",
      ...(deadline ? { waiting: { tool_call_id: "call_1", deadline } } : {}),
    },
  });
  const confirming = (confirmBy: string, extra: { outcome?: string; generation?: number } = {}) =>
    runState({
      nodes: { review: { state: "RUNNING", assigned_generation: 2 } },
      leases: {
        review: {
          generation: extra.generation ?? 2,
          expires_at: at(30),
          blocked: { confirm_by: confirmBy, ...(extra.outcome ? { outcome: extra.outcome } : {}) },
        },
      },
    });

  it("counts agent runs BLOCKED on an approval whose deadline is within the window, not past it", () => {
    const states = [
      agentRun("BLOCKED", at(5)),
      agentRun("BLOCKED", at(10)),
      agentRun("BLOCKED", at(11)),
      agentRun("BLOCKED", at(-1)),
      agentRun("NEEDS_HUMAN", at(5)),
      agentRun("BLOCKED"),
    ];
    expect(deadlinesNear(states, NOW, WINDOW)).toBe(2);
  });

  it("counts BLOCKED nodes of RUNNING runs whose confirmation is due within the window", () => {
    expect(deadlinesNear([confirming(at(3))], NOW, WINDOW)).toBe(1);
    expect(deadlinesNear([confirming(at(3), { outcome: "confirmed" })], NOW, WINDOW)).toBe(0);
    expect(deadlinesNear([confirming(at(3), { generation: 1 })], NOW, WINDOW)).toBe(0);
    expect(deadlinesNear([confirming(at(30))], NOW, WINDOW)).toBe(0);
    const ended = confirming(at(3));
    const cancelled = {
      ...ended,
      data: { ...ended.data, run: { ...ended.data.run, status: "CANCELLED" } },
    };
    expect(deadlinesNear([cancelled], NOW, WINDOW)).toBe(0);
  });
});
