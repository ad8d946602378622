import { describe, expect, it } from "vitest";
import { buildHeartbeat } from "../../functions/core/emit";
import { TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import { appendToStream } from "../../functions/core/producer";
import type { Role } from "../../functions/core/role";
import { planSweep, sweepAttempt } from "../../functions/core/sweeper";
import { registry } from "../../schemas";
import { makeDeps, newCorrelationId, newTaskId, seedTask } from "./fixtures";

/**
 * `attempt` (seed 000 §4.1) is the processing attempt that produced a message: a consumer stamps
 * what it emits with the receive count of the message it was processing, a first send is 1.
 */

/** A role that answers every task.accepted with a plan on its own stream. */
function planner(failUntil = 0): Role<{ n: number }> {
  let calls = 0;
  return {
    group: "planner",
    subscriptions: ["task.accepted", "plan.created"],
    stateOf: (event) => ({ type: "plan_view", id: event.aggregate.id }),
    decide: (state) => {
      calls++;
      if (calls <= failUntil) throw new TransientError("test.flaky", "try again");
      return {
        state: { n: (state?.n ?? 0) + 1 },
        emit: [{ type: "answer.generated", payload: { answer_ref: `ans_${calls}` } }],
      };
    },
  };
}

describe("attempt on what a consumer emits", () => {
  it("is the receive count of the redelivered message the events were decided on", async () => {
    const { deps } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const role = planner(2);
    // Deliveries 1 and 2 fail (nothing committed); the third commits.
    for (const receiveCount of [1, 2])
      await expect(consume(accepted, role, deps, { receiveCount })).rejects.toThrow(/try again/);
    const result = await consume(accepted, role, deps, { receiveCount: 3 });
    const emitted = result.steps.flatMap((s) => s.emitted);
    expect(emitted.map((e) => [e.event_type, e.attempt])).toEqual([["answer.generated", 3]]);
    // And as stored: the event store holds what the relay will publish.
    const stored = await deps.store.readStream(
      { type: "plan_view", id: accepted?.aggregate.id ?? "" },
      1,
      9,
    );
    expect(stored.map((e) => e.attempt)).toEqual([3]);
  });

  it("is 1 for an event read from the store to fill a gap, and the delivery's count for the delivered one", async () => {
    const { deps } = makeDeps();
    const [, planned] = await seedTask(deps, 2);
    const result = await consume(planned, planner(), deps, { receiveCount: 4 });
    expect(result.steps.map((s) => [s.repaired, s.emitted.map((e) => e.attempt)])).toEqual([
      [true, [1]],
      [false, [4]],
    ]);
  });

  it("is 1 when the caller gives no receive count (a first delivery)", async () => {
    const { deps } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const result = await consume(accepted, planner(), deps);
    expect(result.steps[0]?.emitted[0]?.attempt).toBe(1);
  });
});

describe("attempt on what a producer writes", () => {
  it("is 1 on a first write, and what the producer says when it tries again", async () => {
    const { deps } = makeDeps();
    const taskId = newTaskId();
    const write = (attempt?: number) =>
      appendToStream(deps, {
        aggregate: { type: "task", id: taskId },
        producer: "task-api",
        correlationId: newCorrelationId(),
        taskId,
        ...(attempt === undefined ? {} : { attempt }),
        decide: () => ({ emit: [{ type: "task.accepted", payload: { title: "t" } }] }),
      });
    expect((await write())[0]?.attempt).toBe(1);
    expect((await write(2))[0]?.attempt).toBe(2);
  });
});

describe("attempt on a heartbeat", () => {
  it("is the attempt of the processing it reports on", async () => {
    const { deps } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    if (!accepted) throw new Error("no event");
    const beat = buildHeartbeat(
      {
        type: "node.heartbeat",
        payload: { run_id: "run_abc", node_id: "n", generation: 0, lease_seconds: 60 },
        aggregate: { type: "dag_run", id: "run_abc" },
        runId: "agrun_abcdefghijklmnop",
      },
      accepted,
      "writing",
      deps,
      5,
    );
    expect([beat.attempt, beat.run_id, beat.causation_id]).toEqual([
      5,
      "agrun_abcdefghijklmnop",
      accepted.event_id,
    ]);
  });
});

describe("attempt on the sweeper's reports", () => {
  const lease = (expiresAt: string) => ({
    aggregate: { type: "dag_run", id: "run_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C" },
    revision: 3,
    version: 3,
    data: {
      run: {
        run_id: "run_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
        status: "RUNNING",
        nodes: { writing: { state: "RUNNING", assigned_generation: 0 } },
      },
      held: [],
      leases: { writing: { generation: 0, expires_at: expiresAt } },
      origin: { correlation_id: "corr_abc", task_id: "task_abc" },
    },
  });

  it("counts the sweeps since the report fell due, with the same event id each time", () => {
    const due = "2026-09-01T10:00:00.000Z";
    const at = (iso: string, rate?: number) =>
      planSweep([lease(due)], new Date(iso), registry, rate).messages.map((m) => m.envelope);
    const [first] = at("2026-09-01T10:00:20.000Z");
    const [second] = at("2026-09-01T10:01:20.000Z");
    const [fifth] = at("2026-09-01T10:04:00.000Z");
    expect([first?.attempt, second?.attempt, fifth?.attempt]).toEqual([1, 2, 5]);
    expect(new Set([first, second, fifth].map((e) => e?.event_id)).size).toBe(1);
    // Counted in the schedule's own period.
    expect(at("2026-09-01T10:04:00.000Z", 300)[0]?.attempt).toBe(1);
  });

  it("is 1 at or before the due time, and with no period to count in", () => {
    const due = Date.parse("2026-09-01T10:00:00.000Z");
    expect(sweepAttempt(due, new Date(due), 60)).toBe(1);
    expect(sweepAttempt(due, new Date(due - 5000), 60)).toBe(1);
    expect(sweepAttempt(Number.NaN, new Date(due), 60)).toBe(1);
    expect(sweepAttempt(due, new Date(due + 120_000), 0)).toBe(1);
  });
});
