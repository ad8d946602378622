import fc from "fast-check";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { commitActions } from "../../functions/adapters/dynamodb/commit-actions";
import { consume } from "../../functions/core/pipeline";
import type { CommitRequest } from "../../functions/core/ports";
import { CLAIM_HEADING } from "../../functions/roles/content-agents/headings";
import { CONTENT_AGENT_SCRIPTS } from "../../functions/roles/content-agents/local-scripts";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import type { Envelope } from "../../schemas";
import { orchestrator, referenceLocalModel } from "../support/reference";
import { Bus } from "./workflow-bus";

/**
 * The orchestrator declares the agents' acknowledgements and heartbeats repeatable
 * (Role.repeatableTypes): its gate keeps no id of them, so a repeat is decided again. The promise
 * that makes this safe, checked at any point of a run (a node queued, running, BLOCKED, answered,
 * cancelled, re-run): applying such a report a second time gives the run state the first left,
 * but for the due time of a lease, emits nothing, and a repeat that changes nothing writes nothing.
 */

/** The fact check asks for a confirmation of its first claim until it is given. */
function confirmingFirstClaim() {
  const factCheck = CONTENT_AGENT_SCRIPTS["fact-check"];
  if (!factCheck) throw new Error("no fact-check script");
  return referenceLocalModel({
    scripts: {
      "fact-check": (request, facts) =>
        facts.text.includes(`${CLAIM_HEADING} (1 of`) &&
        !facts.text.includes("Confirmation received")
          ? { needs_confirmation: { question: "Does the source stand by the claim?" } }
          : factCheck(request, facts),
    },
  });
}

/** The run's state without the leases' due times, which a repeated heartbeat may move. */
function withoutLeaseTimes(state: OrchestratorState): unknown {
  const leases = Object.fromEntries(
    Object.entries(state.leases ?? {}).map(([node, { expires_at: _, ...lease }]) => [node, lease]),
  );
  return { ...state, leases };
}

/** A heartbeat of the agent of each node RUNNING in the run (its current generation). */
function heartbeats(bus: Bus, runId: string, leaseSeconds: number): Envelope[] {
  const nodes = Object.entries(bus.state(runId).run.nodes);
  return nodes.flatMap(([nodeId, node]) =>
    node.state === "RUNNING" && node.assigned_generation !== undefined
      ? [
          bus.command("node.heartbeat", runId, {
            node_id: nodeId,
            generation: node.assigned_generation,
            lease_seconds: leaseSeconds,
          }),
        ]
      : [],
  );
}

/** Applies `report` twice to the orchestrator and checks the second changed nothing that matters. */
async function applyTwice(bus: Bus, runId: string, report: Envelope): Promise<void> {
  const key = `dag_run#${runId}`;
  const logged = bus.store.log.length;
  const first = await consume(structuredClone(report), orchestrator, bus.deps);
  const once = structuredClone(bus.store.states.get(key));
  bus.clock.advance(1000);
  const second = await consume(structuredClone(report), orchestrator, bus.deps);
  const twice = bus.store.states.get(key);
  // Decided again (the gate kept no id), and nothing emitted either time.
  expect([first.status, second.status]).toEqual(["applied", "applied"]);
  expect([...first.steps, ...second.steps].flatMap((s) => s.emitted)).toEqual([]);
  expect(bus.store.log.length).toBe(logged);
  expect(Object.keys(twice?.gate?.recent ?? {})).not.toContain(report.event_id);
  const [a, b] = [once?.data, twice?.data] as OrchestratorState[];
  expect(withoutLeaseTimes(b as OrchestratorState)).toEqual(
    withoutLeaseTimes(a as OrchestratorState),
  );
  // A repeat that changes nothing writes nothing: the state's revision stays.
  if (JSON.stringify(a) === JSON.stringify(b)) expect(twice?.revision).toBe(once?.revision);
}

const scenarios = fc.record({
  /** Picks the next delivery, and the report repeated after each of the orchestrator's steps. */
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  blocks: fc.boolean(),
  /** After this many deliveries the run is cancelled (or, with `rerun`, its writing re-run). */
  interruptAt: fc.option(fc.integer({ min: 2, max: 40 }), { nil: undefined }),
  rerun: fc.boolean(),
  leaseSeconds: fc.integer({ min: 1, max: 3600 }),
});

/** A small seeded generator (the bus's order and the report picked are part of the case). */
function lcg(seed: number): (n: number) => number {
  let s = seed;
  return (n) => {
    s = (s * 48271) % 2147483647;
    return s % n;
  };
}

type Scenario = typeof scenarios extends fc.Arbitrary<infer T> ? T : never;

async function playWithRepeats(scenario: Scenario): Promise<void> {
  const { seed, blocks, interruptAt, rerun, leaseSeconds } = scenario;
  const pick = lcg(seed);
  const bus = new Bus({ acknowledge: true, ...(blocks ? { model: confirmingFirstClaim() } : {}) });
  const runId = `run_${ulid()}`;
  bus.start(runId, "quick-news");
  for (let delivered = 0; bus.pending.length > 0; delivered++) {
    const next = bus.pending[pick(bus.pending.length)];
    await bus.drain((d) => d === next);
    if (delivered === interruptAt) {
      const by = { requested_by: "alice" };
      const type = rerun ? "workflow.rerun.requested" : "workflow.cancel.requested";
      bus.send(bus.command(type, runId, rerun ? { node_id: "writing", ...by } : by));
    }
    const blocked = Object.values(bus.state(runId).leases ?? {}).some((l) => l.blocked);
    if (blocked && pick(3) === 0)
      bus.send(
        bus.command("workflow.confirm.requested", runId, {
          node_id: "fact-check",
          answer: "confirmed",
          requested_by: "alice",
        }),
      );
    if (next?.group !== orchestrator.group) continue;
    const reports = [...bus.acknowledged, ...heartbeats(bus, runId, leaseSeconds)];
    const report = reports[pick(reports.length + 1)];
    if (report) await applyTwice(bus, runId, report);
  }
  expect(bus.deadLettered).toEqual([]);
}

describe("the orchestrator's acknowledgements and heartbeats, applied again", () => {
  it("leave the run as once (but for a lease's due time), emit nothing, and a no-op writes nothing", async () => {
    await fc.assert(fc.asyncProperty(scenarios, playWithRepeats), { numRuns: 12 });
  }, 240_000);

  it("an acknowledgement the run already took is decided again, and its commit writes nothing", async () => {
    const bus = new Bus({ acknowledge: true });
    const runId = `run_${ulid()}`;
    bus.start(runId, "quick-news");
    await bus.drain((d) => d.event.event_type === "workflow.start.requested");
    await bus.drain((d) => d.event.event_type === "topic_selection.requested");
    await bus.drain((d) => d.event.event_type === "node.started");
    const [ack] = bus.acknowledged;
    if (!ack) throw new Error("no acknowledgement");
    const stored = bus.store.states.get(`dag_run#${runId}`);
    const data = stored?.data as OrchestratorState | undefined;
    expect(data?.leases?.["topic-selection"]?.started).toBe(true);
    expect(Object.keys(stored?.gate?.recent ?? {})).not.toContain(ack.event_id);
    const requests: CommitRequest[] = [];
    const commit = bus.store.commit.bind(bus.store);
    bus.store.commit = (request) => {
      requests.push(request);
      return commit(request);
    };
    const again = await consume(structuredClone(ack), orchestrator, bus.deps);
    expect(again.status).toBe("applied");
    expect(bus.store.states.get(`dag_run#${runId}`)).toBe(stored);
    // What DynamoDB would be sent for it: nothing at all.
    const tables = { state: "state", events: "events", inbox: "inbox" };
    expect(requests.map((r) => commitActions(tables, r, bus.clock.now(), () => undefined))).toEqual(
      [[]],
    );
  });
});
