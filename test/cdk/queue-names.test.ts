import { describe, expect, it } from "vitest";
import { defineTopology } from "../../lib/infra/topology";
import { synthesizeStack } from "./synth";

/**
 * Two queues of one name would be one queue: a stack whose group's name makes another queue's is
 * refused when it is built, naming the name and both owners (lib/infra/queue-names.ts).
 */
const projection = (name: string, ordering: "fifo" | "none") => ({
  name,
  role: { group: name, subscriptions: ["task.accepted"] },
  handler: "functions/roles/task-projection/handler.ts",
  ordering,
});

const stackOf = (groups: ReturnType<typeof projection>[]) => () =>
  synthesizeStack({ topology: defineTopology({ topics: ["events"], groups }), workflows: [] });

describe("queue names", () => {
  it("refuses a group whose queue is another group's buffer queue, naming both", () => {
    expect(stackOf([projection("tally", "fifo"), projection("tally-buffer", "none")])).toThrow(
      `rename a group: queue name "agentbus-dev-tally-buffer" is group tally's buffer queue and group tally-buffer's queue`,
    );
  });

  it("refuses a group named as the A2A push queue is", () => {
    expect(stackOf([projection("a2a-push", "fifo")])).toThrow(
      `queue name "agentbus-dev-a2a-push.fifo" is group a2a-push's queue and the A2A push queue`,
    );
  });

  it("builds a stack whose queues all have names of their own", () => {
    expect(stackOf([projection("tally", "fifo"), projection("tally-log", "none")])).not.toThrow();
  });
});
