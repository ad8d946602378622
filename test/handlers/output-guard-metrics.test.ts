import { describe, expect, it } from "vitest";
import { guardOutput, guardRecord } from "../../functions/core/output-guard";
import type { ConsumeResult } from "../../functions/core/role";
import {
  guardCounts,
  OUTPUT_GUARD_METRICS,
  recordConsumed,
} from "../../functions/handlers/consumer-metrics";
import type { Observability } from "../../functions/handlers/observe";
import { replyGenerationModule } from "../../functions/roles/customer-support/reply-generation/index";
import type { Envelope } from "../../schemas";
import { taskEvent } from "../support/factories";

/**
 * The output guard's metrics: a consumer counts the guard's records its emitted events carry, one
 * `OutputGuardVerdict` per guarded text by `verdict` and one `OutputGuardFinding` per finding by
 * `kind`, and a refusal raises `output-guard-refusals` under reply generation's rules.
 */

/** An emitted event whose payload carries the guard's record of `text`. */
function guarded(text: string): Envelope {
  const event = taskEvent(1);
  return { ...event, payload: { reply_text: text, output_guard: guardRecord(guardOutput(text)) } };
}

function consumed(emitted: Envelope[]): ConsumeResult {
  const event = taskEvent(1);
  return {
    event,
    status: "applied",
    steps: [
      {
        eventId: event.event_id,
        eventType: event.event_type,
        version: 1,
        status: "applied",
        repaired: false,
        emitted,
      },
    ],
  } as unknown as ConsumeResult;
}

const EMITTED = [
  guarded("Your parcel arrives on 2026-09-03."),
  guarded("See 01KB0Q3V9X7T2M4N6P8R0S1W3Y and 01KB0Q3V9X7T2M4N6P8R0S1W3Z."),
  guarded("Key AKIAIOSFODNN7EXAMPLE, ask bob@example.com."),
  taskEvent(1),
];

describe("output guard metrics", () => {
  it("counts each verdict and each finding's kind of what a record emitted", () => {
    expect(Object.fromEntries(guardCounts(consumed(EMITTED)))).toEqual({
      "verdict:pass": 1,
      "verdict:redact": 1,
      "verdict:refuse": 1,
      "kind:internal_id": 2,
      "kind:secret": 1,
      "kind:other_customer_data": 1,
    });
    expect(guardCounts(consumed([taskEvent(1)])).size).toBe(0);
  });

  it("publishes them with their dimension, and a refusal raises the alarm's metric", () => {
    const single: { name: string; dimension: string; value: string; count: number }[] = [];
    const stored: Record<string, number> = {};
    const metrics = {
      addMetric: (name: string, _unit: string, count: number) => {
        stored[name] = (stored[name] ?? 0) + count;
      },
      singleMetric: () => {
        const dimensions: [string, string][] = [];
        return {
          addDimension: (name: string, value: string) => dimensions.push([name, value]),
          addMetric: (name: string, _unit: string, count: number) => {
            const [dimension = "", value = ""] = dimensions[0] ?? [];
            single.push({ name, dimension, value, count });
          },
        };
      },
    };
    const logger = { info: () => {} };
    recordConsumed(
      consumed(EMITTED),
      5,
      { metrics, logger } as unknown as Observability,
      replyGenerationModule.deployment.attention,
    );
    const published = (name: string) =>
      Object.fromEntries(
        single.filter((m) => m.name === name).map((m) => [`${m.dimension}:${m.value}`, m.count]),
      );
    expect(published(OUTPUT_GUARD_METRICS.verdict)).toEqual({
      "verdict:pass": 1,
      "verdict:redact": 1,
      "verdict:refuse": 1,
    });
    expect(published(OUTPUT_GUARD_METRICS.finding)).toEqual({
      "kind:internal_id": 2,
      "kind:secret": 1,
      "kind:other_customer_data": 1,
    });
    expect(stored.OutputGuardRefused).toBe(1);
  });
});
