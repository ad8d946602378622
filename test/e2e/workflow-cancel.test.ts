import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentRun } from "../../functions/core/agent-run";
import { agentRunKey } from "../../functions/roles/content-agents/content-agent";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { readDeadLetters } from "../../lib/dev/local/scenario/dead-letters";
import {
  loadRun,
  runCommand,
  startWorkflow,
  waitForRunEnd,
} from "../../lib/dev/local/scenario/workflow";
import type { Envelope } from "../../schemas";
import { auditedOutcomes, auditRecord } from "../support/audit";
import { emulator } from "../support/aws";
import { type CliResult, localCli } from "../support/cli";
import { groupOutcome, messageOutcome } from "../support/outcomes";

/**
 * `agentbus workflow cancel` end to end on the local stack: a long-form run whose
 * agents are paused (so its first request waits in the topic-selection queue) is cancelled with the
 * CLI, run as a child process as an operator would. The run ends CANCELLED, the queued request is
 * discarded `cancelled` by its agent without a model call, the agent gets the cancel on its command
 * channel, the audit group records the command and the run's end, a repeated cancel changes
 * nothing and a cancel the CLI refuses sends nothing. A run started for a tenant is listed for
 * that tenant only and cancelled in it. A unique stage keeps its resources apart.
 */

const STAGE = `wfc${ulid().slice(-6).toLowerCase()}`;
const RUN_TIMEOUT = 120_000;
const REASON = "the story was pulled";

describe("workflow cancel on the local stack", () => {
  let env: LocalEnvironment;

  const cli = (operator: string | undefined, ...args: string[]) =>
    localCli(
      () => env,
      STAGE,
      operator === undefined ? {} : { AGENTBUS_OPERATOR: operator },
    )(...args);

  /** Every workflow.cancel.requested any group of the stack took for the run. */
  const cancelsSeen = (runId: string): Envelope[] =>
    [...env.observations.envelopes.values()].filter(
      (e) =>
        e.event_type === "workflow.cancel.requested" &&
        (e.payload as { run_id?: string }).run_id === runId,
    );

  const runStream = (runId: string) =>
    env.store.readStream({ type: "dag_run", id: runId }, 1, 1000);

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "cancels a running run: CANCELLED, its queued request discarded without a model call, recorded, once",
    async () => {
      for (const group of CONTENT_ROLES) env.runtime.pauseGroup(group);
      const run = await startWorkflow(env, "cancel", "long-form", "tidal power in estuaries");
      let sent: CliResult;
      try {
        await waitForRunEnd(
          env,
          run.runId,
          RUN_TIMEOUT,
          (s) => s.run.nodes["topic-selection"]?.state === "RUNNING",
        );
        sent = await cli("alice", "workflow", "cancel", run.runId, "--reason", REASON);
        expect(sent.code, sent.stderr).toBe(0);
        const ended = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
        expect(ended.run.status).toBe("CANCELLED");
        for (const node of ["topic-selection", "fact-check", "writing", "review"])
          expect(ended.run.nodes[node]?.state, node).toBe("CANCELLED");
      } finally {
        for (const group of CONTENT_ROLES) env.runtime.resumeGroup(group);
      }
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });

      expect(sent.stdout).toMatch(
        /^workflow\.cancel\.requested sent to agentbus-wfc\w+-commands$/m,
      );
      expect(sent.stdout).toContain(`run_id          ${run.runId}`);
      expect(sent.stdout).toContain("requested_by    alice");
      expect(sent.stdout).toContain(`reason          "${REASON}"`);
      const commandId = /event_id\s+(\S+)/.exec(sent.stdout)?.[1] ?? "";

      // The run's stream: the request, its cancel on the agent's command channel, the run's end.
      const stream = await runStream(run.runId);
      expect(stream.map((e) => e.event_type)).toEqual([
        "topic_selection.requested",
        "topic_selection.cancel.requested",
        "workflow.cancelled",
      ]);
      const [request, cancel, cancelled] = stream as [Envelope, Envelope, Envelope];
      expect(cancel.payload).toEqual({
        run_id: run.runId,
        node_id: "topic-selection",
        generation: 0,
        reason: "run_cancelled",
      });
      expect(cancelled.causation_id).toBe(commandId);
      expect(cancelled.payload).toMatchObject({
        run_id: run.runId,
        requested_by: "alice",
        reason: REASON,
        result: {
          status: "CANCELLED",
          completed: [],
          cancelled: ["fact-check", "review", "topic-selection", "writing"],
        },
      });

      // The agent dropped the queued request (no model call) and recorded the cancel.
      const [dropped] = await env.store.inboxRecords("topic-selection", [request.event_id]);
      expect(dropped).toMatchObject({ outcome: "discarded", reason: "cancelled" });
      const told = await groupOutcome(env.store, "topic-selection", cancel);
      expect(told?.outcome).toBe("applied");
      expect(env.model.calls({ taskId: request.task_id })).toEqual([]);
      const agentRun = await env.store.load({
        state: { type: "agent_run", id: agentRunKey(run.runId, "topic-selection", 0) },
      });
      expect((agentRun.state?.data as AgentRun | undefined)?.state).toBe("CANCELLED");

      // The audit trail: the operator's command (when, from where), which no stream holds; the end
      // it caused (who, why) is the run's stored event above, which the audit group does not copy.
      const audited = await auditedOutcomes(env.store, [commandId, cancelled.event_id]);
      expect(audited.map((r) => [r.eventType, r.outcome]).sort()).toEqual([
        ["workflow.cancel.requested", "applied"],
      ]);
      const record = await auditRecord(env.store, commandId);
      expect(record).toMatchObject({
        event_type: "workflow.cancel.requested",
        producer: "agentbus-cli",
        aggregate: { type: "dag_run", id: run.runId, version: 0 },
      });
      const accepted = await messageOutcome(env.store, "orchestrator", commandId);
      expect(accepted?.outcome).toBe("applied");
      expect(await readDeadLetters(env)).toEqual([]);

      // Cancel again: the CLI refuses (exit 2, nothing sent); the same request put on the bus
      // directly reaches the orchestrator and changes nothing.
      const before = await env.store.load({ state: { type: "dag_run", id: run.runId } });
      const again = await cli("alice", "workflow", "cancel", run.runId);
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(/already ended CANCELLED.*nothing sent/);
      expect(again.stdout).toBe("");
      const direct = runCommand("workflow.cancel.requested", run.runId, run.correlationId, {
        requested_by: "bob",
      });
      await putOnBus(env, "commands", [direct]);
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      const noop = await groupOutcome(env.store, "orchestrator", direct);
      expect(noop?.outcome).toBe("applied");
      // The run is as it was; only its record of the messages it handled has the new one.
      const after = await env.store.load({ state: { type: "dag_run", id: run.runId } });
      expect(after.state?.version).toBe(before.state?.version);
      expect(after.state?.gate?.recent[direct.event_id]).toBeGreaterThan(0);
      expect(await loadRun(env, run.runId)).toEqual(before.state?.data);
      expect(await runStream(run.runId)).toHaveLength(stream.length);
      expect(
        cancelsSeen(run.runId)
          .map((e) => e.event_id)
          .sort(),
      ).toEqual([commandId, direct.event_id].sort());
      expect(env.model.calls({ taskId: request.task_id })).toEqual([]);
    },
    4 * RUN_TIMEOUT,
  );

  it(
    "a tenant's run: started with --tenant, listed for that tenant only, cancelled in its tenant",
    async () => {
      const statusOf = async (tenant: string) => {
        const result = await cli(undefined, "status", "--tenant", tenant, "--json");
        expect(result.code, result.stderr).toBe(0);
        return JSON.parse(result.stdout) as { tenant: string; runsByStatus: object };
      };
      for (const group of CONTENT_ROLES) env.runtime.pauseGroup(group);
      let runId = "";
      let sent: CliResult;
      try {
        const started = await cli(
          "alice",
          "workflow",
          "start",
          "--kind",
          "long-form",
          "--topic",
          "tides",
          "--tenant",
          "acme",
        );
        expect(started.code, started.stderr).toBe(0);
        expect(started.stdout).toContain("tenant_id       acme");
        runId = /run_id\s+(\S+)/.exec(started.stdout)?.[1] ?? "";
        await waitForRunEnd(
          env,
          runId,
          RUN_TIMEOUT,
          (s) => s.run.nodes["topic-selection"]?.state === "RUNNING",
        );
        // The stage's other runs are the default tenant's: acme has this one, globex none.
        expect(await statusOf("acme")).toMatchObject({
          tenant: "acme",
          runsByStatus: { RUNNING: 1 },
        });
        expect((await statusOf("globex")).runsByStatus).toEqual({});
        sent = await cli("alice", "workflow", "cancel", runId, "--reason", REASON);
        expect(sent.code, sent.stderr).toBe(0);
        expect((await waitForRunEnd(env, runId, RUN_TIMEOUT)).run.status).toBe("CANCELLED");
      } finally {
        for (const group of CONTENT_ROLES) env.runtime.resumeGroup(group);
      }
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      expect(sent.stdout).toContain("tenant_id       acme");
      expect(cancelsSeen(runId).map((e) => e.tenant_id)).toEqual(["acme"]);
      // What the start and the cancel caused is acme's, the run's end included.
      const stream = await runStream(runId);
      expect(stream.map((e) => e.event_type)).toContain("workflow.cancelled");
      expect(new Set(stream.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
      expect((await statusOf("acme")).runsByStatus).toEqual({ CANCELLED: 1 });
    },
    4 * RUN_TIMEOUT,
  );

  it(
    "refuses a bad run id, an unknown run, a long reason or no requester with exit code 2, and sends nothing",
    async () => {
      const unknown = `run_${ulid()}`;
      const cases: [string | undefined, string[], RegExp][] = [
        ["alice", ["workflow", "cancel", unknown], /no such run: run_\w+.*nothing sent/],
        ["alice", ["workflow", "cancel", "run with spaces"], /must be a run id/],
        ["alice", ["workflow", "cancel", "user_13800138000"], /must be a run id/],
        [
          "alice",
          ["workflow", "cancel", unknown, "--reason", "r".repeat(1001)],
          /refusing to send an invalid workflow.cancel.requested[\s\S]*payload.reason/,
        ],
        [
          "",
          ["workflow", "cancel", unknown],
          /refusing to send an invalid workflow.cancel.requested[\s\S]*payload.requested_by/,
        ],
        ["alice", ["workflow", "cancel"], /missing required argument 'run-id'/],
      ];
      const results = await Promise.all(cases.map(([who, args]) => cli(who, ...args)));
      results.forEach((result, i) => {
        const [, args, message] = cases[i] as (typeof cases)[number];
        expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(2);
        expect(result.stderr).toMatch(message);
        expect(result.stdout).toBe("");
      });
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      expect(cancelsSeen(unknown)).toEqual([]);
      expect(await env.store.load({ state: { type: "dag_run", id: unknown } })).toMatchObject({
        state: undefined,
      });
    },
    RUN_TIMEOUT,
  );
});
