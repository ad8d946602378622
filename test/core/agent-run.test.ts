import fc from "fast-check";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import {
  type AgentRun,
  classifyFailure,
  DEFAULT_CONFIRM_SECONDS,
  fail,
  HISTORY_LIMIT,
  IllegalTransitionError,
  isHung,
  legalTriggers,
  newRun,
  parseRun,
  type RunState,
  type RunTrigger,
  reachableStates,
  STATES,
  sweepBlocked,
  sweepHung,
  TERMINAL_STATES,
  TRANSITIONS,
  TRIGGERS,
  transition,
} from "../../functions/core/agent-run";
import {
  BusinessRejection,
  PermanentError,
  TransientError,
  UnknownOutcomeError,
} from "../../functions/core/errors";
import { ManualClock } from "../../functions/core/runtime";

/**
 * The legal transitions, written out independently of TRANSITIONS so the table is checked against
 * the specification (seed 001 §2.2-2.3 plus the decisions documented in agent-run.ts), not
 * against itself.
 */
const EXPECTED_LEGAL: readonly (readonly [RunState, RunTrigger, RunState])[] = [
  // seed 001 §2.2
  ["IDLE", "TaskAssigned", "READY"],
  ["READY", "DependenciesSatisfied", "RUNNING"],
  ["READY", "DependencyTimeout", "FAILED"],
  ["RUNNING", "TaskCompleted", "COMPLETED"],
  ["RUNNING", "TaskFailed", "FAILED"],
  ["RUNNING", "TaskBlocked", "BLOCKED"],
  ["BLOCKED", "ExternalUnblocked", "RUNNING"],
  ["BLOCKED", "ExternalConfirmTimeout", "FAILED"],
  ["FAILED", "ManualReset", "IDLE"],
  ["COMPLETED", "TaskArchived", "IDLE"],
  // seed 001 §2.3 and DESIGN: hung exit, heartbeat, bounded retries, NEEDS_HUMAN
  ["RUNNING", "TaskHung", "FAILED"],
  ["RUNNING", "Heartbeat", "RUNNING"],
  ["RUNNING", "RetryScheduled", "READY"],
  ["RUNNING", "NeedsHuman", "NEEDS_HUMAN"],
  ["NEEDS_HUMAN", "HumanResolved", "COMPLETED"],
  ["NEEDS_HUMAN", "HumanRetry", "READY"],
  // DAG executor: cancellation of work not finished, degradation instead of failing
  ["IDLE", "TaskCancelled", "CANCELLED"],
  ["READY", "TaskCancelled", "CANCELLED"],
  ["RUNNING", "TaskCancelled", "CANCELLED"],
  ["BLOCKED", "TaskCancelled", "CANCELLED"],
  ["NEEDS_HUMAN", "TaskCancelled", "CANCELLED"],
  ["READY", "TaskDegraded", "DEGRADED"],
  ["RUNNING", "TaskDegraded", "DEGRADED"],
  ["BLOCKED", "TaskDegraded", "DEGRADED"],
  ["NEEDS_HUMAN", "TaskDegraded", "DEGRADED"],
  ["CANCELLED", "TaskArchived", "IDLE"],
  ["DEGRADED", "TaskArchived", "IDLE"],
];

function expectedTarget(state: RunState, trigger: RunTrigger): RunState | undefined {
  return EXPECTED_LEGAL.find(([from, on]) => from === state && on === trigger)?.[2];
}

const START = "2026-09-01T10:00:00.000Z";
const LEASE = 60;

function freshRun(clock: ManualClock, maxAttempts = 3): AgentRun {
  return newRun({
    agent_run_key: `arun_${ulid()}`,
    run_id: `agrun_${ulid()}`,
    task_id: `task_${ulid()}`,
    role: "writer",
    node_id: "writing",
    max_attempts: maxAttempts,
    lease_seconds: LEASE,
    now: clock.now(),
  });
}

/** A run in `state`, reached through legal transitions only; attempts are left (1 of 3). */
function runIn(state: RunState, clock: ManualClock): AgentRun {
  const now = clock.now();
  const idle = freshRun(clock);
  const ready = transition(idle, "TaskAssigned", { now });
  const running = transition(ready, "DependenciesSatisfied", { now });
  switch (state) {
    case "IDLE":
      return idle;
    case "READY":
      return ready;
    case "RUNNING":
      return running;
    case "BLOCKED":
      return transition(running, "TaskBlocked", { now, error: unknownOutcome() });
    case "COMPLETED":
      return transition(running, "TaskCompleted", { now, output: { draft: "..." } });
    case "FAILED":
      return transition(running, "TaskFailed", { now, error: permanent() });
    case "NEEDS_HUMAN":
      return transition(running, "NeedsHuman", { now, error: invalidOutput() });
    case "CANCELLED":
      return transition(ready, "TaskCancelled", { now, reason: "upstream failed" });
    case "DEGRADED":
      return transition(running, "TaskDegraded", { now, error: permanent() });
  }
}

const transient = () => new TransientError("model.throttled", "429 from the model endpoint");
const permanent = () => new PermanentError("input.invalid", "the brief has no title");
const business = () =>
  new BusinessRejection("policy.refused", "topic is off-limits", {
    type: "task.refused",
    payload: {},
  });
const unknownOutcome = () =>
  new UnknownOutcomeError("side_effect.unknown", "publish timed out after sending");
const invalidOutput = () =>
  new PermanentError("model.invalid_output.schema", "draft missing the title field");

function expectIllegal(
  run: AgentRun,
  trigger: RunTrigger,
  now: Date,
  guard?: IllegalTransitionError["guard"],
): IllegalTransitionError {
  const before = structuredClone(run);
  let thrown: unknown;
  try {
    transition(run, trigger, { now, error: permanent(), output: { x: 1 } });
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(IllegalTransitionError);
  const error = thrown as IllegalTransitionError;
  expect(error.from).toBe(run.state);
  expect(error.trigger).toBe(trigger);
  expect(error.guard).toBe(guard);
  expect(error.code).toBe("agent_run.illegal_transition");
  expect(error.errorClass).toBe("permanent");
  expect(run).toStrictEqual(before);
  return error;
}

describe("transition table", () => {
  it("matches the spelled-out list of legal transitions exactly", () => {
    for (const state of STATES) {
      expect(Object.keys(TRANSITIONS[state]).every((t) => TRIGGERS.includes(t as RunTrigger))).toBe(
        true,
      );
      for (const trigger of TRIGGERS) {
        expect(TRANSITIONS[state][trigger], `${state} --${trigger}-->`).toBe(
          expectedTarget(state, trigger),
        );
      }
    }
    const tableSize = STATES.reduce((n, s) => n + Object.keys(TRANSITIONS[s]).length, 0);
    expect(tableSize).toBe(EXPECTED_LEGAL.length);
  });

  it("reaches every state from IDLE, and the terminal states only leave through archive/reset", () => {
    expect([...reachableStates("IDLE")].sort()).toEqual([...STATES].sort());
    for (const state of TERMINAL_STATES) {
      expect(legalTriggers(state)).toEqual([state === "FAILED" ? "ManualReset" : "TaskArchived"]);
      expect(Object.values(TRANSITIONS[state])).toEqual(["IDLE"]);
    }
  });

  const pairs = STATES.flatMap((state) => TRIGGERS.map((trigger) => [state, trigger] as const));

  it.each(pairs)("%s --%s-->", (state, trigger) => {
    const clock = new ManualClock(START);
    const run = runIn(state, clock);
    expect(run.state).toBe(state);
    // Past the lease, so the TaskHung guard holds; attempt 1 of 3, so RetryScheduled's does.
    clock.advance((LEASE + 1) * 1000);
    const now = clock.now();
    const target = expectedTarget(state, trigger);
    if (target === undefined) {
      expectIllegal(run, trigger, now);
      return;
    }
    const before = structuredClone(run);
    const next = transition(run, trigger, { now, output: { ok: true } });
    expect(run).toStrictEqual(before);
    expect(next).not.toBe(run);
    expect(next.state).toBe(target);
    expect(() => parseRun(JSON.parse(JSON.stringify(next)))).not.toThrow();
    if (trigger === "Heartbeat") {
      expect(next.history).toEqual(run.history);
    } else {
      expect(next.history.at(-1)).toMatchObject({ from: state, to: target, trigger });
      expect(next.history.at(-1)?.at).toBe(now.toISOString());
      expect(next.transition_count).toBe(run.transition_count + 1);
    }
    expect(next.lease_expires_at !== undefined).toBe(target === "RUNNING");
    expect(next.confirm_by !== undefined).toBe(target === "BLOCKED");
  });
});

describe("RUNNING has three exits", () => {
  it("completed: keeps the output, drops the lease", () => {
    const clock = new ManualClock(START);
    const run = runIn("RUNNING", clock);
    expect(run.lease_expires_at).toBe("2026-09-01T10:01:00.000Z");
    const done = transition(run, "TaskCompleted", { now: clock.now(), output: { draft: "text" } });
    expect(done).toMatchObject({ state: "COMPLETED", output: { draft: "text" } });
    expect(done.lease_expires_at).toBeUndefined();
    expect(done.error).toBeUndefined();
  });

  it("failed: records the error and reason, drops the lease", () => {
    const clock = new ManualClock(START);
    const failed = fail(runIn("RUNNING", clock), permanent(), { now: clock.now() });
    expect(failed.state).toBe("FAILED");
    expect(failed.error).toEqual({
      code: "input.invalid",
      errorClass: "permanent",
      message: "the brief has no title",
    });
    expect(failed.history.at(-1)).toMatchObject({ trigger: "TaskFailed", reason: "input.invalid" });
    expect(failed.lease_expires_at).toBeUndefined();
  });

  it("hung: a silent run is hung once its lease expires, and the sweeper reports it", () => {
    const clock = new ManualClock(START);
    const run = runIn("RUNNING", clock);
    clock.advance((LEASE - 1) * 1000);
    expect(isHung(run, clock.now())).toBe(false);
    expect(sweepHung([run], clock.now())).toEqual([]);
    expectIllegal(run, "TaskHung", clock.now(), "lease_not_expired");

    clock.advance(1000); // exactly at lease_expires_at: no longer held
    expect(isHung(run, clock.now())).toBe(true);
    expect(sweepHung([run], clock.now())).toEqual([run]);
    const hung = transition(run, "TaskHung", { now: clock.now() });
    expect(hung.state).toBe("FAILED");
    expect(hung.error).toMatchObject({ code: "agent_run.lease_expired", errorClass: "transient" });
    expect(hung.history.at(-1)).toMatchObject({
      trigger: "TaskHung",
      reason: "agent_run.lease_expired",
    });
    expect(isHung(hung, clock.now())).toBe(false);
    // The lost worker's late report is fenced out.
    expectIllegal(hung, "TaskCompleted", clock.now());
    expectIllegal(hung, "Heartbeat", clock.now());
  });

  it("heartbeat: extends the lease, so a heartbeating run is never hung", () => {
    const clock = new ManualClock(START);
    let beating = runIn("RUNNING", clock);
    const silent = runIn("RUNNING", clock);
    const done = transition(runIn("RUNNING", clock), "TaskCompleted", { now: clock.now() });
    const historyBefore = beating.history;
    for (let i = 0; i < 20; i++) {
      clock.advance(30_000);
      beating = transition(beating, "Heartbeat", { now: clock.now() });
      expect(beating.last_heartbeat_at).toBe(clock.now().toISOString());
      expect(Date.parse(beating.lease_expires_at ?? "")).toBe(clock.now().getTime() + LEASE * 1000);
      expect(isHung(beating, clock.now())).toBe(false);
      const silentHung = (i + 1) * 30 >= LEASE;
      expect(sweepHung([beating, silent, done], clock.now())).toEqual(silentHung ? [silent] : []);
    }
    expect(beating.state).toBe("RUNNING");
    expect(beating.history).toEqual(historyBefore);
    // A shorter lease on a heartbeat never shortens the one held.
    const held = beating.lease_expires_at;
    const short = transition(beating, "Heartbeat", { now: clock.now(), leaseSeconds: 5 });
    expect(short.lease_expires_at).toBe(held);
    // It stops beating: hung one lease later.
    clock.advance(LEASE * 1000);
    expect(sweepHung([beating], clock.now())).toEqual([beating]);
  });

  it("every way out of RUNNING clears the lease", () => {
    const clock = new ManualClock(START);
    for (const trigger of legalTriggers("RUNNING")) {
      if (trigger === "Heartbeat") continue;
      const run = runIn("RUNNING", clock);
      const later = new Date(clock.now().getTime() + (LEASE + 1) * 1000);
      const next = transition(run, trigger, { now: later });
      expect(next.state).not.toBe("RUNNING");
      expect(next.lease_expires_at, trigger).toBeUndefined();
    }
  });
});

describe("failure classification", () => {
  /** Runs the task, failing each attempt with `error`, until it stops going back to READY. */
  function failRepeatedly(error: () => unknown, maxAttempts = 3) {
    const clock = new ManualClock(START);
    let run = transition(freshRun(clock, maxAttempts), "TaskAssigned", { now: clock.now() });
    const triggers: RunTrigger[] = [];
    for (;;) {
      run = transition(run, "DependenciesSatisfied", { now: clock.now() });
      const trigger = classifyFailure(error(), run);
      triggers.push(trigger);
      run = fail(run, error(), { now: clock.now() });
      if (run.state !== "READY") return { run, triggers, clock };
      clock.advance(1000);
    }
  }

  it("transient: back to READY with attempt + 1 while attempts are left, then FAILED", () => {
    const { run, triggers } = failRepeatedly(transient);
    expect(triggers).toEqual(["RetryScheduled", "RetryScheduled", "TaskFailed"]);
    expect(run.state).toBe("FAILED");
    expect(run.attempt).toBe(3);
    expect(run.error?.errorClass).toBe("transient");
    const path = run.history.map((h) => `${h.from}>${h.to}`);
    expect(path).toEqual([
      "IDLE>READY",
      "READY>RUNNING",
      "RUNNING>READY",
      "READY>RUNNING",
      "RUNNING>READY",
      "READY>RUNNING",
      "RUNNING>FAILED",
    ]);
    expect(path).not.toContain("FAILED>READY");
  });

  it("a retry never skips FAILED once the budget is spent", () => {
    const clock = new ManualClock(START);
    let run = transition(freshRun(clock, 1), "TaskAssigned", { now: clock.now() });
    run = transition(run, "DependenciesSatisfied", { now: clock.now() });
    expect(classifyFailure(transient(), run)).toBe("TaskFailed");
    expectIllegal(run, "RetryScheduled", clock.now(), "retry_budget_exhausted");
  });

  it("anything that is not an AgentBusError is treated as transient", () => {
    const { triggers } = failRepeatedly(() => new Error("socket hang up"), 2);
    expect(triggers).toEqual(["RetryScheduled", "TaskFailed"]);
  });

  it("permanent: FAILED at once", () => {
    const { run, triggers } = failRepeatedly(permanent);
    expect(triggers).toEqual(["TaskFailed"]);
    expect(run).toMatchObject({ state: "FAILED", attempt: 1 });
  });

  it("business: FAILED at once, the refusal kept with its class", () => {
    const { run, triggers } = failRepeatedly(business);
    expect(triggers).toEqual(["TaskFailed"]);
    expect(run.error).toEqual({
      code: "policy.refused",
      errorClass: "business",
      message: "topic is off-limits",
    });
    expect(run.history.at(-1)?.reason).toBe("policy.refused");
  });

  it("invalid model output: retried within the budget, then NEEDS_HUMAN", () => {
    const { run, triggers, clock } = failRepeatedly(invalidOutput);
    expect(triggers).toEqual(["RetryScheduled", "RetryScheduled", "NeedsHuman"]);
    expect(run.state).toBe("NEEDS_HUMAN");
    expect(run.error?.code).toBe("model.invalid_output.schema");
    // A human either runs it again with a fresh budget or supplies the result.
    const again = transition(run, "HumanRetry", { now: clock.now(), reason: "prompt fixed" });
    expect(again).toMatchObject({ state: "READY", attempt: 1 });
    const resolved = transition(run, "HumanResolved", {
      now: clock.now(),
      output: { draft: "written by an editor" },
    });
    expect(resolved).toMatchObject({
      state: "COMPLETED",
      output: { draft: "written by an editor" },
    });
    expect(resolved.error).toBeUndefined();
  });

  it("the invalid-output rule matches the code prefix whatever the class", () => {
    const clock = new ManualClock(START);
    const run = runIn("RUNNING", clock);
    const exhausted = { ...run, attempt: 3 };
    const plain = new TransientError("model.invalid_output", "not JSON");
    expect(classifyFailure(plain, run)).toBe("RetryScheduled");
    expect(classifyFailure(plain, exhausted)).toBe("NeedsHuman");
    const lookalike = new PermanentError("model.invalid_outputs", "other");
    expect(classifyFailure(lookalike, exhausted)).toBe("TaskFailed");
  });

  it("unknown outcome: BLOCKED until confirmed, FAILED when confirmation times out", () => {
    const { run, triggers, clock } = failRepeatedly(unknownOutcome);
    expect(triggers).toEqual(["TaskBlocked"]);
    expect(run.state).toBe("BLOCKED");
    expect(run.error?.errorClass).toBe("unknown_outcome");
    expect(run.confirm_by).toBe(
      new Date(clock.now().getTime() + DEFAULT_CONFIRM_SECONDS * 1000).toISOString(),
    );

    const resumed = transition(run, "ExternalUnblocked", { now: clock.now() });
    expect(resumed.state).toBe("RUNNING");
    expect(resumed.confirm_by).toBeUndefined();
    expect(resumed.lease_expires_at).toBeDefined();

    expect(sweepBlocked([run, resumed], clock.now())).toEqual([]);
    clock.advance(DEFAULT_CONFIRM_SECONDS * 1000);
    expect(sweepBlocked([run, resumed], clock.now())).toEqual([run]);
    const timedOut = transition(run, "ExternalConfirmTimeout", { now: clock.now() });
    expect(timedOut.state).toBe("FAILED");
    expect(timedOut.error).toMatchObject({
      code: "agent_run.confirm_timeout",
      errorClass: "unknown_outcome",
    });
  });

  it("only ManualReset leaves FAILED, and a reset run can be assigned afresh", () => {
    const { run, clock } = failRepeatedly(transient);
    for (const trigger of TRIGGERS) {
      if (trigger !== "ManualReset") expectIllegal(run, trigger, clock.now());
    }
    const idle = transition(run, "ManualReset", { now: clock.now(), reason: "operator: retry" });
    expect(idle.state).toBe("IDLE");
    expect(idle.error).toBeUndefined();
    const ready = transition(idle, "TaskAssigned", { now: clock.now() });
    expect(ready).toMatchObject({ state: "READY", attempt: 1 });
  });

  it("a COMPLETED run cannot be re-assigned before it is archived", () => {
    const clock = new ManualClock(START);
    const done = runIn("COMPLETED", clock);
    expectIllegal(done, "TaskAssigned", clock.now());
    const idle = transition(done, "TaskArchived", { now: clock.now() });
    expect(idle.output).toBeUndefined();
    expect(transition(idle, "TaskAssigned", { now: clock.now() }).state).toBe("READY");
  });
});

describe("run aggregate", () => {
  it("validates when loaded", () => {
    const clock = new ManualClock(START);
    const run = runIn("RUNNING", clock);
    expect(parseRun(JSON.parse(JSON.stringify(run)))).toEqual(run);
    const { lease_expires_at: _, ...noLease } = run;
    expect(() => parseRun(noLease)).toThrow(PermanentError);
    expect(() => parseRun({ ...run, state: "WAITING" })).toThrow(/agent_run|state/);
    expect(() => parseRun({ ...run, task_id: "user_13800138000" })).toThrow(PermanentError);
    expect(() => parseRun({ ...run, attempt: 4 })).toThrow(/max_attempts/);
  });

  it("keeps the last HISTORY_LIMIT transitions and counts them all", () => {
    const clock = new ManualClock(START);
    let run = transition(freshRun(clock), "TaskAssigned", { now: clock.now() });
    for (let i = 0; i < 40; i++) {
      run = transition(run, "TaskCancelled", { now: clock.now() });
      run = transition(run, "TaskArchived", { now: clock.now() });
      run = transition(run, "TaskAssigned", { now: clock.now() });
    }
    expect(run.transition_count).toBe(121);
    expect(run.history).toHaveLength(HISTORY_LIMIT);
    expect(run.history.at(-1)).toMatchObject({ from: "IDLE", to: "READY" });
    expect(() => parseRun(run)).not.toThrow();
  });
});

describe("property: random trigger sequences", () => {
  const stepArb = fc.record({
    pickLegal: fc.boolean(),
    index: fc.nat(),
    advanceMs: fc.integer({ min: 0, max: 90_000 }),
    withError: fc.boolean(),
  });

  it("stay in reachable states, never mutate the input, and record exactly the applied transitions", () => {
    const reachable = reachableStates("IDLE");
    fc.assert(
      fc.property(
        fc.array(stepArb, { maxLength: 150 }),
        fc.integer({ min: 1, max: 4 }),
        (steps, maxAttempts) => {
          const clock = new ManualClock(START);
          let run = freshRun(clock, maxAttempts);
          const applied: { from: RunState; to: RunState; trigger: RunTrigger }[] = [];
          for (const step of steps) {
            clock.advance(step.advanceMs);
            const now = clock.now();
            const choices = step.pickLegal ? legalTriggers(run.state) : TRIGGERS;
            const trigger = choices[step.index % choices.length] as RunTrigger;
            const input = run;
            const before = structuredClone(input);
            try {
              const next = transition(run, trigger, {
                now,
                error: step.withError ? transient() : undefined,
              });
              expect(TRANSITIONS[run.state][trigger]).toBe(next.state);
              if (trigger !== "Heartbeat")
                applied.push({ from: run.state, to: next.state, trigger });
              run = next;
            } catch (error) {
              expect(error).toBeInstanceOf(IllegalTransitionError);
              const illegal = error as IllegalTransitionError;
              expect(illegal.from).toBe(run.state);
              expect(illegal.trigger).toBe(trigger);
              if (illegal.guard === undefined)
                expect(TRANSITIONS[run.state][trigger]).toBeUndefined();
              else if (illegal.guard === "lease_not_expired") expect(isHung(run, now)).toBe(false);
              else expect(run.attempt).toBeGreaterThanOrEqual(run.max_attempts);
            }
            expect(input).toStrictEqual(before);
            expect(reachable.has(run.state)).toBe(true);
          }
          expect(run.transition_count).toBe(applied.length);
          expect(run.history.map(({ from, to, trigger }) => ({ from, to, trigger }))).toEqual(
            applied.slice(-HISTORY_LIMIT),
          );
          parseRun(run);
        },
      ),
      { numRuns: 300 },
    );
  });
});
