import { afterEach, describe, expect, it } from "vitest";
import type { AgentJournal } from "../../functions/core/agent/agent";
import { MIN_TASK_POLL_MS } from "../../functions/core/agent/task-wait";
import type { StoredState } from "../../functions/core/ports";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { planSweep } from "../../functions/core/sweeper";
import { SdkMcpServer } from "../../functions/integrations/mcp/sdk-server";
import { testRole } from "../../lib/testing";
import { type Envelope, registry } from "../../schemas";
import { DESK_DECISION, DESK_STEP, DESK_TICKET_REQUESTED } from "../fixtures/mcp-desk/events";
import { deskRunId, mcpDeskModule } from "../fixtures/mcp-desk/index";
import { EXPORT_MARKER } from "../fixtures/mcp-desk/local-script";
import { MCP_TOKEN, startTestMcpServer, type TestMcpServer } from "../support/mcp-server";

/**
 * A task that outlives its call, through the role a deployed agent runs (the MCP desk of
 * test/fixtures/mcp-desk on `testRole`, its server the official SDK's on 127.0.0.1): the run
 * waits BLOCKED on the task, the lease sweeper's plan sends the run's decision `deadline` at its
 * next poll, the poll finds the task still working and waits again, then completed: the agent
 * answers with the task's result, and the server created exactly one task.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W4A";
const RUN = deskRunId(TASK);

let server: TestMcpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function exportDesk() {
  server = await startTestMcpServer();
  const port = new SdkMcpServer({ url: server.url, token: async () => MCP_TOKEN });
  const sideEffects = new InMemorySideEffects();
  const t = testRole(mcpDeskModule, { integrations: { mcp: port, sideEffects } });
  const delivered = new Set<string>();
  /** Delivers the run's step commands not delivered yet, until none is left. */
  const drain = async () => {
    for (;;) {
      const next = t.emitted.find((e) => e.event_type === DESK_STEP && !delivered.has(e.event_id));
      if (!next) return;
      delivered.add(next.event_id);
      await t.deliver(next);
    }
  };
  const journal = () => t.state<AgentJournal>({ type: "agent_run", id: RUN });
  /** What the sweeper sends now: the states the due index lists, as it reads them. */
  const swept = async () => {
    const now = t.clock.now();
    const states = await t.store.loadStates(await t.store.due(now, 10));
    return planSweep(states as StoredState<unknown>[], now, registry).messages.map(
      (m) => m.envelope,
    );
  };
  return { server, t, sideEffects, drain, journal, swept };
}

describe("an MCP task that outlives its call", () => {
  it("the run waits on it, the sweeper's deadline polls it, and the agent answers with its result: one task at the server", async () => {
    const desk = await exportDesk();
    desk.server.holdTasks = true;
    const start = desk.t.message(
      DESK_TICKET_REQUESTED,
      { customer_id: "c-12", subject: `the history ${EXPORT_MARKER}` },
      { aggregate: { type: "desk_request", id: TASK }, taskId: TASK },
    );
    await desk.t.deliver(start);
    await desk.drain();
    const waiting = await desk.journal();
    const taskId = desk.server.exports[0]?.taskId as string;
    expect(waiting?.status).toBe("BLOCKED");
    expect(waiting?.waiting).toMatchObject({
      kind: "task",
      tool: "export_history",
      remote_task: { id: taskId, status: "working" },
    });
    // Waiting for the server is no person's business: no fact says a person is needed.
    expect(desk.t.emitted.map((e) => e.event_type)).not.toContain("desk.ticket.needs_person");
    const summary = desk.t.role.summarize?.(waiting);
    expect(summary?.label).toContain(`waits for task ${taskId} (working) of export_history`);
    expect(summary?.waiting).toBeUndefined();
    // Not due yet: the sweeper sends nothing.
    expect(await desk.swept()).toEqual([]);

    // The first poll: still working, so the run waits again, its next poll later.
    desk.t.clock.advance(MIN_TASK_POLL_MS);
    const [first] = await desk.swept();
    expect(first?.event_type).toBe(DESK_DECISION);
    expect(first?.payload).toMatchObject({ decision: "deadline", run_id: RUN });
    await desk.t.deliver(first as Envelope);
    const again = await desk.journal();
    expect(again?.status).toBe("BLOCKED");
    expect(Date.parse(again?.waiting?.deadline ?? "")).toBeGreaterThan(
      desk.t.clock.now().getTime(),
    );
    // The same message delivered late, before the next poll is due, changes nothing.
    await desk.t.deliver(first as Envelope, { receiveCount: 2 });
    expect((await desk.journal())?.step).toBe(again?.step);

    // The task completes; the next poll reads its result and the turn goes on to the answer.
    desk.server.finishHeldTasks();
    desk.t.clock.advance(Date.parse(again?.waiting?.deadline ?? "") - desk.t.clock.now().getTime());
    const [second] = await desk.swept();
    await desk.t.deliver(second as Envelope);
    await desk.drain();
    const done = await desk.journal();
    expect(done?.status).toBe("COMPLETED");
    expect(done?.output).toEqual({ export: "E-1" });
    expect(done?.current_run ?? RUN).toBe(waiting?.current_run ?? RUN);
    const exported = done?.window.filter((s) => s.tool === "export_history").map((s) => s.outcome);
    expect(exported).toEqual([
      `waiting: ${taskId} working`,
      `waiting: ${taskId} working`,
      "succeeded (poll)",
    ]);
    expect(desk.server.calls.export_history).toBe(1);
    expect(desk.server.exports).toHaveLength(1);
  });

  it("a person's decision on a run that waits for a task is refused, naming the task", async () => {
    const desk = await exportDesk();
    desk.server.holdTasks = true;
    const start = desk.t.message(
      DESK_TICKET_REQUESTED,
      { customer_id: "c-13", subject: `the history ${EXPORT_MARKER}` },
      { aggregate: { type: "desk_request", id: TASK }, taskId: TASK },
    );
    await desk.t.deliver(start);
    await desk.drain();
    const taskId = desk.server.exports[0]?.taskId as string;
    const decision = desk.t.message(
      DESK_DECISION,
      {
        run_id: RUN,
        tool_call_id: "call_2",
        decision: "applied",
        output: { text: "done" },
        requested_by: "alice",
      },
      { aggregate: { type: "agent_run", id: RUN }, taskId: TASK },
    );
    await expect(desk.t.deliver(decision)).rejects.toThrow(`it waits for ${taskId}`);
    expect((await desk.journal())?.status).toBe("BLOCKED");
  });
});
