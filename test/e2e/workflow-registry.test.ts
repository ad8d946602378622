import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { childRunId } from "../../functions/core/dag/assignment";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { type LocalEnvironment, startLocal } from "../../lib/local";
import { runOf } from "../../lib/operator/source";
import type { WorkflowChildStartRequested } from "../../schemas/events/workflow-child";
import { PLANS_APP } from "../fixtures/steps/plans-stack";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * A workflow registered at run time on the local stack, through the operator CLI: the
 * application of test/fixtures/steps (a content agent and the team's `tally` step role, with
 * `planner` and `stamp` for plans), whose roles the CLI learns from `--app`. The definition is
 * put, listed, shown and started by name; the run completes on the version it started with. A
 * workflow with a wait node on a signal is released through `agentbus workflow signal`. A
 * registered parent runs it as a child, and a tenant's plan roles are set. A plan naming `stamp`,
 * which writes, waits for an operator's approval through the CLI: approved, it runs once;
 * rejected, its node fails. The workflow the stack was given (`topic-tally`, `new AgentBus(app,
 * id, { workflows })`) is listed, shown and started through the front door and the CLI alike,
 * which learn it from the stack (the front door's `WORKFLOWS`, the output `StackWorkflows`).
 */

/** What the front door answers, as this test reads it. */
interface DoorAnswer {
  readonly workflows?: readonly unknown[];
  readonly definition?: { readonly nodes: readonly { readonly role: string }[] };
  readonly errors?: unknown;
  readonly run_id?: string;
  readonly [field: string]: unknown;
}

const APP = join(import.meta.dirname, "..", "fixtures", "steps", "plans-stack.ts");

const topicCount = {
  $schema: "../../functions/core/dag/workflow-definition.schema.json",
  name: "topic-count",
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    { id: "tally", role: "tally" },
  ],
  edges: [{ from: "topic-selection", to: "tally" }],
};

/** Topic selection, then a wait for signal `approved` (an hour at most), then the tally. */
const gatedCount = {
  name: "gated-count",
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    { id: "gate", wait: { signal: "approved", seconds: 3600 } },
    { id: "tally", role: "tally" },
  ],
  edges: [
    { from: "topic-selection", to: "gate" },
    { from: "topic-selection", to: "tally" },
    { from: "gate", to: "tally" },
  ],
};

describe("agentbus workflow put | list | show | start | signal on the local stack", () => {
  let env: LocalEnvironment;
  const stage = `wr${ulid().slice(-6).toLowerCase()}`;
  const cli = localCli(() => env, stage);
  const runState = async (runId: string) => {
    const { state } = await env.store.load({ state: { type: "dag_run", id: runId } });
    return state?.data as OrchestratorState | undefined;
  };
  /** Starts a registered workflow by name through the CLI; `ended()` waits for the run's end. */
  const startByName = async (workflow: string, topic: string) => {
    const runId = `run_${ulid()}`;
    const args = ["--workflow", workflow, "--topic", topic, "--run-id", runId];
    const start = await cli("workflow", "start", ...args);
    expect(start.code, start.stderr).toBe(0);
    const ended = () =>
      waitUntil(
        `the end of run ${runId} of ${workflow}`,
        async () => {
          const data = await runState(runId);
          return data && data.run.status !== "RUNNING" ? data : undefined;
        },
        120_000,
      );
    return { runId, ended };
  };
  const dir = mkdtempSync(join(tmpdir(), "agentbus-registry-"));
  const file = (name: string, definition: unknown) => {
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify(definition));
    return path;
  };

  beforeAll(async () => {
    env = await startLocal({ stack: PLANS_APP, endpoint: emulator().endpoint, stage });
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    await env?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    "refuses a definition naming every problem, registers one, and runs it to completion by name",
    async () => {
      const good = file("topic-count.json", topicCount);
      // Without --app the CLI knows the reference applications' roles: tally is none of them.
      const unknownRole = await cli("workflow", "put", good);
      expect(unknownRole.code, unknownRole.stderr).toBe(2);
      expect(unknownRole.stderr).toContain("dag.unknown_role: node tally names role tally");
      expect(unknownRole.stderr).toContain("give its module with --app");
      const bad = file("bad.json", {
        ...topicCount,
        nodes: [...topicCount.nodes, { id: "tally", role: "bookkeeper" }],
        edges: [...topicCount.edges, { from: "tally", to: "tally" }],
      });
      const refused = await cli("--app", APP, "workflow", "put", bad);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toMatch(/refusing .*bad\.json: \d+ problems; nothing stored/);
      for (const code of ["dag.duplicate_node", "dag.unknown_role", "dag.self_loop"])
        expect(refused.stderr).toContain(code);
      expect(refused.stdout).toBe("");

      const put = await cli("--app", APP, "workflow", "put", good, "--reason", "first version");
      expect(put.code, put.stderr).toBe(0);
      expect(put.stdout).toContain("stored topic-count v1 for every tenant");
      expect(put.stdout).toContain("recorded in the audit trail");
      const again = await cli("--app", APP, "workflow", "put", good);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain("unchanged: topic-count v1 is registered for every tenant");

      const list = await cli("workflow", "list", "--json");
      expect(list.code, list.stderr).toBe(0);
      expect(JSON.parse(list.stdout)).toEqual([
        { name: "topic-tally", scope: "stack", versions: [1], newest: 1 },
        { name: "topic-count", scope: "shared", versions: [1], newest: 1 },
      ]);
      const show = await cli("workflow", "show", "topic-count");
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toContain("topic-count v1  (for every tenant; versions 1)");
      expect(show.stdout).toContain("topic-selection -> tally");
      const json = await cli("workflow", "show", "topic-count", "--version", "1", "--json");
      expect(JSON.parse(json.stdout).nodes.map((n: { role: string }) => n.role)).toEqual([
        "topic-selection",
        "tally",
      ]);
      const missing = await cli("workflow", "show", "topic-count", "--version", "2");
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain(
        "no workflow topic-count v2 is given to the stack or registered for every tenant",
      );

      const ended = await (await startByName("topic-count", "night trains in Europe")).ended();
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.workflow).toEqual({ name: "topic-count", version: 1 });
      expect(ended.definition_scope).toBe("*");
      const picked = ended.run.nodes["topic-selection"]?.output as { sources: string[] };
      expect(ended.run.nodes.tally?.output).toMatchObject({ sources: picked.sources.length });
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "releases a wait node with a signal sent through the CLI, refusing a bad payload and a signal nobody waits for",
    async () => {
      const put = await cli("--app", APP, "workflow", "put", file("gated.json", gatedCount));
      expect(put.code, put.stderr).toBe(0);
      const { runId, ended: runEnd } = await startByName("gated-count", "sleeper buses");
      await waitUntil(
        "the wait node waiting",
        async () =>
          (await runState(runId))?.run.nodes.gate?.state === "RUNNING" ? true : undefined,
        120_000,
      );

      const show = await cli("workflow", "show", runId);
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toMatch(/^ {2}gate {2}signal approved, deadline \S+$/m);

      const refused = await Promise.all([
        cli("workflow", "signal", runId, "approved", "--payload", "not json"),
        cli("workflow", "signal", runId, "aproved"),
      ]);
      const messages = [
        /--payload is not JSON/,
        /no wait node of run \S+ waits for signal "aproved" now \(waiting for: approved \(node gate\)\)/,
      ];
      refused.forEach((result, i) => {
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(messages[i] as RegExp);
        expect(result.stderr).toContain("nothing sent");
      });

      const payload = JSON.stringify({ by: "editor" });
      const sent = await cli("workflow", "signal", runId, "approved", "--payload", payload);
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stdout).toMatch(/^workflow\.signal\.requested sent to /m);
      expect(sent.stdout).toContain("signal          approved");
      const ended = await runEnd();
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.nodes.gate?.output).toEqual({
        released_by: "signal",
        signal: "approved",
        payload: { by: "editor" },
      });
      expect(ended.timeline.map((e) => e.event)).not.toContain("signal.unmatched");
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "runs a registered parent whose child node runs another registered workflow, and sets a tenant's plan roles",
    async () => {
      for (const definition of [
        topicCount,
        { name: "nested-count", nodes: [{ id: "count", workflow: { name: "topic-count" } }] },
      ]) {
        const put = await cli(
          "--app",
          APP,
          "workflow",
          "put",
          file(`${definition.name}.json`, definition),
        );
        expect(put.code, put.stderr).toBe(0);
      }
      const show = await cli("workflow", "show", "nested-count");
      expect(show.stdout).toContain("count                    workflow topic-count");

      const parent = await startByName("nested-count", "river ferries");
      const { runId } = parent;
      const ended = await parent.ended();
      expect(ended.run.status).toBe("COMPLETED");
      const output = ended.run.nodes.count?.output as {
        status: string;
        outputs: Record<string, unknown>;
      };
      expect(output.status).toBe("COMPLETED");
      expect(Object.keys(output.outputs).sort()).toEqual(["tally", "topic-selection"]);
      const child = await cli("workflow", "show", childRunId(runId, "count", 1));
      expect(child.code, child.stderr).toBe(0);
      expect(child.stdout).toContain(`parent      ${runId}, node count (generation 0)`);

      const unknown = await cli("--app", APP, "workflow", "allow", "--tenant", "acme", "ledger");
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain("ledger is not a step role of this stack");
      const allowed = await cli("--app", APP, "workflow", "allow", "--tenant", "acme", "tally");
      expect(allowed.code, allowed.stderr).toBe(0);
      expect(allowed.stdout).toContain("tenant acme's plans may name tally");
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "lists, shows and starts the stack's own workflow through the front door and the CLI, each run to completion",
    async () => {
      const door = env.frontDoor;
      if (!door) throw new Error("the local stack serves no front door");
      const token = await door.issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const call = async (method: string, path: string, body?: unknown) => {
        const response = await fetch(`${door.url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { "content-type": "application/json" }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: response.status, body: (await response.json()) as DoorAnswer };
      };
      const listed = await call("GET", "/workflows");
      expect(listed.status).toBe(200);
      expect(listed.body.workflows).toContainEqual({
        name: "topic-tally",
        scope: "stack",
        versions: [1],
      });
      const shown = await call("GET", "/workflows/topic-tally?version=1");
      expect(shown.status).toBe(200);
      expect(shown.body).toMatchObject({ name: "topic-tally", scope: "stack", versions: [1] });
      expect(shown.body.definition?.nodes.map((n) => n.role)).toEqual(["topic-selection", "tally"]);
      const taken = { name: "topic-tally", nodes: topicCount.nodes, edges: topicCount.edges };
      const refusedPut = await call("PUT", "/workflows/topic-tally", taken);
      expect(refusedPut.status).toBe(400);
      expect(JSON.stringify(refusedPut.body.errors)).toContain("workflow.reserved_name");
      const started = await call("POST", "/workflows/topic-tally/runs", {
        topic_hint: "cargo bikes in cities",
      });
      expect(started.status, JSON.stringify(started.body)).toBe(202);

      const list = await cli("workflow", "list", "--json");
      expect(JSON.parse(list.stdout)).toContainEqual({
        name: "topic-tally",
        scope: "stack",
        versions: [1],
        newest: 1,
      });
      const show = await cli("workflow", "show", "topic-tally");
      expect(show.code, show.stderr).toBe(0);
      expect(show.stdout).toContain("topic-tally v1  (given to the stack; versions 1)");
      const put = await cli("--app", APP, "workflow", "put", file("taken.json", taken));
      expect(put.code, put.stderr).toBe(2);
      expect(put.stderr).toContain("workflow.reserved_name");
      const runId = `run_${ulid()}`;
      const args = ["--workflow", "topic-tally", "--topic", "cargo bikes", "--run-id", runId];
      const start = await cli("workflow", "start", ...args);
      expect(start.code, start.stderr).toBe(0);

      for (const id of [started.body.run_id as string, runId]) {
        const ended = await waitUntil(
          `run ${id}'s end`,
          async () => {
            const data = await runState(id);
            return data && data.run.status !== "RUNNING" ? data : undefined;
          },
          120_000,
        );
        expect(ended.run.status).toBe("COMPLETED");
        expect(ended.run.workflow).toEqual({ name: "topic-tally", version: 1 });
        expect(ended.definition_scope).toBeUndefined();
      }
      // The console draws the run with the stack's definition: its edge, its nodes' roles.
      const drawn = await runOf(env.ops, runId);
      expect(drawn?.edges.map((e) => `${e.from}->${e.to}`)).toEqual(["topic-selection->tally"]);
      const read = await call("GET", `/runs/${started.body.run_id}`);
      expect(read.body).toMatchObject({ status: "COMPLETED", workflow: { name: "topic-tally" } });
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "holds an agent's plan that names a role that writes until an operator approves it through the CLI, and fails it when one rejects it",
    async () => {
      const planFlow = {
        name: "plan-flow",
        nodes: [
          { id: "planner", role: "planner" },
          { id: "run", workflow: { plan: { node: "planner", path: "plan" } } },
        ],
        edges: [{ from: "planner", to: "run" }],
      };
      const put = await cli("--app", APP, "workflow", "put", file("plan-flow.json", planFlow));
      expect(put.code, put.stderr).toBe(0);
      const allow = ["workflow", "allow", "--tenant", "default", "tally", "stamp"];
      expect((await cli("--app", APP, ...allow)).code).toBe(0);
      const plan = { name: "stamp-plan", nodes: [{ id: "stamp", role: "stamp" }] };
      const startWaiting = async () => {
        const runId = `run_${ulid()}`;
        const input = JSON.stringify({ topic_hint: "ledgers", plan });
        const args = ["--workflow", "plan-flow", "--input", input, "--run-id", runId];
        const start = await cli("workflow", "start", ...args);
        expect(start.code, start.stderr).toBe(0);
        await waitUntil(
          "the plan's approval waiting",
          async () => (await runState(runId))?.plan_approvals?.run,
          120_000,
        );
        return runId;
      };
      const ended = (runId: string) =>
        waitUntil(
          "the parent's end",
          async () => {
            const data = await runState(runId);
            return data && data.run.status !== "RUNNING" ? data : undefined;
          },
          120_000,
        );

      const approvedRun = await startWaiting();
      const child = childRunId(approvedRun, "run", 1);
      expect((await runState(child)) ?? undefined).toBeUndefined();
      const listed = await cli("approvals", "--json");
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toContainEqual(
        expect.objectContaining({
          kind: "plan",
          id: approvedRun,
          step: "run",
          action: "run plan stamp-plan v1",
          input: expect.objectContaining({
            writes: [{ role: "stamp", integrations: ["sideEffects"] }],
          }),
        }),
      );
      const show = await cli("workflow", "show", approvedRun);
      expect(show.stdout).toContain("plans waiting for an approval (they name roles that write)");
      expect(show.stdout).toMatch(/^ {2}run {2}stamp-plan v1 until \S+: stamp \(stamp\)$/m);
      expect(show.stdout).toContain("writes: stamp (sideEffects)");
      const approve = await cli("approve", approvedRun, "--step", "run", "--reason", "checked");
      expect(approve.code, approve.stderr).toBe(0);
      const approved = await ended(approvedRun);
      expect(approved.run.status).toBe("COMPLETED");
      const childRun = await runState(child);
      expect(childRun?.run.status).toBe("COMPLETED");
      expect(childRun?.run.nodes.stamp?.attempt).toBe(1);
      const stamped = childRun?.run.nodes.stamp?.output as { stamped: string };
      expect(stamped.stamped).toBe(`${child}:stamp:stamp:0`);
      const starts = (await env.store.readStream({ type: "dag_run", id: approvedRun }, 1, 100))
        .filter((e) => e.event_type === "workflow.child.start.requested")
        .map((e) => e.payload as WorkflowChildStartRequested);
      expect(starts.map((s) => s.approval?.by !== undefined)).toEqual([false, true]);
      const again = await cli("approve", approvedRun, "--step", "run");
      expect(again.code).toBe(2);
      expect(again.stderr).toContain("nothing sent");

      const rejectedRun = await startWaiting();
      const reject = await cli("reject", rejectedRun, "--step", "run", "--reason", "not now");
      expect(reject.code, reject.stderr).toBe(0);
      const rejected = await ended(rejectedRun);
      expect(rejected.run.nodes.run?.error).toMatchObject({
        code: "workflow.plan_rejected",
        message: expect.stringContaining("rejected the plan stamp-plan v1 of node run: not now"),
      });
      expect((await runState(childRunId(rejectedRun, "run", 1))) ?? undefined).toBeUndefined();
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
