import { describe, expect, it } from "vitest";
import {
  agentBusDollars,
  agentBusProvisionedDollars,
  contentRunShape,
  FLOW_SHAPES,
  type FlowShape,
  type FlowUsage,
  type MixedFlow,
  minimumCapacityMonth,
  monthOf,
  peerCosts,
  perConsumedEvent,
  total,
  writeBudget,
  zeroUsage,
} from "../../lib/dev/metering/flow-cost";
import {
  dollarsFor,
  PRICES,
  TEMPORAL_ACTION_TIERS,
  temporalMonth,
  tieredDollars,
} from "../../lib/dev/metering/prices";

/** The price arithmetic and the peers' counting, in memory. */

const usage = (overrides: Partial<FlowUsage> = {}): FlowUsage => ({
  ...zeroUsage(),
  consumedEvents: 1,
  ...overrides,
});

const shape = (flow: string): FlowShape => {
  const found = FLOW_SHAPES.find((s) => s.flow === flow);
  if (!found) throw new Error(`no shape ${flow}`);
  return found;
};

describe("prices", () => {
  it("prices a quantity at its unit", () => {
    expect(dollarsFor(PRICES.kmsRequests, 10_000)).toBeCloseTo(0.03, 12);
    expect(dollarsFor(PRICES.stepFunctionsTransitions, 4_000)).toBeCloseTo(0.1, 12);
    expect(dollarsFor(PRICES.dynamoWrite, 2e6)).toBeCloseTo(1.25, 12);
  });

  it("prices each unit at the tier it falls in (Temporal's published example: 11.25M Actions, $525)", () => {
    expect(tieredDollars(TEMPORAL_ACTION_TIERS, 11.25e6)).toBeCloseTo(525, 6);
    expect(tieredDollars(TEMPORAL_ACTION_TIERS, 0)).toBe(0);
    expect(tieredDollars(TEMPORAL_ACTION_TIERS, 1e6)).toBeCloseTo(50, 9);
    // Past the last published tier the price stays at $25 per million.
    expect(
      tieredDollars(TEMPORAL_ACTION_TIERS, 300e6) - tieredDollars(TEMPORAL_ACTION_TIERS, 200e6),
    ).toBeCloseTo(2500, 6);
  });

  it("refuses a negative or missing quantity", () => {
    expect(() => tieredDollars(TEMPORAL_ACTION_TIERS, -1)).toThrow(/0 or more, not -1/);
    expect(() => tieredDollars(TEMPORAL_ACTION_TIERS, Number.NaN)).toThrow(/not NaN/);
  });

  it("adds Temporal's Business plan: $500 a month at least, else 10% of usage", () => {
    expect(temporalMonth(0)).toBe(500);
    expect(temporalMonth(1e6)).toBeCloseTo(550, 9);
    const usage = tieredDollars(TEMPORAL_ACTION_TIERS, 200e6);
    expect(temporalMonth(200e6)).toBeCloseTo(usage * 1.1, 6);
  });
});

describe("AgentBus's dollars for a flow", () => {
  it("prices each metered line and sums them", () => {
    const lines = agentBusDollars(
      usage({
        dynamoWriteUnits: 8,
        dynamoReadUnits: 4,
        sqsStandardRequests: 10,
        sqsFifoRequests: 10,
        eventBridgeEvents: 3,
        lambdaRequests: 5,
        lambdaGbSeconds: { arm64: 1, x86_64: 1 },
        kmsRequests: 2,
      }),
    );
    expect(lines["DynamoDB writes"]).toBeCloseTo(8 * 0.625e-6, 15);
    expect(lines["SQS standard"]).toBeCloseTo(10 * 0.4e-6, 15);
    expect(lines["SQS FIFO"]).toBeCloseTo(10 * 0.5e-6, 15);
    expect(lines["Lambda duration"]).toBeCloseTo(0.0000133334 + 0.0000166667, 15);
    expect(lines.KMS).toBeCloseTo(2 * 3e-6, 15);
    const expected =
      8 * 0.625e-6 + 4 * 0.125e-6 + 10 * 0.9e-6 + 3e-6 + 5 * 0.2e-6 + 0.0000300001 + 6e-6;
    expect(total(lines)).toBeCloseTo(expected, 15);
  });
});

describe("AgentBus's dollars for a flow on provisioned tables", () => {
  it("prices DynamoDB's units as the share of a unit-hour they use at the utilization, the rest as on demand", () => {
    const used = usage({ dynamoWriteUnits: 3600, dynamoReadUnits: 7200, sqsFifoRequests: 10 });
    const full = agentBusProvisionedDollars(used, 1);
    // 3,600 write units are one write unit held for an hour at 100% use.
    expect(full["DynamoDB writes"]).toBeCloseTo(0.00065, 12);
    expect(full["DynamoDB reads"]).toBeCloseTo(2 * 0.00013, 12);
    expect(full["SQS FIFO"]).toBe(agentBusDollars(used)["SQS FIFO"]);
    // At 70% use, 1/0.7 of the capacity is held for the same units.
    expect(agentBusProvisionedDollars(used, 0.7)["DynamoDB writes"]).toBeCloseTo(0.00065 / 0.7, 12);
    // Cheaper than on demand per unit from about 29% use on: $0.18 against $0.625 a million.
    expect(full["DynamoDB writes"]).toBeLessThan(agentBusDollars(used)["DynamoDB writes"] ?? 0);
  });

  it("refuses a utilization outside (0, 1], and costs a table's minimum unit pair a month", () => {
    expect(() => agentBusProvisionedDollars(usage(), 0)).toThrow(/above 0 and at most 1, not 0/);
    expect(() => agentBusProvisionedDollars(usage(), 70)).toThrow(/not 70/);
    expect(minimumCapacityMonth()).toBeCloseTo((0.00065 + 0.00013) * 720, 9);
  });
});

describe("the peers' counting", () => {
  const work = usage({ workGbSeconds: 0.5, workSeconds: 1.01 });
  const byPeer = (s: FlowShape) => Object.fromEntries(peerCosts(s, work).map((p) => [p.peer, p]));
  const workDollars = 0.5 * 0.0000133334;

  it("counts a support turn's four Task states, its Actions and its durable operations", () => {
    const p = byPeer(shape("support turn"));
    expect(p["Step Functions Standard"]?.dollars).toBeCloseTo(
      4 * 25e-6 + 4 * 0.2e-6 + workDollars,
      15,
    );
    expect(p["Temporal Cloud"]?.dollars).toBeCloseTo(5 * 50e-6, 15);
    expect(p["Temporal Cloud"]?.counted).toMatch(/^5 Actions/);
    expect(p["Lambda durable functions"]?.dollars).toBeCloseTo(5 * 8e-6 + 0.2e-6 + workDollars, 15);
    // Express: one request, 1.01 s rounded up to 1.1 s at 64 MB.
    expect(p["Step Functions Express"]?.dollars).toBeCloseTo(
      1e-6 + 1.1 * (64 / 1024) * 0.00001667 + 4 * 0.2e-6 + workDollars,
      15,
    );
  });

  it("counts a content run's claims and rounds as steps, and a Parallel or Map state as one more transition and durable operation", () => {
    const played = { claims: 3, rounds: 2 };
    const quickShape = contentRunShape("quick news", played);
    expect(quickShape.steps).toEqual([
      "select topic",
      "fact check claim 1",
      "fact check claim 2",
      "fact check claim 3",
      "write",
      "review",
      "write",
      "review",
    ]);
    const quick = byPeer(quickShape);
    const long = byPeer(contentRunShape("long form", played));
    // 8 Task states, + a Map (both) and a Parallel (quick news).
    expect(quick["Step Functions Standard"]?.counted).toMatch(/^10 transitions/);
    expect(long["Step Functions Standard"]?.counted).toMatch(/^9 transitions/);
    expect(
      byPeer(contentRunShape("long form", { claims: 4, rounds: 1 }))["Temporal Cloud"]?.counted,
    ).toBe("8 Actions (assumed: workflow start + 7 Activity starts)");
    expect(
      (quick["Lambda durable functions"]?.dollars ?? 0) -
        (long["Lambda durable functions"]?.dollars ?? 0),
    ).toBeCloseTo(8e-6, 15);
    // Temporal bills Activity starts: parallel or serial, the same Actions.
    expect(quick["Temporal Cloud"]?.dollars).toBe(long["Temporal Cloud"]?.dollars);
  });

  it("counts a child run as a nested execution, a chained durable function and a child workflow", () => {
    const played = { claims: 3, rounds: 1 };
    const flat = byPeer(contentRunShape("long form", played));
    const shape = contentRunShape("long form", { ...played, childRuns: 1 });
    expect(shape.steps).toEqual(contentRunShape("long form", played).steps);
    const nested = byPeer(shape);
    const more = (peer: string) => (nested[peer]?.dollars ?? 0) - (flat[peer]?.dollars ?? 0);
    // The parent's Task state that starts the child execution.
    expect(nested["Step Functions Standard"]?.counted).toBe(
      "8 transitions (assumed: 6 Task states + 1 Parallel/Map + 1 child execution start) + 6 Lambda tasks",
    );
    expect(more("Step Functions Standard")).toBeCloseTo(25e-6, 15);
    // The child's own execution request.
    expect(nested["Step Functions Express"]?.counted).toMatch(/^2 requests \+/);
    expect(more("Step Functions Express")).toBeCloseTo(1e-6, 15);
    // The parent's invoke and the child's start, and the child's invocation.
    expect(nested["Lambda durable functions"]?.counted).toBe(
      "10 operations (assumed: start + 6 steps + 1 parallel + 1 child invoke + child start) + 2 invocations",
    );
    expect(more("Lambda durable functions")).toBeCloseTo(2 * 8e-6 + 0.2e-6, 15);
    expect(nested["Temporal Cloud"]?.counted).toBe(
      "8 Actions (assumed: workflow start + 6 Activity starts + 1 child workflow start)",
    );
    expect(more("Temporal Cloud")).toBeCloseTo(50e-6, 15);
  });
});

describe("the write budget against a durable function", () => {
  const durable = (s: FlowShape, u: FlowUsage) =>
    peerCosts(s, u).find((p) => p.peer === "Lambda durable functions")?.dollars ?? Number.NaN;

  it("is the write units that bring a flow to the durable function's price, the rest as metered", () => {
    const turn = shape("support turn");
    const used = usage({
      dynamoWriteUnits: 54,
      sqsFifoRequests: 10,
      lambdaRequests: 17,
      workGbSeconds: 0.1,
    });
    const budget = writeBudget(turn, used);
    const rest = 10 * 0.5e-6 + 17 * 0.2e-6;
    expect(budget.otherDollars).toBeCloseTo(rest, 15);
    expect(budget.dollars).toBeCloseTo(rest + 54 * 0.625e-6, 15);
    expect(budget.peerDollars).toBeCloseTo(durable(turn, used), 15);
    expect(budget.writeUnits).toBe(54);
    expect(budget.writeUnitsAtPeer).toBeCloseTo((durable(turn, used) - rest) / 0.625e-6, 6);
    // At that many write units, AgentBus costs exactly what the durable function does.
    const atPeer = usage({ ...used, dynamoWriteUnits: budget.writeUnitsAtPeer });
    expect(total(agentBusDollars(atPeer))).toBeCloseTo(budget.peerDollars, 12);
  });

  it("is 0 when what the flow spends besides its writes already costs more than the peer", () => {
    const budget = writeBudget(shape("support turn"), usage({ sqsFifoRequests: 1_000 }));
    expect(budget.otherDollars).toBeGreaterThan(budget.peerDollars);
    expect(budget.writeUnitsAtPeer).toBe(0);
  });
});

describe("dollars per consumed event at a load", () => {
  const flows: MixedFlow[] = [
    {
      shape: shape("support turn"),
      usage: usage({ consumedEvents: 20, dynamoWriteUnits: 80, sqsFifoRequests: 20 }),
    },
  ];
  const loads = [1, 10, 100, 1000].map((load) =>
    perConsumedEvent(flows, 1e5, load, { standard: 0, fifo: 0 }),
  );

  it("stays flat where billing is per request, and falls with load for Temporal's plan and tiers", () => {
    const bus = loads.map((l) => l.AgentBus);
    expect(new Set(bus.map((d) => d.toPrecision(12))).size).toBe(1);
    const standard = loads.map((l) => l["Step Functions Standard"]);
    expect(new Set(standard.map((d) => d.toPrecision(12))).size).toBe(1);
    const temporal = loads.map((l) => l["Temporal Cloud"]);
    for (let i = 1; i < temporal.length; i++)
      expect(temporal[i]).toBeLessThan(temporal[i - 1] ?? 0);
  });

  it("spreads the idle polling of SQS mappings over the load", () => {
    const polled = [1, 1000].map(
      (load) => perConsumedEvent(flows, 1e5, load, { standard: 2, fifo: 1 }).AgentBus,
    );
    expect(polled[0]).toBeGreaterThan(polled[1] ?? 0);
    // 3 mappings × 15 polls a minute for a 30-day month, at $0.40 (standard) and $0.50 (FIFO) per million.
    const idle = (2 * 0.4 + 0.5) * 15 * 43_200 * 1e-6;
    const month = monthOf(flows, 1e5, { standard: 2, fifo: 1 }).AgentBus;
    const without = monthOf(flows, 1e5, { standard: 0, fifo: 0 }).AgentBus;
    expect(month - without).toBeCloseTo(idle, 9);
  });

  it("refuses a load without a positive rate", () => {
    expect(() => perConsumedEvent(flows, 0, 1, { standard: 0, fifo: 0 })).toThrow(/positive rate/);
    expect(() => perConsumedEvent(flows, 1e5, -10, { standard: 0, fifo: 0 })).toThrow(
      /positive rate/,
    );
  });
});
