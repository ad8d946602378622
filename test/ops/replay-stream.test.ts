import { describe, expect, it } from "vitest";
import { outputId } from "../../lib/infra/output-ids";
import { ReplayRefused } from "../../lib/operator/replay-plan";
import { planStreamReplays, streamGroupTypes } from "../../lib/operator/replay-stream";

const now = new Date("2026-12-05T12:00:00Z");
const window = { from: new Date("2026-12-05T10:00:00Z"), to: new Date("2026-12-05T11:00:00Z") };
const GROUP = "conversation-projection";
const outputs = { [`${outputId(GROUP)}QueueUrl`]: "http://127.0.0.1:1/q/conversation-projection" };

describe("replay to a group that reads the events table's stream", () => {
  it("knows the reference stream groups and their types; the task projection is not one", () => {
    const types = streamGroupTypes();
    expect([...types.keys()]).toEqual([GROUP]);
    expect(types.get(GROUP)).toContain("conversation.message.accepted");
  });

  it("plans one replay per stream group to its queue, and none for a bus group", () => {
    const plans = planStreamReplays("dev", outputs, [GROUP, "task-projection"], window, now);
    expect(plans).toHaveLength(1);
    expect(plans[0]).toMatchObject({
      group: GROUP,
      queueUrl: outputs[`${outputId(GROUP)}QueueUrl`],
    });
    expect(plans[0]?.name).toMatch(/^agentbus-dev-stream-/);
    expect(planStreamReplays("dev", outputs, ["task-projection"], window, now)).toEqual([]);
  });

  it("refuses a window older than the stream keeps, naming rebuild, and a stack without the queue", () => {
    const old = { from: new Date("2026-12-04T10:00:00Z"), to: window.to };
    expect(() => planStreamReplays("dev", outputs, [GROUP], old, now)).toThrow(ReplayRefused);
    expect(() => planStreamReplays("dev", outputs, [GROUP], old, now)).toThrow(
      /keeps 24 hours.*agentbus rebuild conversation-projection/,
    );
    expect(() => planStreamReplays("dev", {}, [GROUP], window, now)).toThrow(/no queue of/);
  });
});
