import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { taskProjectionDelivered } from "../../lib/dev/local/delivered-topology";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { runScenario, type ScenarioResult } from "../../lib/dev/local/scenario";
import { emulator } from "../support/aws";

/**
 * The same scenario with the task projection delivered by an EventBridge Pipe (buffer queue ->
 * FIFO queue, MessageGroupId from `$.body.detail.order_key`) instead of the dispatch function.
 * The local runtime runs the pipe from the synthesized template.
 */
describe("pipe delivery, end to end", () => {
  let env: LocalEnvironment;
  let result: ScenarioResult;

  beforeAll(async () => {
    const topology = taskProjectionDelivered("pipe");
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `pipe${ulid().slice(-6).toLowerCase()}`,
      topology,
    });
    result = await runScenario(env);
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("runs a pipe and no dispatch function", () => {
    expect(env.deployment.pipes).toHaveLength(1);
    expect(env.deployment.pipes[0]?.messageGroupId).toBe("$.body.detail.order_key");
    // The front door is there as in every local stack (it puts on the bus, it delivers nothing).
    expect(env.deployment.functions.map((f) => f.kind).sort()).toEqual([
      "consumer",
      "front-door",
      "front-door-stream",
      "relay",
    ]);
  });

  it("passes every scenario check", () => {
    expect(result.checks.filter((c) => !c.ok)).toEqual([]);
    expect(result.views.A?.history.map((h) => h.version)).toEqual([1, 2, 3, 4]);
  });
});
