import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentRun } from "../../functions/core/agent-run";
import { agentRunKey } from "../../functions/roles/content-agents/content-agent";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { loadChildRuns, startWorkflow, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { runView } from "../../lib/operator/runs";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { definitionOfRun } from "../support/reference";

/**
 * Agent runs as seed 001 §2 describes them, end to end on the local stack: every content agent
 * acknowledges its request when it starts (`node.started`, published by its consumer before the
 * model call), which the orchestrator records (the node RUNNING, started_at); a review that needs
 * an external confirmation goes BLOCKED until an operator confirms it with `agentbus workflow
 * confirm`, or until its deadline (AGENT_CONFIRM_SECONDS) passes and the sweeper times it out.
 */

const STAGE = `arn${ulid().slice(-6).toLowerCase()}`;
const RUN_TIMEOUT = 120_000;
/**
 * How long a BLOCKED review waits for its confirmation: long enough for the operator's two CLI
 * commands to run on a busy machine (each starts a Node.js process), since the confirmation is
 * refused once the deadline has passed.
 */
const CONFIRM_SECONDS = 90;

const reviewOf = (state: OrchestratorState) =>
  runView(state, definitionOfRun(state)).nodes.find((n) => n.id === "review");

describe("agent runs on the local stack", () => {
  let env: LocalEnvironment;
  const cli = (...args: string[]) =>
    localCli(() => env, STAGE, { AGENTBUS_OPERATOR: "alice" })(...args);
  const reviewRun = async (runId: string) =>
    (
      await env.store.load({
        state: { type: "agent_run", id: agentRunKey(runId, "review", 0) },
      })
    ).state?.data as AgentRun | undefined;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: STAGE,
      envOverrides: { AGENT_CONFIRM_SECONDS: String(CONFIRM_SECONDS) },
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "every agent acknowledges its request when it starts: node.started, the node RUNNING before its answer",
    async () => {
      const run = await startWorkflow(env, "ack", "long-form", "tidal power permits");
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      const stepsOf = (node: string) =>
        ended.timeline.filter((t) => t.node_id === node).map((t) => t.event);
      for (const node of ["topic-selection", "writing", "review"])
        expect(stepsOf(node)).toEqual([
          "node.ready",
          "node.released",
          "node.started",
          "node.completed",
        ]);
      // The fact check is a child run whose map has one item per claim, each released and
      // answered, acknowledged.
      const picked = ended.run.nodes["topic-selection"]?.output as
        | { claims?: string[] }
        | undefined;
      const claims = picked?.claims ?? [];
      expect(claims.length).toBeGreaterThan(0);
      expect(stepsOf("fact-check")).toEqual(["node.ready", "child.started", "node.completed"]);
      const [child] = await loadChildRuns(env, ended);
      // `workflow show` of the parent names its child run, and the child's its parent.
      const [parentShown, childShown] = await Promise.all([
        cli("workflow", "show", run.runId),
        cli("workflow", "show", child?.runId ?? ""),
      ]);
      expect(parentShown.stdout).toMatch(
        new RegExp(`child runs.*\\n\\s+fact-check\\s+${child?.runId}`),
      );
      expect(childShown.stdout).toContain(
        `parent      ${run.runId}, node fact-check (generation 0)`,
      );
      const checks = (child?.state?.timeline ?? [])
        .filter((t) => t.node_id === "fact-check")
        .map((t) => t.event);
      expect(checks.slice(0, 3)).toEqual(["node.ready", "node.released", "map.started"]);
      expect(checks.at(-1)).toBe("node.completed");
      expect(checks).toContain("node.started");
      expect(checks.filter((s) => s === "item.released")).toHaveLength(claims.length);
      expect(checks.filter((s) => s === "item.completed")).toHaveLength(claims.length);
      const acks = [...env.observations.envelopes.values()].filter(
        (e) => e.event_type === "node.started" && e.correlation_id === run.correlationId,
      );
      const producers = acks.map((e) => e.producer);
      expect([...new Set(producers)].sort()).toEqual([
        "fact-check",
        "review",
        "topic-selection",
        "writing",
      ]);
      expect(producers.filter((p) => p === "fact-check")).toHaveLength(claims.length);
    },
    RUN_TIMEOUT + 30_000,
  );

  it(
    "a review BLOCKED on a confirmation resumes when an operator confirms it, and the run completes",
    async () => {
      const run = await startWorkflow(
        env,
        "blocked",
        "long-form",
        `${NEEDS_CONFIRMATION_MARKER} a quote on grid fees`,
      );
      const blocked = await waitForRunEnd(
        env,
        run.runId,
        RUN_TIMEOUT,
        (s) => s.leases?.review?.blocked !== undefined || s.run.status !== "RUNNING",
      );
      expect(blocked.run.status).toBe("RUNNING");
      expect(reviewOf(blocked)?.agent).toMatchObject({ state: "BLOCKED" });
      expect(blocked.leases?.review?.started_at).toEqual(expect.any(String));
      expect((await reviewRun(run.runId))?.state).toBe("BLOCKED");

      // The confirmation is one of the approvals, answered by `agentbus approve <run> --step`.
      const listed = await cli("approvals", "--json");
      const since = blocked.leases?.review?.blocked?.since ?? "";
      expect(JSON.parse(listed.stdout)).toContainEqual(
        expect.objectContaining({
          kind: "confirmation",
          id: run.runId,
          step: "review",
          action: "resume review",
          input: { question: expect.any(String) },
          since,
          deadline: blocked.leases?.review?.blocked?.confirm_by,
        }),
      );
      const printed = await cli("approvals");
      expect(printed.stdout).toContain(
        `agentbus approve ${run.runId} --step review --since ${since}`,
      );
      // An answer given to another wait of the node is refused, nothing sent.
      const stale = await cli(
        "approve",
        run.runId,
        "--step",
        "review",
        "--since",
        "2026-01-01T00:00:00.000Z",
      );
      expect(stale.code).toBe(2);
      expect(stale.stderr).toContain("no longer waits for what was answered");
      const confirmed = await cli(
        "approve",
        run.runId,
        "--step",
        "review",
        "--since",
        since,
        "--reason",
        "the source confirmed the quote",
      );
      expect(confirmed.code, confirmed.stderr).toBe(0);
      // The answer is on the audit topic, as every approval answered is.
      const auditId =
        /recorded in the audit trail as operator\.approval\.answered (\S+)/.exec(
          confirmed.stdout,
        )?.[1] ?? "";
      const audited = await waitUntil(
        "the approval's audit record",
        async () => (await env.store.inboxRecords("audit", [auditId]))[0]?.envelope,
        RUN_TIMEOUT,
      );
      expect(audited).toMatchObject({
        event_type: "operator.approval.answered",
        payload: {
          target: run.runId,
          step: "review",
          decision: "approve",
          reason: "the source confirmed the quote",
          requested_by: "alice",
          via: "cli",
        },
      });
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      const agentRun = await reviewRun(run.runId);
      expect(agentRun?.state).toBe("COMPLETED");
      expect(agentRun?.history.map((h) => h.trigger)).toEqual(
        expect.arrayContaining(["TaskBlocked", "ExternalUnblocked", "TaskCompleted"]),
      );
      const steps = ended.timeline.filter((t) => t.node_id === "review").map((t) => t.event);
      expect(steps).toEqual([
        "node.ready",
        "node.released",
        "node.started",
        "node.blocked",
        "node.unblocked",
        "node.started",
        "node.completed",
      ]);

      // Nothing is BLOCKED any more: a second confirmation is refused before it is sent.
      const again = await cli("approve", run.runId, "--step", "review");
      expect(again.code).toBe(2);
      expect(again.stderr).toContain("not BLOCKED");
    },
    2 * RUN_TIMEOUT + 30_000,
  );

  it(
    "a BLOCKED review whose deadline passes fails with agent_run.confirm_timeout, and the run ends",
    async () => {
      const run = await startWorkflow(
        env,
        "timeout",
        "long-form",
        `${NEEDS_CONFIRMATION_MARKER} a quote on water prices`,
      );
      const blocked = await waitForRunEnd(
        env,
        run.runId,
        RUN_TIMEOUT,
        (s) => s.leases?.review?.blocked !== undefined || s.run.status !== "RUNNING",
      );
      const confirmBy = Date.parse(blocked.leases?.review?.blocked?.confirm_by ?? "");
      const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      expect(Date.now()).toBeGreaterThanOrEqual(confirmBy);
      expect(ended.run.status).toBe("PARTIAL");
      expect(ended.run.nodes.review).toMatchObject({
        state: "FAILED",
        error: { code: "agent_run.confirm_timeout", error_class: "unknown_outcome" },
      });
      const agentRun = await reviewRun(run.runId);
      expect(agentRun?.state).toBe("FAILED");
      expect(agentRun?.history.at(-1)?.trigger).toBe("ExternalConfirmTimeout");
      const reports = [...env.observations.envelopes.values()].filter(
        (e) => e.event_type === "node.confirm.expired" && e.correlation_id === run.correlationId,
      );
      expect(reports.length).toBeGreaterThanOrEqual(1);
    },
    2 * RUN_TIMEOUT + CONFIRM_SECONDS * 1000,
  );
});
