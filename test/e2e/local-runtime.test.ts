import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { runScenario, type ScenarioResult } from "../../lib/dev/local/scenario";
import { renderSummary, withObservedDuplicates } from "../../lib/dev/local/trace";
import { renderTraceText } from "../../lib/operator/render-text";
import { traceOf } from "../../lib/operator/source";
import { emulator } from "../support/aws";

/**
 * The foundation scenario end to end through the local runtime: the synthesized stack deployed to
 * the emulator, the relay, dispatch and consumer handlers run in-process behind emulated event
 * source mappings. A unique stage keeps its resources apart from other test files.
 */
describe("local runtime, end to end", () => {
  let env: LocalEnvironment;
  let result: ScenarioResult;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `e2e${ulid().slice(-6).toLowerCase()}`,
    });
    result = await runScenario(env);
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("passes every scenario check", () => {
    const failed = result.checks.filter((c) => !c.ok);
    expect(failed).toEqual([]);
  });

  it("stores each task view with its stream applied once, in order", () => {
    expect(result.views.A?.history.map((h) => h.version)).toEqual([1, 2, 3, 4]);
    expect(result.views.A?.status).toBe("delivered");
    expect(result.views.B?.history.map((h) => h.version)).toEqual([1, 2, 3]);
    expect(result.views.C).toMatchObject({
      status: "accepted",
      feedback: { count: 1, rating_total: 5 },
    });
  });

  it("records the expired discard in the inbox with its reason", async () => {
    const expired = [...env.observations.deliveries].find(([, ds]) =>
      ds.some((d) => d.reason === "expired"),
    );
    expect(expired).toBeDefined();
    const [row] = await env.store.inboxRecords("task-projection", [expired?.[0] ?? ""]);
    expect(row).toMatchObject({ outcome: "discarded", reason: "expired" });
  });

  it("dead-letters the poison message with its reason, once per group that got it, and nothing else", () => {
    const poisonId = result.deadLetters[0]?.eventId;
    expect(result.deadLetters.length).toBeGreaterThan(0);
    expect(result.deadLetters.length).toBeLessThanOrEqual(env.groups.length);
    expect(new Set(result.deadLetters.map((d) => d.queue)).size).toBe(result.deadLetters.length);
    for (const letter of result.deadLetters) {
      expect(letter).toMatchObject({ code: "envelope.invalid", eventId: poisonId });
      expect(letter.reason).toMatch(/correlation_id/);
    }
  });

  it("traces each correlation with causation edges and per-group outcomes", async () => {
    const view = await traceOf(env.ops, result.correlations[1] ?? "");
    if (!view) throw new Error("no trace of task B");
    const trace = renderTraceText(withObservedDuplicates(view, env.observations));
    expect(trace).toMatch(
      /task\.accepted \[task\/\S+ v1\][^\n]*\n(\s*[│ ]\s+\S+: [^\n]+\n)*\s*[│ ]\s+task-projection: applied \(gap repair\), duplicate×1/,
    );
    expect(trace).toMatch(/└─ plan\.created \[task\/\S+ v2\]/);
    expect(renderSummary(env.groups, env.observations)).toMatch(
      /task-projection\s+\d+\s+\d+\s+1 expired/,
    );
  });
});
