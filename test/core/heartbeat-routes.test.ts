import { describe, expect, it } from "vitest";
import { dispatch, messageGroupOf } from "../../functions/core/dispatch";
import { buildHeartbeat } from "../../functions/core/emit";
import { type HeartbeatTarget, heartbeatSendsOf } from "../../functions/core/heartbeat-routes";
import type { DeadLetterSink, FifoMessage } from "../../functions/core/ports";
import { nodeHeartbeat } from "../../functions/core/step-role";
import { type Envelope, registry } from "../../schemas";
import { feedback, makeDeps, newTaskId } from "./fixtures";

/**
 * A consumer's heartbeats go straight to the queues of the groups whose rules take them
 * (functions/core/heartbeat-routes.ts): a relay group's FIFO message is the one its dispatch
 * function would send (message group or tenant lane, event id as deduplication id), an unordered
 * group's is the envelope; a group whose rule does not take it gets nothing.
 */

const UNSEQUENCED = { aggregate: { version: [0] } };

const orchestrator: HeartbeatTarget = {
  group: "orchestrator",
  queue: "agentbus-test-orchestrator.fifo",
  rules: { events: { "detail-type": ["node.started", "node.heartbeat"] } },
};
const audit: HeartbeatTarget = {
  group: "audit",
  queue: "agentbus-test-audit",
  rules: { events: { "detail-type": ["node.started", "node.heartbeat"], detail: UNSEQUENCED } },
  unordered: true,
};
/** A relay group that takes only the acknowledgement, in tenant lanes. */
const startedOnly: HeartbeatTarget = {
  group: "run-board",
  queue: "agentbus-test-run-board.fifo",
  tenantConcurrency: 3,
  rules: { events: { "detail-type": ["node.started"] } },
};

/** The acknowledgement (`first`) or a later heartbeat of a writing step, caused by its request. */
function beatOf(which: "first" | "later", tenant_id = "acme"): Envelope {
  const { deps } = makeDeps();
  const spec = nodeHeartbeat(
    { run_id: "run_beats1", node_id: "writing", generation: 1, attempt: 1 },
    "writing",
    120,
    "strun_beats1",
  );
  const cause = feedback(newTaskId(), 1, { tenant_id });
  const { first, ...later } = spec;
  return buildHeartbeat(which === "first" && first ? first : later, cause, "writing", deps, 1);
}

/** What the dispatch function sends the group's FIFO queue for `envelope`. */
async function dispatched(envelope: Envelope, tenantConcurrency?: number) {
  const sent: FifoMessage[] = [];
  const deadLetters: DeadLetterSink = {
    send: async () => {
      throw new Error("nothing is dead-lettered");
    },
  };
  await dispatch(
    [{ recordId: "r1", envelope, rawBody: JSON.stringify(envelope) }],
    registry,
    {
      send: async (messages) => {
        sent.push(...messages);
        return [];
      },
    },
    deadLetters,
    tenantConcurrency,
  );
  return sent.map(({ id: _, ...m }) => m);
}

describe("heartbeat routes", () => {
  it("send an acknowledgement to each group whose rule takes it: a relay group's message as its dispatch function builds it, the audit group's the envelope", async () => {
    const ack = beatOf("first");
    expect(ack.event_type).toBe("node.started");
    const sends = heartbeatSendsOf([orchestrator, audit, startedOnly], ack);
    expect(sends.map((s) => s.target.group)).toEqual(["orchestrator", "audit", "run-board"]);
    const [toOrchestrator, toAudit, toBoard] = sends;
    expect([toOrchestrator?.message]).toEqual(await dispatched(ack));
    expect(toOrchestrator?.message).toMatchObject({
      groupId: "run_beats1",
      deduplicationId: ack.event_id,
    });
    // A standard queue: no message group, no deduplication id; the body is the envelope.
    expect(toAudit?.message).toEqual({ body: JSON.stringify(ack) });
    // Tenant lanes: the lane its dispatch function picks for the run's order key.
    expect([toBoard?.message]).toEqual(await dispatched(ack, 3));
    expect(toBoard?.message.groupId).toBe(messageGroupOf(ack, 3));
    expect(toBoard?.message.groupId).toMatch(/^tenant\/acme\/[0-2]$/);
  });

  it("leave out a group whose rule does not take the heartbeat", () => {
    const beat = beatOf("later");
    expect(beat.event_type).toBe("node.heartbeat");
    const sends = heartbeatSendsOf([orchestrator, audit, startedOnly], beat);
    expect(sends.map((s) => s.target.group)).toEqual(["orchestrator", "audit"]);
    // A pattern that takes only stored events (version > 0) never takes a heartbeat.
    const storedOnly: HeartbeatTarget = {
      ...audit,
      rules: {
        events: { "detail-type": ["node.heartbeat"], detail: { aggregate: { version: [1] } } },
      },
    };
    expect(heartbeatSendsOf([storedOnly], beat)).toEqual([]);
    // Rules on another topic do not take it either: heartbeats travel on the events topic.
    const onCommands: HeartbeatTarget = {
      ...orchestrator,
      rules: { commands: orchestrator.rules.events },
    };
    expect(heartbeatSendsOf([onCommands], beat)).toEqual([]);
  });

  it("send nothing when the stack names no target (the bus alone carries the heartbeat)", () => {
    expect(heartbeatSendsOf([], beatOf("first"))).toEqual([]);
  });
});
