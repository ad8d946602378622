import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentRun } from "../../functions/core/agent-run";
import { agentRunKey } from "../../functions/roles/content-agents/content-agent";
import { UNUSABLE_DRAFT_MARKER } from "../../functions/roles/content-agents/local-scripts";
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
import { auditedOutcomes } from "../support/audit";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";

/**
 * `agentbus workflow resolve` end to end on the local stack: a quick-news run
 * whose writer never answers in shape ends PARTIAL with the writing node FAILED and its agent run
 * NEEDS_HUMAN. An operator resolves the node with a draft of their own through the CLI (a child
 * process, as an operator runs it): the orchestrator takes the output without calling the writer
 * again, review runs once on it, the run ends COMPLETED, the agent run stops waiting (COMPLETED),
 * the audit group keeps the command. A repeated resolve is refused by the CLI and, put on the bus
 * directly, rejected by the orchestrator without a change; bad input is refused with exit 2.
 */

const STAGE = `wfr${ulid().slice(-6).toLowerCase()}`;
const RUN_TIMEOUT = 120_000;
const DRAFT = { title: "Storage in cities", body: "Written by hand after the writer gave up." };

describe("workflow resolve on the local stack", () => {
  let env: LocalEnvironment;
  const cli = (...args: string[]) =>
    localCli(() => env, STAGE, { AGENTBUS_OPERATOR: "alice" })(...args);
  const resolvesSeen = (runId: string): Envelope[] =>
    [...env.observations.envelopes.values()].filter(
      (e) =>
        e.event_type === "workflow.resolve.requested" &&
        (e.payload as { run_id?: string }).run_id === runId,
    );
  const writingRun = async (runId: string, generation = 0) =>
    (
      await env.store.load({
        state: { type: "agent_run", id: agentRunKey(runId, "writing", generation) },
      })
    ).state?.data as AgentRun | undefined;

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "resolves a NEEDS_HUMAN node with a supplied output, once, and refuses bad input",
    async () => {
      const run = await startWorkflow(
        env,
        "resolve",
        "quick-news",
        `tidal power in estuaries ${UNUSABLE_DRAFT_MARKER}`,
      );
      const partial = await waitForRunEnd(env, run.runId, RUN_TIMEOUT);
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      expect(partial.run.status).toBe("PARTIAL");
      expect(partial.run.nodes.writing?.state).toBe("FAILED");
      expect((await writingRun(run.runId))?.state).toBe("NEEDS_HUMAN");
      const writerCalls = env.model.calls({ role: "writing" }).length;

      // Bad input: exit 2, nothing sent, nothing changed.
      const file = join(tmpdir(), `draft-${ulid()}.json`);
      writeFileSync(file, JSON.stringify(DRAFT));
      const refused = await Promise.all([
        cli("workflow", "resolve", run.runId, "--node", "writing", "--output", '{"title":"x"}'),
        cli("workflow", "resolve", run.runId, "--node", "writing", "--output", "not json"),
        cli("workflow", "resolve", run.runId, "--node", "review", "--output", `@${file}`),
        cli("workflow", "resolve", run.runId, "--node", "illustration", "--output", "{}"),
      ]);
      const messages = [
        /does not fit node writing \(role writing\): body/,
        /--output is not JSON/,
        /node review of run .* is CANCELLED; only a FAILED node can be resolved/,
        /has no node illustration/,
      ];
      refused.forEach((result, i) => {
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(messages[i] as RegExp);
        expect(result.stderr).toContain("nothing sent");
      });
      expect(resolvesSeen(run.runId)).toEqual([]);

      // Resolve with a draft from a file.
      const sent = await cli(
        "workflow",
        "resolve",
        run.runId,
        "--node",
        "writing",
        "--output",
        `@${file}`,
        "--reason",
        "wrote it by hand",
      );
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stdout).toMatch(
        /^workflow\.resolve\.requested sent to agentbus-wfr\w+-commands$/m,
      );
      expect(sent.stdout).toContain("requested_by    alice");
      const commandId = /event_id\s+(\S+)/.exec(sent.stdout)?.[1] ?? "";
      const ended = await waitForRunEnd(
        env,
        run.runId,
        RUN_TIMEOUT,
        (s) => s.run.status === "COMPLETED",
      );
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      expect(ended.run.nodes.writing).toMatchObject({ state: "COMPLETED", output: DRAFT });
      expect(ended.run.nodes.review?.state).toBe("COMPLETED");
      expect(env.model.calls({ role: "writing" })).toHaveLength(writerCalls);
      expect(env.model.calls({ role: "review" })).toHaveLength(1);
      const reviewRequests = (
        await env.store.readStream({ type: "dag_run", id: run.runId }, 1, 1000)
      ).filter((e) => e.event_type === "review.requested");
      expect(reviewRequests).toHaveLength(1);
      expect(reviewRequests[0]?.payload).toMatchObject({
        input: {
          writing: DRAFT,
        },
      });
      const agentRun = await writingRun(run.runId);
      expect(agentRun?.state).toBe("COMPLETED");
      expect(agentRun?.history.at(-1)?.trigger).toBe("HumanResolved");
      const audited = await auditedOutcomes(env.store, [commandId]);
      expect(audited.map((r) => [r.eventType, r.outcome])).toEqual([
        ["workflow.resolve.requested", "applied"],
      ]);
      expect(await readDeadLetters(env)).toEqual([]);

      // Again: the CLI refuses; the same command put on the bus is rejected and changes nothing.
      const before = await env.store.load({ state: { type: "dag_run", id: run.runId } });
      const again = await cli(
        "workflow",
        "resolve",
        run.runId,
        "--node",
        "writing",
        "--output",
        `@${file}`,
      );
      expect(again.code).toBe(2);
      expect(again.stderr).toMatch(
        /is COMPLETED; only a FAILED node can be resolved.*nothing sent/,
      );
      const direct = runCommand("workflow.resolve.requested", run.runId, run.correlationId, {
        node_id: "writing",
        output: DRAFT,
        requested_by: "bob",
      });
      await putOnBus(env, "commands", [direct]);
      await env.runtime.idle({ timeoutMs: RUN_TIMEOUT });
      const [rejected] = await env.store.inboxRecords("orchestrator", [direct.event_id]);
      expect(rejected?.outcome).toBe("rejected");
      // The run is as it was; its stream only gained the refusal.
      expect(await loadRun(env, run.runId)).toEqual(before.state?.data);
      const tail = (await env.store.readStream({ type: "dag_run", id: run.runId }, 1, 1000)).at(-1);
      expect(tail).toMatchObject({
        event_type: "workflow.rejected",
        causation_id: direct.event_id,
        payload: { request: "resolve", node_id: "writing", code: "workflow.resolve_not_failed" },
      });
      expect(env.model.calls({ role: "review" })).toHaveLength(1);
      expect(
        resolvesSeen(run.runId)
          .map((e) => e.event_id)
          .sort(),
      ).toEqual([commandId, direct.event_id].sort());
      expect(await readDeadLetters(env)).toEqual([]);
    },
    5 * RUN_TIMEOUT,
  );
});
