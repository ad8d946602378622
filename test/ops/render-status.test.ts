import type { GetMetricDataCommand } from "@aws-sdk/client-cloudwatch";
import { describe, expect, it } from "vitest";
import { renderStatusText } from "../../lib/operator/render-text";
import type { OpsStack } from "../../lib/operator/stack";
import { lastSweep } from "../../lib/operator/status";
import { at, overview } from "../console/fixtures";

/** `agentbus status` as text: what waits for a person says since when, where that is known. */
describe("renderStatusText", () => {
  it("gives each waiting item since when it waits, or its last change when that is not known", () => {
    const { status, waiting } = overview();
    const lines = renderStatusText(status, waiting).split("\n");
    expect(lines).toContain(`  held reply     conversation conv_01J9Z3HELD (since ${at(4_500)})`);
    // The failed run carries no waiting time (as read from a legacy index): its last change.
    expect(lines.find((l) => l.includes("FAILED") && l.includes(" run "))).toMatch(
      new RegExp(`\\(${at(48_010).replace(/[.]/g, "\\.")}\\)$`),
    );
  });

  it("counts and lists the conversations handed off to a person", () => {
    const { status, waiting } = overview();
    const lines = renderStatusText(status, waiting).split("\n");
    expect(lines).toContain("  handed off            1");
    expect(lines).toContain(
      `  handed off     conversation conv_01J9Z3HANDOFF (since ${at(6_000)})`,
    );
  });

  it("shows only what the stack serves: no runs, sweeper, held replies or hand-offs where it has none of them", () => {
    const { status } = overview();
    const all = renderStatusText(status).split("\n");
    const application = renderStatusText({ ...status, features: [] }).split("\n");
    const gone = all.filter((line) => !application.includes(line));
    expect(gone.map((line) => line.trim().split(/\s{2,}|:/)[0])).toEqual([
      "sweeper",
      "runs",
      "held replies",
      "FAILED nodes",
      "handed off",
    ]);
    expect(application).toEqual(
      expect.arrayContaining([
        "not served: this deployment has no workflow runs: none of its roles takes workflow.start.requested",
        "not served: this deployment has no customers' conversations: none of its roles takes conversation.message.received",
        "  unknown side effects  1",
        "  NEEDS_HUMAN nodes     0",
      ]),
    );
    expect(all.filter((line) => line.startsWith("not served"))).toEqual([]);
  });

  it("says when the sweeper last swept, or that CloudWatch has no sweep", () => {
    const { status } = overview();
    expect(renderStatusText({ ...status, lastSweepAt: at(9_000) })).toContain(
      `sweeper: last sweep ${at(9_000)}`,
    );
    const { lastSweepAt: _swept, ...unknown } = status;
    expect(renderStatusText(unknown)).toContain(
      "sweeper: last sweep - (none in the last hour, or no CloudWatch data)",
    );
  });
});

describe("lastSweep", () => {
  const stackAnswering = (answer: () => unknown) => {
    const asked: GetMetricDataCommand[] = [];
    const stack = {
      cloudwatch: {
        send: async (command: GetMetricDataCommand) => {
          asked.push(command);
          return answer();
        },
      },
    } as unknown as OpsStack;
    return { stack, asked };
  };

  it("is the newest datapoint of the sweeper's LeaseExpired, which every sweep publishes", async () => {
    const newest = new Date("2026-12-02T19:58:00.000Z");
    const { stack, asked } = stackAnswering(() => ({
      MetricDataResults: [{ Id: "sweeps", Timestamps: [newest, new Date("2026-12-02T19:57:00Z")] }],
    }));
    expect(await lastSweep(stack)).toBe(newest.toISOString());
    expect(asked[0]?.input.MetricDataQueries?.[0]?.MetricStat?.Metric).toEqual({
      Namespace: "AgentBus",
      MetricName: "LeaseExpired",
      Dimensions: [{ Name: "service", Value: "lease-sweeper" }],
    });
  });

  it("is undefined with no sweep in the hour, or when CloudWatch cannot be read", async () => {
    const quiet = stackAnswering(() => ({ MetricDataResults: [{ Id: "sweeps", Timestamps: [] }] }));
    expect(await lastSweep(quiet.stack)).toBeUndefined();
    const denied = stackAnswering(() => {
      throw new Error("AccessDenied");
    });
    expect(await lastSweep(denied.stack)).toBeUndefined();
  });
});
