import { TaskState } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import type { EventStore } from "../../functions/core/ports";
import { REFUSED_NOW } from "../../functions/front-door/a2a/admit";
import { type A2aPorts, decisionOf, runInputOf } from "../../functions/front-door/a2a/run-agent";
import { type A2aAnswer, type A2aService, answerA2a } from "../../functions/front-door/a2a/serve";
import { runIdOfTask, taskOfRun, taskStateOf } from "../../functions/front-door/a2a/task";
import { ProblemError } from "../../functions/front-door/http";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../schemas";
import { opaqueIdProblem } from "../../schemas/ids";
import { REFERENCE_FRONT_DOOR_WORKFLOWS } from "../support/reference";

/**
 * The A2A mapping in memory (functions/front-door/a2a): a run's stored state as a task, and the
 * JSON-RPC calls of an offered role through the SDK's request handler, over a run whose state a
 * stand-in orchestrator moves as the commands it is sent say: a message starts it, the review
 * asks for a confirmation (input-required), a message answers it, the run completes. The same
 * on the local stack with the SDK's client: test/e2e/a2a-agent.test.ts.
 */

process.env.POWERTOOLS_METRICS_DISABLED = "true";

const TASK = "0b1c2d3e-4f50-4617-8899-aabbccddeeff";
const OFFERED = {
  description: "Reviews an article",
  workflow: "long-form",
  textInput: "topic_hint",
};

/** A run's state: its status, the review node's state, a confirmation pending or not. */
function runState(
  status: OrchestratorState["run"]["status"],
  review: "PENDING" | "RUNNING" | "COMPLETED" | "FAILED",
  options: { blocked?: boolean; tenant?: string } = {},
): OrchestratorState {
  return {
    tenant_id: options.tenant ?? "acme",
    workflow: "long-form",
    run: {
      workflow: { name: "content.long-form", version: 1 },
      status,
      nodes: {
        review: {
          state: review,
          assigned_generation: 1,
          ...(review === "COMPLETED" ? { output: { verdict: "approve" } } : {}),
          ...(review === "FAILED"
            ? { error: { code: "agent_run.confirmation_refused", message: "refused" } }
            : {}),
        },
      },
    },
    leases: options.blocked
      ? {
          review: {
            generation: 1,
            expires_at: "2026-12-05T12:00:00Z",
            blocked: {
              since: "2026-12-05T10:00:00Z",
              confirm_by: "2026-12-05T11:00:00Z",
              question: "Is the quote confirmed?",
            },
          },
        }
      : {},
    timeline: [],
  } as unknown as OrchestratorState;
}

describe("a run as an A2A task", () => {
  it("a task id names one run, whose id carries no run of digits", () => {
    const runId = runIdOfTask("12345678-1234-4234-8234-123456789012") ?? "";
    expect(runId).toMatch(/^run_[a-p-]{36}$/);
    expect(opaqueIdProblem(runId)).toBeUndefined();
    expect(runIdOfTask("12345678-1234-4234-8234-123456789013")).not.toBe(runId);
    for (const foreign of ["run_abc", "", "12345678-1234-4234-8234-12345678901Z"])
      expect(runIdOfTask(foreign)).toBeUndefined();
  });

  it("each run status and node state maps to its task state", () => {
    expect(taskStateOf(undefined)).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(taskStateOf(runState("RUNNING", "PENDING"))).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(taskStateOf(runState("RUNNING", "RUNNING"))).toBe(TaskState.TASK_STATE_WORKING);
    expect(taskStateOf(runState("RUNNING", "RUNNING", { blocked: true }))).toBe(
      TaskState.TASK_STATE_INPUT_REQUIRED,
    );
    expect(taskStateOf(runState("COMPLETED", "COMPLETED"))).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(taskStateOf(runState("PARTIAL", "COMPLETED"))).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(taskStateOf(runState("FAILED", "FAILED"))).toBe(TaskState.TASK_STATE_FAILED);
    expect(taskStateOf(runState("CANCELLED", "RUNNING"))).toBe(TaskState.TASK_STATE_CANCELED);
    // A confirmation already answered waits for nobody; nor does one of a run that ended.
    expect(taskStateOf(runState("FAILED", "RUNNING", { blocked: true }))).toBe(
      TaskState.TASK_STATE_FAILED,
    );
  });

  it("an input-required task says what it waits for; an ended one carries the nodes' outputs", () => {
    const waiting = taskOfRun(
      TASK,
      runState("RUNNING", "RUNNING", { blocked: true }),
      "2026-12-05T10:01:00Z",
    );
    expect(waiting.status?.message?.parts[0]?.content).toEqual({
      $case: "text",
      value: "Is the quote confirmed?: answer approve or reject",
    });
    expect(waiting.status?.message?.metadata?.agentbus).toMatchObject({
      step: "review",
      deadline: "2026-12-05T11:00:00Z",
    });
    expect(waiting.artifacts).toEqual([]);
    const done = taskOfRun(TASK, runState("COMPLETED", "COMPLETED"), "2026-12-05T10:02:00Z");
    expect(done.artifacts.map((a) => [a.artifactId, a.parts[0]?.content])).toEqual([
      ["review", { $case: "data", value: { verdict: "approve" } }],
    ]);
    expect(done.metadata?.agentbus).toEqual({
      run_id: runIdOfTask(TASK),
      run_status: "COMPLETED",
      workflow: { name: "content.long-form", version: 1 },
    });
    const failed = taskOfRun(TASK, runState("FAILED", "FAILED"), "2026-12-05T10:02:00Z");
    expect(failed.status?.message?.parts[0]?.content).toMatchObject({
      value: expect.stringContaining("agent_run.confirmation_refused"),
    });
  });

  it("a message's input and an answer's decision, or why it is neither", () => {
    const text = (value: string) => ({
      messageId: "m",
      contextId: "",
      taskId: "",
      role: 1,
      parts: [
        {
          content: { $case: "text" as const, value },
          metadata: undefined,
          filename: "",
          mediaType: "",
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    });
    const data = (value: unknown) => ({
      ...text(""),
      parts: [
        {
          content: { $case: "data" as const, value },
          metadata: undefined,
          filename: "",
          mediaType: "",
        },
      ],
    });
    expect(runInputOf(text("grid fees"), OFFERED)).toEqual({ topic_hint: "grid fees" });
    expect(runInputOf(data({ topic_hint: "x", depth: 2 }), OFFERED)).toEqual({
      topic_hint: "x",
      depth: 2,
    });
    expect(() => runInputOf(text("  "), OFFERED)).toThrow(/no text and no data part/);
    expect(decisionOf(text("approve: the source confirmed it"))).toEqual({
      verdict: "approve",
      reason: "the source confirmed it",
    });
    expect(decisionOf(text("No"))).toEqual({ verdict: "reject" });
    expect(decisionOf(data({ decision: "reject", reason: "unsourced" }))).toEqual({
      verdict: "reject",
      reason: "unsourced",
    });
    expect(() => decisionOf(text("maybe later"))).toThrow(/approve.*reject/);
  });
});

/**
 * An offered reviewer over a stand-in orchestrator: the state of each run the commands put on the
 * bus say, read by the handler as the state table would give it.
 */
interface WorldOptions {
  readonly requestsPerMinute?: number;
  readonly runsInFlight?: number;
  readonly backlog?: A2aPorts["admission"]["backlog"];
  /** The stand-in orchestrator refuses each start, as `workflow.rejected` and a null state. */
  readonly refuseStarts?: { readonly code: string; readonly message: string };
}

function world(options: WorldOptions = {}) {
  let now = Date.parse("2026-12-05T10:00:00Z");
  const clock = { now: () => new Date(now) };
  const runs = new Map<string, OrchestratorState | null>();
  const streams = new Map<string, Envelope[]>();
  const published: Envelope[] = [];
  const refuse = (
    envelope: Envelope,
    runId: string,
    refusal: { code: string; message: string },
  ) => {
    runs.set(runId, null);
    const rejected: Envelope = {
      ...envelope,
      event_id: `${envelope.event_id}r`,
      event_type: "workflow.rejected",
      aggregate: { type: "dag_run", id: runId, version: 1 },
      producer: "orchestrator",
      payload: { run_id: runId, request: "start", ...refusal },
    };
    streams.set(runId, [rejected]);
  };
  const apply = (envelope: Envelope) => {
    const payload = envelope.payload as { run_id: string; answer?: string };
    const tenant = envelope.tenant_id ?? "default";
    if (envelope.event_type === "workflow.start.requested" && options.refuseStarts)
      return refuse(envelope, payload.run_id, options.refuseStarts);
    if (envelope.event_type === "workflow.start.requested")
      runs.set(payload.run_id, runState("RUNNING", "RUNNING", { blocked: true, tenant }));
    if (envelope.event_type === "workflow.confirm.requested")
      runs.set(
        payload.run_id,
        payload.answer === "confirmed"
          ? runState("COMPLETED", "COMPLETED", { tenant })
          : runState("FAILED", "FAILED", { tenant }),
      );
    if (envelope.event_type === "workflow.cancel.requested")
      runs.set(payload.run_id, runState("CANCELLED", "RUNNING", { tenant }));
  };
  const store: Pick<EventStore, "load"> = {
    async load({ state }) {
      const data = runs.get(state?.id ?? "");
      return {
        inboxHit: false,
        checkpoint: 0,
        state:
          data !== undefined && state
            ? { aggregate: state, revision: 1, version: 1, data }
            : undefined,
      };
    },
  };
  // The front door's admission, as the stream function is given it: the reference workflows.
  const limits = new InMemoryTenantLimits();
  const inFlight = new InMemoryRunsInFlight();
  const admission: A2aPorts["admission"] = {
    limits,
    runs: inFlight,
    controls: new InMemoryModelControls(),
    states: {
      loadStates: async (refs) =>
        refs.flatMap((ref) => {
          const data = runs.get(ref.id);
          return data === undefined ? [] : [{ aggregate: ref, revision: 1, version: 1, data }];
        }),
    },
    ...(options.backlog ? { backlog: options.backlog } : {}),
    workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
    clock,
  };
  let id = 0;
  const service = (tenant: string): A2aService => ({
    agents: { review: OFFERED },
    ports: {
      store,
      runEvents: {
        readStream: async (stream, from, to) =>
          (streams.get(stream.id) ?? []).filter(
            (e) => e.aggregate.version >= from && e.aggregate.version <= to,
          ),
      },
      registry,
      clock,
      admission,
      sleep: async (ms) => {
        now += ms;
      },
      ids: { next: () => `01JAAAAAAAAAAAAAAAAAAAA${String(++id).padStart(3, "0")}` },
      publisher: {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes);
          for (const envelope of envelopes) apply(envelope);
          return [];
        },
      },
    },
    settings: {
      pollMs: 1000,
      maxSeconds: 30,
      limits: {
        requestsPerMinute: options.requestsPerMinute ?? 600,
        runsInFlight: options.runsInFlight ?? 20,
      },
    },
    caller: async () => ({ tenantId: tenant, userId: `user_${tenant}` }),
  });
  const startedAt = now;
  const elapsedMs = () => now - startedAt;
  return { service, published, runs, limits, inFlight, elapsedMs };
}

const rpc = (method: string, params: unknown) => ({
  method: "POST",
  path: "/v1/a2a/review",
  headers: { host: "door.example", "a2a-version": "1.0" },
  requestId: "r",
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
});

const message = (text: string, taskId?: string) => ({
  message: {
    messageId: `m-${text}`,
    role: "ROLE_USER",
    parts: [{ text }],
    ...(taskId ? { taskId } : {}),
  },
});

interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>[];
}

async function result(
  answer: A2aAnswer,
): Promise<{ result?: Record<string, unknown>; error?: RpcError }> {
  if (!("body" in answer)) throw new Error("a stream, where a JSON answer was expected");
  return JSON.parse(answer.body);
}

describe("an offered role's JSON-RPC calls, in memory", () => {
  it("serves the card: the role's skill, JSON-RPC at its path, the bearer token", async () => {
    const { service } = world();
    const answer = await answerA2a(
      {
        method: "GET",
        path: "/v1/a2a/review/.well-known/agent-card.json",
        headers: { host: "door.example" },
        requestId: "r",
      },
      service("acme"),
    );
    const card = JSON.parse("body" in answer ? answer.body : "{}");
    expect(card).toMatchObject({
      name: "review",
      description: "Reviews an article",
      supportedInterfaces: [
        {
          url: "https://door.example/v1/a2a/review",
          protocolBinding: "JSONRPC",
          protocolVersion: "1.0",
        },
      ],
      capabilities: { streaming: true },
      skills: [
        { id: "review", description: "Reviews an article", tags: ["review", "workflow:long-form"] },
      ],
      securitySchemes: {
        bearer: { httpAuthSecurityScheme: { scheme: "Bearer", bearerFormat: "JWT" } },
      },
    });
    const other = answerA2a(
      {
        method: "GET",
        path: "/v1/a2a/writing/.well-known/agent-card.json",
        headers: {},
        requestId: "r",
      },
      service("acme"),
    );
    await expect(other).rejects.toThrow(ProblemError);
  });

  it("an answer whose JSON spells the task's id task_id answers that task; it starts no other", async () => {
    const { service, published } = world();
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const task = sent.result?.task as { id: string };
    const answer = {
      message: {
        messageId: "m-2",
        role: "ROLE_USER",
        parts: [{ text: "approve" }],
        task_id: task.id,
      },
    };
    const answered = await result(await answerA2a(rpc("SendMessage", answer), service("acme")));
    expect(published.map((e) => e.event_type)).toEqual([
      "workflow.start.requested",
      "workflow.confirm.requested",
      "operator.approval.answered",
    ]);
    expect(answered.result?.task).toMatchObject({ id: task.id });
  });

  it("send starts the run and answers input-required; an answer completes it; another tenant finds nothing", async () => {
    const { service, published, runs } = world();
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const task = sent.result?.task as { id: string; status: { state: string } };
    expect(task.status.state).toBe("TASK_STATE_INPUT_REQUIRED");
    const runId = runIdOfTask(task.id) ?? "";
    expect(published[0]).toMatchObject({
      event_type: "workflow.start.requested",
      tenant_id: "acme",
      aggregate: { type: "dag_run", id: runId },
      payload: { run_id: runId, workflow_name: "long-form", request: { topic_hint: "grid fees" } },
    });

    for (const call of [
      rpc("GetTask", { id: task.id }),
      rpc("SendMessage", message("approve", task.id)),
      rpc("CancelTask", { id: task.id }),
    ]) {
      const refused = await result(await answerA2a(call, service("globex")));
      expect(refused.error?.message).toMatch(/not found/i);
    }
    expect(published).toHaveLength(1);

    const answered = await result(
      await answerA2a(rpc("SendMessage", message("approve, confirmed", task.id)), service("acme")),
    );
    expect(published[1]).toMatchObject({
      event_type: "workflow.confirm.requested",
      payload: {
        run_id: runId,
        node_id: "review",
        answer: "confirmed",
        note: "confirmed",
        requested_by: "user_acme",
        // The wait the answer was read against: the orchestrator refuses it for any later one.
        waiting_since: "2026-12-05T10:00:00Z",
      },
    });
    expect(answered.result?.task).toMatchObject({ status: { state: "TASK_STATE_COMPLETED" } });
    expect(runs.get(runId)?.run.status).toBe("COMPLETED");
    const done = await result(await answerA2a(rpc("GetTask", { id: task.id }), service("acme")));
    expect(done.result).toMatchObject({
      id: task.id,
      status: { state: "TASK_STATE_COMPLETED" },
      artifacts: [{ artifactId: "review" }],
    });
  });

  it("streams an answer from the task as it was answered, though the run moved on at once", async () => {
    // The stand-in orchestrator applies a command as it is put: the run has ended before the
    // stream sends its first event.
    const { service } = world();
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("tidal power")), service("acme")),
    );
    const taskId = String((sent.result?.task as { id?: string } | undefined)?.id);
    const answer = await answerA2a(
      rpc("SendStreamingMessage", message("approve", taskId)),
      service("acme"),
    );
    if (!("stream" in answer)) throw new Error("no stream");
    const events: Record<string, unknown>[] = [];
    for await (const text of answer.stream)
      events.push(JSON.parse(text.replace(/^data: /, "")).result);
    expect(events[0]).toMatchObject({
      task: { id: taskId, status: { state: "TASK_STATE_INPUT_REQUIRED" } },
    });
    expect(events.at(-1)).toMatchObject({
      statusUpdate: { taskId, status: { state: "TASK_STATE_COMPLETED" } },
    });
  });

  it("streams a task's changes as server-sent events; cancel ends its run; a message the task does not wait for is refused", async () => {
    const { service, published } = world();
    const answer = await answerA2a(
      rpc("SendStreamingMessage", message("tidal power")),
      service("acme"),
    );
    if (!("stream" in answer)) throw new Error("no stream");
    const events: Record<string, unknown>[] = [];
    for await (const text of answer.stream)
      events.push(JSON.parse(text.replace(/^data: /, "")).result);
    expect(events.map((e) => Object.keys(e)[0])).toEqual(["task", "statusUpdate"]);
    const taskId = String((events[0]?.task as { id?: string } | undefined)?.id);
    expect(events[1]).toMatchObject({
      statusUpdate: { taskId, status: { state: "TASK_STATE_INPUT_REQUIRED" } },
    });

    const unclear = await result(
      await answerA2a(rpc("SendMessage", message("perhaps", taskId)), service("acme")),
    );
    expect(unclear.error?.message).toMatch(/approve.*reject/);
    const cancelled = await result(
      await answerA2a(rpc("CancelTask", { id: taskId }), service("acme")),
    );
    expect(published.at(-1)).toMatchObject({
      event_type: "workflow.cancel.requested",
      payload: { requested_by: "user_acme" },
    });
    expect(cancelled.result).toMatchObject({
      id: taskId,
      status: { state: "TASK_STATE_CANCELED" },
    });
    const after = await result(
      await answerA2a(rpc("SendMessage", message("approve", taskId)), service("acme")),
    );
    expect(after.error?.message).toMatch(/terminal state/);
  });
});

describe("a caller's answer on the audit topic", () => {
  it("records the decision as an operator's is: the task's run and step, the reason, the caller, the command", async () => {
    const { service, published } = world();
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const taskId = String((sent.result?.task as { id?: string } | undefined)?.id);
    await answerA2a(
      rpc("SendMessage", message("reject: no source for it", taskId)),
      service("acme"),
    );
    const [command, record] = published.slice(1);
    expect(command?.event_type).toBe("workflow.confirm.requested");
    expect(record).toMatchObject({
      event_type: "operator.approval.answered",
      tenant_id: "acme",
      user_id: "user_acme",
      producer: "front-door",
      aggregate: { type: "operator_action" },
      payload: {
        target: runIdOfTask(taskId),
        step: "review",
        decision: "reject",
        reason: "no source for it",
        requested_by: "user_acme",
        via: "front-door",
        command_id: command?.event_id,
      },
    });
    expect(registry.parse(record).ok).toBe(true);
    expect(registry.find("operator.approval.answered")?.topic).toBe("audit");
    // One record for the one answer.
    expect(published.filter((e) => e.event_type === "operator.approval.answered")).toHaveLength(1);
  });
});

describe("a start the orchestrator refuses", () => {
  const refusal = {
    code: "workflow.invalid_input",
    message: "workflow content.long-form v2 does not take this input: topic_hint: too long",
  };

  it("ends its task rejected with the reason, in the send, GetTask and a stream, without waiting out the stream", async () => {
    const { service, runs, elapsedMs } = world({ refuseStarts: refusal });
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const task = sent.result?.task as { id: string; status: { state: string } };
    expect(task.status).toMatchObject({
      state: "TASK_STATE_REJECTED",
      message: {
        parts: [{ text: expect.stringContaining("workflow.invalid_input") }],
      },
    });
    expect(runs.get(runIdOfTask(task.id) ?? "")).toBeNull();
    const read = await result(await answerA2a(rpc("GetTask", { id: task.id }), service("acme")));
    expect(read.result).toMatchObject({
      id: task.id,
      status: { state: "TASK_STATE_REJECTED" },
      metadata: { agentbus: { run_id: runIdOfTask(task.id), refused: refusal } },
    });
    expect(JSON.stringify(read.result)).toContain("topic_hint: too long");
    // Another tenant's refused start is no task of theirs.
    const foreign = await result(
      await answerA2a(rpc("GetTask", { id: task.id }), service("globex")),
    );
    expect(foreign.error?.message).toMatch(/not found/i);

    const answer = await answerA2a(rpc("SendStreamingMessage", message("tidal")), service("acme"));
    if (!("stream" in answer)) throw new Error("no stream");
    const events: Record<string, unknown>[] = [];
    for await (const text of answer.stream)
      events.push(JSON.parse(text.replace(/^data: /, "")).result);
    expect(events.at(-1)).toMatchObject({
      statusUpdate: { status: { state: "TASK_STATE_REJECTED" } },
    });
    // The stream ended at the refusal, not after its 30 seconds.
    expect(elapsedMs()).toBeLessThan(5000);
  });

  it("a rejected task takes no answer and cannot be cancelled", async () => {
    const { service } = world({ refuseStarts: refusal });
    const sent = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const taskId = String((sent.result?.task as { id?: string } | undefined)?.id);
    const answered = await result(
      await answerA2a(rpc("SendMessage", message("approve", taskId)), service("acme")),
    );
    expect(answered.error?.message).toMatch(/terminal state/);
    const cancelled = await result(
      await answerA2a(rpc("CancelTask", { id: taskId }), service("acme")),
    );
    expect(cancelled.error?.message).toMatch(/not cancelable/i);
  });
});

describe("a start through A2A goes through the front door's admission", () => {
  const data = (value: unknown) => ({
    message: { messageId: "m-data", role: "ROLE_USER", parts: [{ data: value }] },
  });
  const detail = (error: RpcError | undefined, type: string) =>
    error?.data?.find((d) => d["@type"] === `type.googleapis.com/google.rpc.${type}`);

  it("counts the task's run against its tenant's runs in flight: over the cap, an error naming it and when to retry, and nothing put", async () => {
    const { service, published, inFlight } = world({ runsInFlight: 1 });
    const first = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    const task = first.result?.task as { id: string };
    expect(inFlight.counted.get("acme")?.map((r) => r.runId)).toEqual([runIdOfTask(task.id)]);
    const refused = await result(
      await answerA2a(rpc("SendMessage", message("tidal power")), service("acme")),
    );
    expect(refused.result).toBeUndefined();
    expect(refused.error).toMatchObject({
      code: REFUSED_NOW,
      message: "tenant acme has 1 workflow runs in flight",
    });
    expect(detail(refused.error, "ErrorInfo")).toMatchObject({
      reason: "TOO_MANY_REQUESTS",
      metadata: { retry_after_seconds: "30" },
    });
    expect(detail(refused.error, "RetryInfo")).toEqual({
      "@type": "type.googleapis.com/google.rpc.RetryInfo",
      retryDelay: "30s",
    });
    expect(published.map((e) => e.event_type)).toEqual(["workflow.start.requested"]);
    expect(inFlight.counted.get("acme")).toHaveLength(1);
    // Another tenant's runs are its own.
    const other = await result(
      await answerA2a(rpc("SendMessage", message("tidal power")), service("globex")),
    );
    expect(other.result?.task).toMatchObject({ status: { state: "TASK_STATE_INPUT_REQUIRED" } });
  });

  it("counts the start against the tenant's requests per minute, a stream's as a send's", async () => {
    const { service, published } = world({ requestsPerMinute: 1 });
    await answerA2a(rpc("SendMessage", message("grid fees")), service("acme"));
    const answer = await answerA2a(
      rpc("SendStreamingMessage", message("tidal power")),
      service("acme"),
    );
    // Refused before any task: a JSON answer, not a stream.
    const refused = await result(answer);
    expect(refused.error).toMatchObject({
      code: REFUSED_NOW,
      message: "tenant acme is over its 1 requests per minute",
    });
    // 10:00:00 and a little polling: the rest of the minute.
    expect(detail(refused.error, "RetryInfo")?.retryDelay).toMatch(/^\d+s$/);
    expect(published).toHaveLength(1);
  });

  it("refuses a start while the groups a run enters are backed up, counting nothing", async () => {
    const backlog = {
      refusal: async () => ({
        code: "backlog" as const,
        detail: "consumer group orchestrator has 400 messages queued, over its 300",
        retryAfterSeconds: 20,
      }),
    };
    const { service, published, limits, inFlight } = world({ backlog });
    const refused = await result(
      await answerA2a(rpc("SendMessage", message("grid fees")), service("acme")),
    );
    expect(refused.error).toMatchObject({ code: REFUSED_NOW, message: /orchestrator has 400/ });
    expect(detail(refused.error, "ErrorInfo")).toMatchObject({ reason: "BACKLOG" });
    expect(detail(refused.error, "RetryInfo")?.retryDelay).toBe("20s");
    expect(published).toEqual([]);
    expect(limits.counts.size).toBe(0);
    expect(inFlight.counted.size).toBe(0);
  });

  it("checks the input against the workflow's declared input: invalid params naming each problem, nothing counted or put", async () => {
    const { service, published, limits, inFlight } = world();
    const refused = await result(
      await answerA2a(rpc("SendMessage", data({ topic: "grid fees" })), service("acme")),
    );
    expect(refused.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/does not fit workflow content\.long-form/),
    });
    const violations = detail(refused.error, "BadRequest")?.fieldViolations as unknown[];
    expect(JSON.stringify(violations)).toMatch(/topic_hint/);
    expect(published).toEqual([]);
    expect(limits.counts.size).toBe(0);
    expect(inFlight.counted.size).toBe(0);
    const fits = await result(
      await answerA2a(rpc("SendMessage", data({ topic_hint: "grid fees" })), service("acme")),
    );
    expect(fits.result?.task).toMatchObject({ status: { state: "TASK_STATE_INPUT_REQUIRED" } });
  });

  it("checks a run input's bounds too (at most 16 KiB, 8 levels): invalid params, nothing counted or put", async () => {
    const { service, published, limits, inFlight } = world();
    const big = data({ topic_hint: "grid fees", notes: "a".repeat(20_000) });
    const refused = await result(await answerA2a(rpc("SendMessage", big), service("acme")));
    expect(refused.error).toMatchObject({ code: -32602 });
    const violations = detail(refused.error, "BadRequest")?.fieldViolations as unknown[];
    expect(JSON.stringify(violations)).toMatch(/at most 16384 bytes/);
    expect(published).toEqual([]);
    expect(limits.counts.size).toBe(0);
    expect(inFlight.counted.size).toBe(0);
  });

  it("a start the bus does not take no longer counts against the tenant", async () => {
    const { service, inFlight } = world();
    const failing = service("acme");
    const down: A2aService = {
      ...failing,
      ports: {
        ...failing.ports,
        publisher: {
          publish: async (_topic, envelopes) =>
            envelopes.map((e) => ({
              eventId: e.event_id,
              code: "Throttling",
              message: "slow down",
            })),
        },
      },
    };
    const answer = await result(await answerA2a(rpc("SendMessage", message("grid fees")), down));
    // The SDK answers an executor's failure with its own words; the run is no longer counted.
    expect(answer.error?.code).toBe(-32603);
    expect(inFlight.counted.get("acme")).toEqual([]);
  });
});
