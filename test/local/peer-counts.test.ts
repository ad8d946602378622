import { describe, expect, it } from "vitest";
import { countTransitions, definitionOf } from "../../bin/bench/peer-step-functions";
import { withPeerCounts } from "../../bin/bench/peers";
import {
  contentRunShape,
  FLOW_SHAPES,
  type FlowShape,
  peerCosts,
  zeroUsage,
} from "../../lib/dev/metering/flow-cost";

/**
 * The peers' figures counted rather than assumed: each reference flow's state machine walked for
 * its transitions, and its durable function run on AWS's testing SDK for its operations.
 */

const shapeOf = (flow: string): FlowShape => {
  const found = FLOW_SHAPES.find((s) => s.flow === flow);
  if (!found) throw new Error(flow);
  return found;
};
const quickNews = contentRunShape("quick news", { claims: 3, rounds: 2 });
const longForm = contentRunShape("long form", { claims: 2, rounds: 1, childRuns: 1 });

describe("the peers' counts (bin/bench/peers.ts)", () => {
  it("walks each flow's state machine as the played run went: every state entered is a transition", () => {
    const count = (shape: FlowShape) => {
      const definition = definitionOf(shape);
      if (!definition) throw new Error(`no state machine for ${shape.flow}`);
      return countTransitions(definition, shape);
    };
    expect(count(shapeOf("support turn"))).toEqual({ transitions: 4, executions: 1 });
    expect(count(shapeOf("refund review"))).toEqual({ transitions: 8, executions: 1 });
    // select topic, the Parallel state; a Map and 3 claims; write, review, approved? twice, done.
    expect(count(quickNews)).toEqual({ transitions: 1 + 1 + 1 + 3 + 7, executions: 1 });
    // select topic, the nested execution's Task; its Map and 2 claims; write, review, approved?, done.
    expect(count(longForm)).toEqual({ transitions: 1 + 1 + 1 + 2 + 4, executions: 2 });
    expect(definitionOf({ ...quickNews, flow: "unknown" })).toBeUndefined();
  });

  it("runs each flow's durable function on the testing SDK and counts what the execution recorded", async () => {
    const shapes = await withPeerCounts([shapeOf("support turn"), quickNews, longForm]);
    const [support, quick, long] = shapes.map((s) => s.counted?.durable);
    // Four steps and the execution's start.
    expect(support).toMatchObject({ operations: 5 });
    // select topic; the parallel, its two branches; the map, its 3 items, their 3 steps; 2 rounds
    // of write and review; the start.
    expect(quick).toMatchObject({ operations: 1 + 3 + 1 + 3 + 3 + 4 + 1 });
    // select topic, the invoke, write, review, the start; the chained execution: its map, 2 items,
    // 2 steps and its start.
    expect(long).toMatchObject({ operations: 5 + 6 });
    // Every step's result is in the checkpoint: a long form's draft alone is 4 KB.
    expect(long?.checkpointBytes).toBeGreaterThan(4000);
    expect(support?.sdk).toMatch(/^@aws\/durable-execution-sdk-js \d/);
    // The counts price the peers, and say they were counted.
    const costs = peerCosts(shapes[1] as FlowShape, zeroUsage());
    const durable = costs.find((c) => c.peer === "Lambda durable functions");
    expect(durable?.counted).toContain("16 operations");
    expect(durable?.counted).toContain("counted");
    const assumed = peerCosts(quickNews, zeroUsage()).find(
      (c) => c.peer === "Lambda durable functions",
    );
    expect(assumed?.counted).toContain("assumed");
    expect(durable?.dollars).toBeGreaterThan(assumed?.dollars ?? Infinity);
  });
});
