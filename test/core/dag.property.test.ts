import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_GLOBAL_CONCURRENCY,
  type EdgeDefinition,
  type WorkflowDefinition,
} from "../../functions/core/dag/definition";
import { onNodeCompleted, onNodeFailed, release, startRun } from "../../functions/core/dag/engine";
import { defineWorkflow } from "../../functions/core/dag/graph";
import { rerunFrom } from "../../functions/core/dag/rerun";
import type {
  Capacity,
  DagCommand,
  DagRun,
  NodeState,
  Transition,
} from "../../functions/core/dag/run";
import { deepFreeze } from "../../functions/core/freeze";

/**
 * For random DAGs (1..12 nodes, random forward edges, plain or conditional, random roles, joins
 * and caps) driven by random schedules (completion order, duplicate and stale deliveries,
 * partial re-runs, queue-depth gating):
 * - every node is assigned at most once per generation;
 * - a node is assigned only once its upstreams have ended as its join allows, with at least one
 *   incoming edge taken, and its input holds exactly the taken upstreams' outputs;
 * - a delivery changes the run only for a RUNNING node of the same generation;
 * - counters always equal the number of upstreams not yet ended; caps are never exceeded;
 * - the run terminates, COMPLETED whenever no node fails, and every node ends as an independent
 *   oracle of the skip / cancel rules says.
 */

const ROLES = ["r1", "r2", "r3"] as const;
type EdgeKind = "none" | "plain" | "eq0" | "eq1" | "in12";
const EDGE_KINDS: EdgeKind[] = [
  "none",
  "none",
  "none",
  "plain",
  "plain",
  "plain",
  "eq0",
  "eq1",
  "in12",
];

interface Spec {
  readonly n: number;
  readonly roles: readonly (typeof ROLES)[number][];
  readonly joins: readonly ("all" | "any-success")[];
  readonly degrade: readonly boolean[];
  readonly fails: readonly boolean[];
  readonly edges: readonly EdgeKind[];
  readonly global: number | null;
  readonly r1Cap: number | null;
}

const specArb = (withFailures: boolean): fc.Arbitrary<Spec> =>
  fc.integer({ min: 1, max: 12 }).chain((n) => {
    const perNode = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { minLength: n, maxLength: n });
    const pairs = (n * (n - 1)) / 2;
    return fc.record({
      n: fc.constant(n),
      roles: perNode(fc.constantFrom(...ROLES)),
      joins: perNode(fc.constantFrom("all" as const, "any-success" as const)),
      degrade: perNode(fc.boolean()),
      fails: withFailures
        ? perNode(fc.integer({ min: 0, max: 3 }).map((k) => k === 0))
        : perNode(fc.constant(false)),
      edges: fc.array(fc.constantFrom(...EDGE_KINDS), { minLength: pairs, maxLength: pairs }),
      global: fc.option(fc.integer({ min: 1, max: 4 })),
      r1Cap: fc.option(fc.integer({ min: 1, max: 2 })),
    });
  });

const nodeId = (i: number) => `n${String(i).padStart(2, "0")}`;

function buildWorkflow(spec: Spec): WorkflowDefinition {
  const edges: EdgeDefinition[] = [];
  let k = 0;
  for (let i = 0; i < spec.n; i++) {
    for (let j = i + 1; j < spec.n; j++) {
      const kind = spec.edges[k++] ?? "none";
      if (kind === "none") continue;
      const edge = { from: nodeId(i), to: nodeId(j) };
      if (kind === "plain") edges.push(edge);
      else if (kind === "eq0") edges.push({ ...edge, when: { path: "v", equals: 0 } });
      else if (kind === "eq1") edges.push({ ...edge, when: { path: "v", equals: 1 } });
      else edges.push({ ...edge, when: { path: "v", in: [1, 2] } });
    }
  }
  const usesR1 = spec.roles.includes("r1");
  return defineWorkflow({
    name: "prop.flow",
    version: 1,
    nodes: spec.roles.map((role, i) => ({
      id: nodeId(i),
      role,
      join: spec.joins[i] ?? "all",
      degrade: spec.degrade[i] ? ("empty" as const) : ("fail" as const),
    })),
    edges,
    concurrency: {
      ...(spec.global === null ? {} : { global: spec.global }),
      ...(spec.r1Cap === null || !usesR1 ? {} : { perRole: { r1: spec.r1Cap } }),
    },
  });
}

/** Consumes the generated choices; once they run out, always 0 (deliver the oldest in flight). */
class Choices {
  private i = 0;
  constructor(private readonly values: readonly number[]) {}
  next(mod: number): number {
    const v = this.values[this.i++] ?? 0;
    return mod <= 0 ? 0 : v % mod;
  }
}

const ENDED: ReadonlySet<NodeState> = new Set([
  "COMPLETED",
  "DEGRADED",
  "SKIPPED",
  "FAILED",
  "CANCELLED",
]);

/** Independent oracle of an edge's outcome (only the conditions the generator makes). */
function oracleEdge(edge: EdgeDefinition, run: DagRun): "taken" | "not" | "failed" | "open" {
  const up = run.nodes[edge.from];
  if (!up) throw new Error(`no node ${edge.from}`);
  if (up.state === "SKIPPED") return "not";
  if (up.state === "FAILED" || up.state === "CANCELLED") return "failed";
  if (up.state !== "COMPLETED" && up.state !== "DEGRADED") return "open";
  if (!edge.when) return "taken";
  const v = (up.output as { v?: unknown } | undefined)?.v;
  if (edge.when.in) return edge.when.in.includes(v) ? "taken" : "not";
  return v === edge.when.equals ? "taken" : "not";
}

/** What the rules say a node whose upstreams have all ended becomes. */
function oracleFate(def: WorkflowDefinition, run: DagRun, id: string) {
  const incoming = def.edges.filter((e) => e.to === id);
  if (incoming.length === 0) return "runs" as const;
  const outcomes = incoming.map((e) => oracleEdge(e, run));
  const join = def.nodes.find((n) => n.id === id)?.join;
  if (join === "all" && outcomes.includes("failed")) return "CANCELLED" as const;
  if (outcomes.includes("open")) return "open" as const;
  if (outcomes.includes("taken")) return "runs" as const;
  if (outcomes.includes("failed")) return "CANCELLED" as const;
  return "SKIPPED" as const;
}

interface Delivery {
  readonly node_id: string;
  readonly generation: number;
}

/** What the schedules exercised, so the properties cannot pass vacuously. */
const stats = {
  reruns: 0,
  ignored: new Map<string, number>(),
  held: new Map<string, number>(),
  skipped: 0,
  cancelled: 0,
  degraded: 0,
};
const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

interface World {
  readonly def: WorkflowDefinition;
  readonly spec: Spec;
  readonly seen: Set<string>;
  assignments: number;
}

function checkRunInvariants(world: World, run: DagRun): void {
  const { def } = world;
  let running = 0;
  const byRole = new Map<string, number>();
  let live = false;
  for (const node of def.nodes) {
    const state = run.nodes[node.id];
    if (!state) throw new Error(`run lost node ${node.id}`);
    const open = def.edges.filter(
      (e) => e.to === node.id && !ENDED.has(run.nodes[e.from]?.state ?? "PENDING"),
    ).length;
    expect(state.remaining_upstreams, `counter of ${node.id}`).toBe(open);
    if (state.state === "PENDING")
      expect(open, `${node.id} PENDING with nothing to wait for`).toBeGreaterThan(0);
    if (state.state === "RUNNING") {
      running++;
      const role = node.role ?? "";
      byRole.set(role, (byRole.get(role) ?? 0) + 1);
    }
    if (!ENDED.has(state.state)) live = true;
  }
  expect(running).toBeLessThanOrEqual(def.concurrency?.global ?? DEFAULT_GLOBAL_CONCURRENCY);
  for (const [role, cap] of Object.entries(def.concurrency?.perRole ?? {}))
    expect(byRole.get(role) ?? 0).toBeLessThanOrEqual(cap);
  expect(run.status === "RUNNING").toBe(live);
}

function checkAssignments(world: World, t: Transition): void {
  const { def } = world;
  for (const command of t.commands) {
    if (command.type !== "node.assign") continue;
    world.assignments++;
    const key = `${command.node_id}@${command.generation}`;
    expect(world.seen.has(key), `${key} assigned twice`).toBe(false);
    world.seen.add(key);
    expect(command.generation).toBe(t.run.generation);
    const node = t.run.nodes[command.node_id];
    expect(node).toMatchObject({
      state: "RUNNING",
      assigned_generation: command.generation,
      attempt: command.attempt,
    });
    expect(oracleFate(def, t.run, command.node_id), `${command.node_id} assigned too early`).toBe(
      "runs",
    );
    const expectedInput: Record<string, unknown> = {};
    for (const edge of def.edges.filter((e) => e.to === command.node_id))
      if (oracleEdge(edge, t.run) === "taken")
        expectedInput[edge.from] = t.run.nodes[edge.from]?.output;
    expect(command.input).toEqual(expectedInput);
  }
}

function simulate(spec: Spec, choiceValues: readonly number[], allowReruns: boolean) {
  const def = buildWorkflow(spec);
  const world: World = { def, spec, seen: new Set(), assignments: 0 };
  const choices = new Choices(choiceValues);
  const gated = (): Capacity =>
    choices.next(3) === 0
      ? {
          threshold: 2,
          queueDepth: { r1: choices.next(4), r2: choices.next(4), r3: choices.next(4) },
        }
      : {};
  const inFlight: Delivery[] = [];
  const delivered: (Delivery & { output: unknown; failed: boolean })[] = [];
  const track = (t: Transition) => {
    for (const h of t.held) bump(stats.held, h.reason);
    for (const e of t.events) if (e.type === "delivery.ignored") bump(stats.ignored, e.reason);
    checkAssignments(world, t);
    checkRunInvariants(world, t.run);
    for (const c of t.commands as DagCommand[])
      if (c.type === "node.assign") inFlight.push({ node_id: c.node_id, generation: c.generation });
    return t;
  };

  let t = track(startRun(def, "run_prop", { seed: 1 }, gated()));
  let reruns = 0;
  for (let step = 0; t.run.status === "RUNNING"; step++) {
    if (step > 5000) throw new Error("the run did not terminate");
    const before = deepFreeze(t.run);
    if (inFlight.length === 0) {
      const opened = track(release(before, def));
      expect(
        opened.commands.length,
        "a RUNNING run with nothing in flight released nothing",
      ).toBeGreaterThan(0);
      t = opened;
      continue;
    }
    const action = choices.next(10);
    const duplicate = action === 5 || action === 6;
    if (action <= 4 || (duplicate && delivered.length === 0)) {
      const [d] = inFlight.splice(choices.next(inFlight.length), 1);
      if (!d) throw new Error("empty in-flight pick");
      const index = Number(d.node_id.slice(1));
      const failed = spec.fails[index] === true;
      const output = { v: choices.next(3), by: d.node_id };
      const node = before.nodes[d.node_id];
      const acceptable = node?.state === "RUNNING" && node.assigned_generation === d.generation;
      const next = failed
        ? onNodeFailed(
            before,
            def,
            d.node_id,
            { code: "x.failed", message: "no" },
            d.generation,
            gated(),
          )
        : onNodeCompleted(before, def, d.node_id, output, d.generation, gated());
      if (acceptable) {
        expect(next.run).not.toBe(before);
        delivered.push({ ...d, output, failed });
      } else {
        expect(next.run).toBe(before);
        expect(next.events[0]?.type).toBe("delivery.ignored");
      }
      t = track(next);
    } else if (duplicate) {
      const d = delivered[choices.next(delivered.length)];
      if (!d) throw new Error("empty delivered pick");
      const again = d.failed
        ? onNodeFailed(before, def, d.node_id, { code: "x.failed", message: "no" }, d.generation)
        : onNodeCompleted(before, def, d.node_id, d.output, d.generation);
      expect(again.run).toBe(before);
      expect(again.commands).toEqual([]);
      expect(again.events).toHaveLength(1);
      expect(again.events[0]).toMatchObject({ type: "delivery.ignored" });
      bump(stats.ignored, (again.events[0] as { reason: string }).reason);
      expect(["duplicate", "stale_generation"]).toContain(
        (again.events[0] as { reason: string }).reason,
      );
    } else if (action === 7 && allowReruns && reruns < 2) {
      const candidates = def.nodes
        .map((n) => n.id)
        .filter((id) => ["COMPLETED", "RUNNING"].includes(before.nodes[id]?.state ?? ""));
      const from = candidates[choices.next(candidates.length)];
      if (from === undefined) continue;
      reruns++;
      stats.reruns++;
      t = track(rerunFrom(before, def, from, gated()));
      expect(t.run.generation).toBe(before.generation + 1);
      // outside the scope nothing changed
      const scope = new Set([from]);
      for (let grew = true; grew; ) {
        grew = false;
        for (const e of def.edges)
          if (scope.has(e.from) && !scope.has(e.to)) {
            scope.add(e.to);
            grew = true;
          }
      }
      for (const n of def.nodes) {
        if (scope.has(n.id)) continue;
        const was = before.nodes[n.id];
        const now = t.run.nodes[n.id];
        // a READY node outside the scope may have been released by this pass
        if (was?.state === "READY" && now?.state === "RUNNING") continue;
        expect(now).toEqual(was);
      }
    } else {
      t = track(release(before, def, action === 8 ? gated() : {}));
    }
  }

  // The run ended: every node ended as the oracle says, and late deliveries change nothing.
  for (const n of def.nodes) {
    const state = t.run.nodes[n.id]?.state;
    const fate = oracleFate(def, t.run, n.id);
    if (fate === "runs") expect(["COMPLETED", "DEGRADED", "FAILED"]).toContain(state);
    else expect(state, `${n.id}`).toBe(fate);
    if (state === "DEGRADED") expect(t.run.nodes[n.id]?.output).toEqual({});
    if (state === "SKIPPED") stats.skipped++;
    if (state === "CANCELLED") stats.cancelled++;
    if (state === "DEGRADED") stats.degraded++;
  }
  const states = Object.values(t.run.nodes).map((n) => n.state);
  const expectedStatus =
    !states.includes("FAILED") && !states.includes("CANCELLED")
      ? "COMPLETED"
      : states.includes("COMPLETED")
        ? "PARTIAL"
        : "FAILED";
  expect(t.run.status).toBe(expectedStatus);
  for (const d of [...inFlight, ...delivered]) {
    const late = onNodeCompleted(deepFreeze(t.run), def, d.node_id, { v: 0 }, d.generation);
    expect(late.run).toBe(t.run);
  }
  return { run: t.run, world };
}

describe("DAG runs under random schedules (property)", () => {
  it("assign each node at most once per generation, only when ready, and complete when nothing fails", () => {
    let assignments = 0;
    fc.assert(
      fc.property(
        specArb(false),
        fc.array(fc.nat(), { minLength: 10, maxLength: 400 }),
        (spec, choices) => {
          const { run, world } = simulate(spec, choices, true);
          expect(run.status).toBe("COMPLETED");
          assignments += world.assignments;
        },
      ),
      { numRuns: 400 },
    );
    expect(assignments).toBeGreaterThan(400);
  });

  it("with failures: cancel what cannot run, keep the rest, and end PARTIAL / FAILED as the oracle says", () => {
    const seen = new Set<string>();
    fc.assert(
      fc.property(
        specArb(true),
        fc.array(fc.nat(), { minLength: 10, maxLength: 400 }),
        (spec, choices) => {
          const { run } = simulate(spec, choices, false);
          seen.add(run.status);
        },
      ),
      { numRuns: 300 },
    );
    expect([...seen].sort()).toEqual(["COMPLETED", "FAILED", "PARTIAL"]);
  });

  it("exercised reruns, duplicate and stale deliveries, skips, cancels, degrades and every hold", () => {
    expect(stats.reruns).toBeGreaterThan(10);
    expect(stats.ignored.get("duplicate") ?? 0).toBeGreaterThan(10);
    expect(stats.ignored.get("stale_generation") ?? 0).toBeGreaterThan(5);
    expect(stats.skipped).toBeGreaterThan(20);
    expect(stats.cancelled).toBeGreaterThan(20);
    expect(stats.degraded).toBeGreaterThan(20);
    for (const reason of ["global_cap", "role_cap", "queue_depth"])
      expect(stats.held.get(reason) ?? 0, reason).toBeGreaterThan(5);
  });
});
