import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { newRun } from "../../functions/core/agent-run";
import { decideCancel } from "../../functions/roles/content-agents/cancel";
import { decideConfirm } from "../../functions/roles/content-agents/confirm";
import { resolveAgent } from "../../functions/roles/content-agents/settings";
import { ORCHESTRATOR } from "../../functions/roles/orchestrator/orchestrator";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../schemas";
import { orchestrator, referenceLocalModel } from "../support/reference";

/**
 * The orchestrator and the content agents read payloads as the pipeline validated them (once, by
 * the registry, upcast to the newest version): each handler gets the payload of its own type,
 * and an event of another type fails `payload.unexpected_type` instead of being parsed again.
 */

const NOW = new Date("2026-09-01T10:00:00.000Z");
const assignment = { node_id: "writing", generation: 0 };

/** A message as the pipeline hands it to a role: parsed (and upcast) by the registry. */
function parsed(
  type: string,
  aggregate: Envelope["aggregate"],
  payload: unknown,
  schemaVersion = 1,
): Envelope {
  const result = registry.parse({
    event_id: ulid(),
    event_type: type,
    schema_version: schemaVersion,
    occurred_at: NOW.toISOString(),
    correlation_id: `corr_${ulid()}`,
    causation_id: null,
    task_id: `task_${ulid()}`,
    aggregate,
    producer: "test",
    attempt: 1,
    payload,
  });
  if (!result.ok) throw new Error(result.message);
  return result.envelope;
}

const onRun = (runId: string) => ({ type: "dag_run", id: runId, version: 0 });
const context = { now: NOW, receiveCount: 1, stored: undefined, repaired: false };

describe("orchestrator payloads", () => {
  it("takes the run of each event from its payload: commands to the run and agents' outcomes", () => {
    const runId = `run_${ulid()}`;
    const release = parsed("workflow.release.requested", onRun(runId), { run_id: runId });
    const completed = parsed(
      "writing.completed",
      { type: "agent_run", id: `ar_${ulid()}`, version: 1 },
      { run_id: runId, ...assignment, output: { title: "Tides", body: "The moon pulls." } },
    );
    for (const event of [release, completed])
      expect(ORCHESTRATOR.stateOf?.(event)).toEqual({ type: "dag_run", id: runId });
  });

  it("names the type of an event it has no handler for, instead of reading its payload", () => {
    const runId = `run_${ulid()}`;
    const ended = parsed(
      "workflow.rejected",
      { type: "dag_run", id: runId, version: 1 },
      { run_id: runId, request: "start", code: "x", message: "no" },
    );
    expect(() => ORCHESTRATOR.stateOf?.(ended)).toThrow(
      expect.objectContaining({ code: "orchestrator.unhandled" }),
    );
  });

  it("starts a run from a v1 start, which reaches decide upcast to v2 (workflow_name)", async () => {
    const runId = `run_${ulid()}`;
    const start = parsed(
      "workflow.start.requested",
      onRun(runId),
      { run_id: runId, workflow: "long-form", request: { topic_hint: "tides" } },
      1,
    );
    expect(start.schema_version).toBe(2);
    const decision = await orchestrator.decide(undefined, start, context);
    expect((decision.state as OrchestratorState).workflow).toBe("long-form");
    expect(decision.emit?.map((e) => e.type)).toEqual(["topic_selection.requested"]);
  });

  it("keeps refusing a command whose aggregate is another run than its payload names", async () => {
    const runId = `run_${ulid()}`;
    const release = parsed("workflow.release.requested", onRun(`run_${ulid()}`), {
      run_id: runId,
    });
    await expect(orchestrator.decide(undefined, release, context)).rejects.toMatchObject({
      code: "workflow.aggregate_mismatch",
    });
  });
});

describe("content agent commands", () => {
  const writing = resolveAgent({ role: "writing", model: referenceLocalModel() });
  const runId = `run_${ulid()}`;
  const command = (type: string, payload: Record<string, unknown>) =>
    parsed(type, { type: "dag_run", id: runId, version: 3 }, { run_id: runId, ...payload });
  const fresh = () =>
    newRun({ agent_run_key: `arun_${ulid()}`, task_id: "task_1", role: "writing", now: NOW });

  it("a cancel is read as the cancel command it is", () => {
    const cancel = command("writing.cancel.requested", { ...assignment, reason: "rerun" });
    const decision = decideCancel(undefined, cancel, fresh, NOW);
    expect(decision.state?.state).toBe("CANCELLED");
    expect(decision.state?.history.at(-1)?.reason).toContain(`for run ${runId} node writing`);
  });

  it("a cancel or a confirmation refuses a command of another type", async () => {
    const request = command("writing.requested", {
      ...assignment,
      attempt: 1,
      input: {},
      run_input: { topic_hint: "tides" },
    });
    expect(() => decideCancel(undefined, request, fresh, NOW)).toThrow(
      expect.objectContaining({ code: "payload.unexpected_type" }),
    );
    const otherRole = command("review.confirm.requested", {
      node_id: "review",
      generation: 0,
      attempt: 1,
      outcome: "confirmed",
      question: "is the source right?",
      input: {},
      run_input: { topic_hint: "tides" },
    });
    await expect(
      decideConfirm(writing, undefined, otherRole, { now: NOW, runId: "agrun_a" }, () =>
        Promise.resolve({}),
      ),
    ).rejects.toMatchObject({
      code: "payload.unexpected_type",
      message: expect.stringContaining("writing.confirm.requested, got review.confirm.requested"),
    });
  });
});
