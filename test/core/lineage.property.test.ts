import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { buildEmitted, type EmitCause } from "../../functions/core/emit";
import { traceIdOf } from "../../functions/core/trace-context";
import type { Envelope } from "../../schemas";
import { LIFECYCLE, makeDeps, newCorrelationId, newTaskId } from "./fixtures";

/**
 * Any chain of emits keeps its lineage: whatever the producers, attempts, streams and how many
 * events each step emits, every event of the chain has the first event's trace id, correlation,
 * tenant, user and parent run, and each names its direct cause. The negative control, a builder
 * that forgets the cause's user (as one did before it was carried), breaks the property.
 */

const stepArb = fc.record({
  producer: fc.constantFrom("planner", "audit", "reply-generation", "orchestrator"),
  attempt: fc.integer({ min: 1, max: 5 }),
  count: fc.integer({ min: 1, max: 3 }),
  // Which of the step's events causes the next step.
  pick: fc.nat(),
  stream: fc.constantFrom("task", "plan_view", "delivery"),
});

const chainArb = fc.record({
  tenant: fc.option(fc.constantFrom("acme", "globex"), { nil: undefined }),
  user: fc.option(fc.constantFrom("user_alice", "user_bob"), { nil: undefined }),
  parentRun: fc.option(fc.constantFrom("run_parent", "run_other"), { nil: undefined }),
  caller: fc.option(
    fc
      .tuple(fc.stringMatching(/^[0-9a-f]{32}$/), fc.stringMatching(/^[0-9a-f]{16}$/))
      .filter(([t, s]) => !/^0+$/.test(t) && !/^0+$/.test(s))
      .map(([t, s]) => `00-${t}-${s}-01`),
    { nil: undefined },
  ),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 8 }),
});

type Chain = typeof chainArb extends fc.Arbitrary<infer C> ? C : never;
type Builder = (cause: EmitCause, step: Chain["steps"][number], taskId: string) => Envelope[];

function playChain(chain: Chain, build: Builder): Envelope[] {
  const taskId = newTaskId();
  const first: Envelope = {
    event_id: "01KB0Q3V9X7T2M4N6P8R0S1W3Y",
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: "2026-09-01T10:00:00.000Z",
    correlation_id: newCorrelationId(),
    causation_id: null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    order_key: taskId,
    producer: "web-client",
    attempt: 1,
    payload: { rating: 5 },
    ...(chain.tenant === undefined ? {} : { tenant_id: chain.tenant }),
    ...(chain.user === undefined ? {} : { user_id: chain.user }),
    ...(chain.parentRun === undefined ? {} : { parent_run_id: chain.parentRun }),
    ...(chain.caller === undefined ? {} : { traceparent: chain.caller }),
  };
  const all = [first];
  let cause = first;
  for (const step of chain.steps) {
    const emitted = build(cause, step, taskId);
    all.push(...emitted);
    cause = emitted[step.pick % emitted.length] as Envelope;
  }
  return all;
}

const carrying: Builder = (cause, step, taskId) => {
  const { deps, clock } = makeDeps();
  const specs = LIFECYCLE.slice(0, step.count);
  return buildEmitted(
    specs,
    cause,
    { type: step.stream, id: taskId },
    0,
    { producer: step.producer, now: clock.now(), attempt: step.attempt },
    deps,
  );
};

/** The control: what the cause's user was, forgotten. */
const forgetful: Builder = (cause, step, taskId) => {
  const { user_id: _forgotten, ...rest } = cause;
  return carrying(rest, step, taskId);
};

function lineageHolds(all: readonly Envelope[]): boolean {
  const [first] = all;
  if (!first) return false;
  const trace = traceIdOf(first);
  const byId = new Set(all.map((e) => e.event_id));
  return all.every(
    (e) =>
      traceIdOf(e) === trace &&
      e.correlation_id === first.correlation_id &&
      e.task_id === first.task_id &&
      e.tenant_id === first.tenant_id &&
      e.user_id === first.user_id &&
      e.parent_run_id === first.parent_run_id &&
      (e === first || (e.causation_id !== null && byId.has(e.causation_id))),
  );
}

describe("lineage along any chain of emits", () => {
  it("keeps the trace id, correlation, tenant, user and parent run", () => {
    fc.assert(
      fc.property(chainArb, (chain) => {
        const all = playChain(chain, carrying);
        expect(lineageHolds(all)).toBe(true);
        // Every event beyond the first carries a trace context of its own step.
        expect(all.slice(1).every((e) => e.traceparent !== undefined)).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it("fails for a builder that forgets the user (the negative control)", () => {
    const withUser = chainArb.filter((c) => c.user !== undefined);
    const broken = fc.check(
      fc.property(withUser, (chain) => lineageHolds(playChain(chain, forgetful))),
      { numRuns: 50 },
    );
    expect(broken.failed).toBe(true);
  });
});
