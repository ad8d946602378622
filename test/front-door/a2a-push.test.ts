import type { LookupFunction } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { takes } from "../../functions/core/direct-delivery";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import type { EventStore, StoredState } from "../../functions/core/ports";
import {
  MemoryTaskPushConfigs,
  pushUrlProblem,
  type TaskPushRecord,
} from "../../functions/front-door/a2a/push-configs";
import {
  deliverTaskPushes,
  PUSH_DELIVERY_DEFAULTS,
  type PushDeliveryPorts,
} from "../../functions/front-door/a2a/push-delivery";
import { PUSH_EVENT_RULES } from "../../functions/front-door/a2a/push-events";
import type { PushRequest } from "../../functions/front-door/a2a/push-transport";
import type { A2aPorts } from "../../functions/front-door/a2a/run-agent";
import { type A2aAnswer, type A2aService, answerA2a } from "../../functions/front-door/a2a/serve";
import { runIdOfTask, taskIdOfRun } from "../../functions/front-door/a2a/task";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import { createA2aPushHandler } from "../../functions/handlers/a2a-push";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { type Envelope, registry, type Topic } from "../../schemas";
import { newUlid, unvalidatedEnvelope } from "../support/factories";
import { sqsEvent, sqsRecord } from "../support/lambda-events";
import { startWebhook, type TestWebhook } from "../support/push-webhook";
import { REFERENCE_FRONT_DOOR_WORKFLOWS } from "../support/reference";

/**
 * A2A push notifications in memory (functions/front-door/a2a/push-*.ts): the config methods
 * through the SDK's JSON-RPC handler over the task records' in-memory twin (a URL checked, a
 * tenant's configs its own), and the delivery from stored events (SQS records of the push queue,
 * as the relay sends them) to a webhook the test runs on 127.0.0.1: the states in order, each
 * once, the token sent back, a failing webhook retried and then recorded, a slow one timed out, a
 * name connected to at the address it was checked at (an injected resolver: no DNS lookup), and
 * only a failing run's messages received again. On the local stack: test/e2e/a2a-agent.test.ts.
 */

process.env.POWERTOOLS_METRICS_DISABLED = "true";

const TASK = "0b1c2d3e-4f50-4617-8899-aabbccddeeff";
const RUN = runIdOfTask(TASK) ?? "";
const OFFERED = {
  description: "Reviews an article",
  workflow: "long-form",
  textInput: "topic_hint",
};

type RunStatus = "submitted" | "working" | "input-required" | "completed" | "failed";

/** A run's state whose task is in `status`, of `tenant`. */
function runState(status: RunStatus, tenant = "acme"): OrchestratorState {
  const ended = status === "completed" || status === "failed";
  const node = {
    submitted: { state: "READY" },
    working: { state: "RUNNING" },
    "input-required": { state: "RUNNING" },
    completed: { state: "COMPLETED", output: { verdict: "approve" } },
    failed: { state: "FAILED", error: { code: "x", message: "refused" } },
  }[status];
  const blocked = {
    since: "2026-12-05T10:00:00Z",
    confirm_by: "2026-12-05T11:00:00Z",
    question: "Sure?",
  };
  return {
    tenant_id: tenant,
    workflow: "long-form",
    run: {
      workflow: { name: "content.long-form", version: 1 },
      status: ended ? status.toUpperCase() : "RUNNING",
      nodes: { review: { ...node, assigned_generation: 1 } },
    },
    leases:
      status === "input-required"
        ? { review: { generation: 1, expires_at: "2026-12-05T12:00:00Z", blocked } }
        : {},
    timeline: [],
  } as unknown as OrchestratorState;
}

/** The runs' stored states, as the state table gives them (with the run's checkpoints). */
function runStore() {
  const runs = new Map<string, { data: OrchestratorState; checkpoints: Record<string, number> }>();
  const store: Pick<EventStore, "load"> = {
    async load({ state }) {
      const run = runs.get(state?.id ?? "");
      const stored: StoredState | undefined =
        run && state
          ? {
              aggregate: state,
              revision: 1,
              version: 1,
              data: run.data,
              gate: { checkpoints: run.checkpoints, recent: {} },
            }
          : undefined;
      return { inboxHit: false, checkpoint: 0, state: stored };
    },
  };
  return { runs, store };
}

/**
 * A stored event of run `runId` (on the run's own stream, or on a step role's) as the relay sends
 * it to the push queue: an SQS record of the run's message group, the envelope its body.
 */
function relayed(runId: string, version: number, stream = { type: "dag_run", id: runId }) {
  const envelope: Envelope = {
    ...unvalidatedEnvelope("node.blocked", {}, { ...stream, version }),
    event_id: newUlid(),
    order_key: runId,
  };
  return sqsRecord({
    body: JSON.stringify(envelope),
    groupId: runId,
    deduplicationId: envelope.event_id,
  });
}

function acmeRecord(url: string, extra: Partial<TaskPushRecord> = {}): TaskPushRecord {
  return {
    tenant: "acme",
    configs: [{ id: "hook-1", url, token: "secret-of-acme" }],
    failures: [],
    revision: 1,
    ...extra,
  };
}

describe("a push notification URL", () => {
  it("is https to a public host, or loopback where the local stack allows it", () => {
    expect(pushUrlProblem("https://hooks.example.com/a2a?x=1", false)).toBeUndefined();
    expect(pushUrlProblem("https://203.0.113.9/hook", false)).toBeUndefined();
    expect(pushUrlProblem("http://hooks.example.com/a2a", false)).toMatch(/must be https/);
    expect(pushUrlProblem("not a url", false)).toMatch(/is not a URL/);
    expect(pushUrlProblem("https://user:pw@hooks.example.com/", false)).toMatch(/credentials/);
    for (const inward of [
      "https://127.0.0.1/hook",
      "https://localhost:8443/hook",
      "https://169.254.169.254/latest/meta-data",
      "https://10.0.0.5/hook",
      "https://172.20.1.1/hook",
      "https://192.168.1.10/hook",
      "https://100.64.0.1/hook",
      "https://[::1]/hook",
      "https://[fd12::1]/hook",
      "https://[fe80::1]/hook",
      "https://[::ffff:10.0.0.1]/hook",
      "https://metadata.google.internal/hook",
      "https://intranet/hook",
    ])
      expect(pushUrlProblem(inward, false), inward).toMatch(/loopback, link-local or private/);
    expect(pushUrlProblem("http://127.0.0.1:9999/hook", true)).toBeUndefined();
    expect(pushUrlProblem("http://localhost:9999/hook", true)).toBeUndefined();
    // The allowance is loopback's only: the network's other addresses stay refused.
    expect(pushUrlProblem("https://10.0.0.5/hook", true)).toMatch(/private/);
    expect(pushUrlProblem("http://10.0.0.5/hook", true)).toMatch(/must be https/);
  });

  it("names the run of an A2A task, and no other run", () => {
    expect(taskIdOfRun(RUN)).toBe(TASK);
    expect(taskIdOfRun("run_01JAAAAAAAAAAAAAAAAAAAAAAA")).toBeUndefined();
    expect(taskIdOfRun(`${RUN}x`)).toBeUndefined();
  });
});

/** An offered reviewer whose runs the test sets, with push configs kept in memory. */
function world(options: { push?: boolean } = {}) {
  const { runs, store } = runStore();
  const configs = new MemoryTaskPushConfigs();
  let id = 0;
  let now = Date.parse("2026-12-05T10:00:00Z");
  const clock = { now: () => new Date(now) };
  // The front door's admission, as the stream function is given it: the reference workflows.
  const inFlight = new InMemoryRunsInFlight();
  const admission: A2aPorts["admission"] = {
    limits: new InMemoryTenantLimits(),
    runs: inFlight,
    controls: new InMemoryModelControls(),
    states: { loadStates: async () => [] },
    workflows: REFERENCE_FRONT_DOOR_WORKFLOWS,
    clock,
  };
  const service = (tenant: string): A2aService => ({
    agents: { review: OFFERED },
    ports: {
      store,
      registry,
      clock,
      admission,
      sleep: async (ms) => {
        now += ms;
      },
      ids: { next: () => `01JAAAAAAAAAAAAAAAAAAAA${String(++id).padStart(3, "0")}` },
      publisher: { publish: async () => [] },
      ...(options.push === false ? {} : { pushConfigs: configs }),
    },
    settings: {
      pollMs: 1000,
      maxSeconds: 1,
      allowLoopbackPush: true,
      limits: { requestsPerMinute: 600, runsInFlight: 20 },
    },
    caller: async () => ({ tenantId: tenant, userId: `user_${tenant}` }),
  });
  return { runs, configs, service, inFlight };
}

const rpc = (method: string, params: unknown) => ({
  method: "POST",
  path: "/v1/a2a/review",
  headers: { host: "door.example", "a2a-version": "1.0" },
  requestId: "r",
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
});

async function result(
  answer: A2aAnswer,
): Promise<{ result?: Record<string, unknown>; error?: { message: string } }> {
  if (!("body" in answer)) throw new Error("a stream, where a JSON answer was expected");
  return JSON.parse(answer.body);
}

describe("the push config methods", () => {
  it("the card offers push where configs are kept, and not elsewhere", async () => {
    const card = async (push: boolean) => {
      const answer = await answerA2a(
        {
          method: "GET",
          path: "/v1/a2a/review/.well-known/agent-card.json",
          headers: { host: "door.example" },
          requestId: "r",
        },
        world({ push }).service("acme"),
      );
      return JSON.parse("body" in answer ? answer.body : "{}").capabilities;
    };
    expect(await card(true)).toMatchObject({ streaming: true, pushNotifications: true });
    expect((await card(false)).pushNotifications ?? false).toBe(false);
    const refused = await result(
      await answerA2a(
        rpc("ListTaskPushNotificationConfigs", { taskId: TASK }),
        world({ push: false }).service("acme"),
      ),
    );
    expect(refused.error?.message).toMatch(/push notification/i);
  });

  it("create, get, list and delete a task's configs; a bad URL is refused; another tenant finds nothing", async () => {
    const { runs, configs, service } = world();
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const hook = { taskId: TASK, url: "http://127.0.0.1:9/hook", token: "t-1" };
    const created = await result(
      await answerA2a(rpc("CreateTaskPushNotificationConfig", hook), service("acme")),
    );
    expect(created.result).toMatchObject({ taskId: TASK, url: hook.url, token: "t-1" });
    const id = String(created.result?.id);
    expect(id).not.toBe("");
    expect(configs.records.get(RUN)).toMatchObject({
      tenant: "acme",
      configs: [{ id, url: hook.url, token: "t-1" }],
    });
    const got = await result(
      await answerA2a(rpc("GetTaskPushNotificationConfig", { taskId: TASK, id }), service("acme")),
    );
    expect(got.result).toMatchObject({ id, url: hook.url });

    const bad = await result(
      await answerA2a(
        rpc("CreateTaskPushNotificationConfig", { ...hook, url: "https://169.254.169.254/x" }),
        service("acme"),
      ),
    );
    expect(bad.error?.message).toMatch(/169\.254\.169\.254 is loopback, link-local or private/);
    const plain = await result(
      await answerA2a(
        rpc("CreateTaskPushNotificationConfig", { ...hook, url: "http://hooks.example.com/" }),
        service("acme"),
      ),
    );
    expect(plain.error?.message).toMatch(/must be https/);

    for (const call of [
      rpc("CreateTaskPushNotificationConfig", { ...hook, url: "https://evil.example/" }),
      rpc("GetTaskPushNotificationConfig", { taskId: TASK, id }),
      rpc("ListTaskPushNotificationConfigs", { taskId: TASK }),
      rpc("DeleteTaskPushNotificationConfig", { taskId: TASK, id }),
    ]) {
      const refused = await result(await answerA2a(call, service("globex")));
      expect(refused.error?.message).toMatch(/not found/i);
    }
    expect(configs.records.get(RUN)?.configs.map((c) => c.url)).toEqual([hook.url]);

    const listed = await result(
      await answerA2a(rpc("ListTaskPushNotificationConfigs", { taskId: TASK }), service("acme")),
    );
    expect(listed.result?.configs).toHaveLength(1);
    await answerA2a(rpc("DeleteTaskPushNotificationConfig", { taskId: TASK, id }), service("acme"));
    expect(configs.records.get(RUN)?.configs).toEqual([]);
  });

  it("a message's push config is kept with the task it starts, under the caller's tenant", async () => {
    const { configs, service } = world();
    const sent = await result(
      await answerA2a(
        rpc("SendMessage", {
          message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "tidal power" }] },
          configuration: {
            returnImmediately: true,
            taskPushNotificationConfig: { url: "http://127.0.0.1:9/hook", token: "t-2" },
          },
        }),
        service("acme"),
      ),
    );
    const taskId = String((sent.result?.task as { id?: string } | undefined)?.id);
    expect(configs.records.get(runIdOfTask(taskId) ?? "")).toMatchObject({
      tenant: "acme",
      configs: [{ url: "http://127.0.0.1:9/hook", token: "t-2" }],
    });
  });
});

describe("a message whose push config is refused", () => {
  const send = (method: string) =>
    rpc(method, {
      message: { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "tidal power" }] },
      configuration: { taskPushNotificationConfig: { url: "http://10.0.0.1/hook" } },
    });

  it("starts no run and holds none of its tenant's runs in flight", async () => {
    const { service, inFlight, configs } = world();
    const refused = await result(await answerA2a(send("SendMessage"), service("acme")));
    expect(refused.error?.message).toMatch(/https/);
    expect(inFlight.counted.get("acme") ?? []).toEqual([]);
    expect(configs.records.size).toBe(0);
  });

  it("nor as a stream, once the stream has ended", async () => {
    const { service, inFlight } = world();
    const answer = await answerA2a(send("SendStreamingMessage"), service("acme"));
    if (!("stream" in answer)) throw new Error("a JSON answer, where a stream was expected");
    const events: string[] = [];
    for await (const event of answer.stream) events.push(event);
    expect(events.join("")).toMatch(/^event: error/);
    expect(inFlight.counted.get("acme") ?? []).toEqual([]);
  });
});

describe("delivery from the stored events", () => {
  let webhook: TestWebhook | undefined;
  afterEach(async () => {
    await webhook?.close();
    webhook = undefined;
  });

  function delivery(configs: MemoryTaskPushConfigs, store: Pick<EventStore, "load">) {
    const slept: number[] = [];
    let now = Date.parse("2026-12-05T10:00:00Z");
    const ports: PushDeliveryPorts = {
      store,
      configs,
      clock: { now: () => new Date(now) },
      sleep: async (ms) => {
        slept.push(ms);
        now += ms;
      },
    };
    const settings = { ...PUSH_DELIVERY_DEFAULTS, allowLoopback: true, timeoutMs: 2000 };
    return { ports, settings, slept };
  }

  it("posts each change of the task's state once, in order, with its token and a notification id", async () => {
    webhook = await startWebhook();
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    configs.records.set(RUN, acmeRecord(webhook.url));
    const { ports, settings } = delivery(configs, store);
    let version = 0;
    for (const status of [
      "working",
      "working",
      "input-required",
      "working",
      "completed",
    ] as const) {
      runs.set(RUN, { data: runState(status), checkpoints: {} });
      await deliverTaskPushes([relayed(RUN, ++version)], ports, settings);
    }
    // A message received again (the queue's redelivery) delivers nothing twice.
    await deliverTaskPushes([relayed(RUN, version)], ports, settings);
    expect(webhook.states()).toEqual([
      "TASK_STATE_WORKING",
      "TASK_STATE_INPUT_REQUIRED",
      "TASK_STATE_WORKING",
      "TASK_STATE_COMPLETED",
    ]);
    const ids = webhook.received.map((r) => r.headers["x-a2a-notification-id"]);
    expect(ids).toEqual([`${TASK}:1`, `${TASK}:2`, `${TASK}:3`, `${TASK}:4`]);
    expect(webhook.received.map((r) => r.body.task?.metadata?.agentbus?.notification_id)).toEqual(
      ids,
    );
    for (const push of webhook.received) {
      expect(push.headers["x-a2a-notification-token"]).toBe("secret-of-acme");
      expect(push.headers["content-type"]).toBe("application/a2a+json");
      expect(push.body.task?.id).toBe(TASK);
    }
    expect(configs.records.get(RUN)?.delivered).toEqual({ state: "TASK_STATE_COMPLETED", seq: 4 });
  });

  it("waits for the orchestrator to apply a step role's report before it reads the task", async () => {
    webhook = await startWebhook();
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    configs.records.set(
      RUN,
      acmeRecord(webhook.url, { delivered: { state: "TASK_STATE_WORKING", seq: 1 } }),
    );
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const report = relayed(RUN, 3, { type: "agent_run", id: "ar_review-1" });
    const { ports, settings } = delivery(configs, store);
    let waited = 0;
    // The orchestrator applies the report while the delivery waits.
    ports.sleep = async (ms) => {
      waited += ms;
      runs.set(RUN, {
        data: runState("input-required"),
        checkpoints: { "agent_run#ar_review-1": 3 },
      });
    };
    await deliverTaskPushes([report], ports, settings);
    expect(waited).toBe(settings.pollMs);
    expect(webhook.states()).toEqual(["TASK_STATE_INPUT_REQUIRED"]);
  });

  it("retries a failing webhook with backoff, then records what it gave up on; other runs go on", async () => {
    webhook = await startWebhook({ answer: (n) => (n <= 2 ? 503 : 200) });
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    configs.records.set(RUN, acmeRecord(webhook.url));
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const { ports, settings, slept } = delivery(configs, store);
    const {
      outcomes: [first],
    } = await deliverTaskPushes([relayed(RUN, 1)], ports, settings);
    expect(webhook.received).toHaveLength(3);
    expect(slept).toEqual([1000, 2000]);
    expect(first?.failed).toEqual([]);
    // The same notification each time: the receiver can tell a retry from a new state.
    expect(new Set(webhook.received.map((r) => r.headers["x-a2a-notification-id"])).size).toBe(1);

    const down = await startWebhook({ answer: () => 500 });
    const OTHER = "1b1c2d3e-4f50-4617-8899-aabbccddeeff";
    const other = runIdOfTask(OTHER) ?? "";
    try {
      configs.records.set(RUN, {
        ...acmeRecord(down.url),
        revision: 9,
        delivered: { state: "TASK_STATE_WORKING", seq: 1 },
      });
      configs.records.set(other, acmeRecord(webhook.url));
      runs.set(RUN, { data: runState("completed"), checkpoints: {} });
      runs.set(other, { data: runState("working"), checkpoints: {} });
      const { outcomes } = await deliverTaskPushes(
        [relayed(RUN, 2), relayed(other, 1)],
        ports,
        settings,
      );
      expect(down.received).toHaveLength(3);
      expect(outcomes.find((o) => o.runId === other)?.delivered).toEqual(["hook-1"]);
      expect(configs.records.get(RUN)?.failures).toEqual([
        {
          config_id: "hook-1",
          notification_id: `${TASK}:2`,
          state: "TASK_STATE_COMPLETED",
          at: expect.any(String),
          reason: "the webhook answered 500 (3 attempts)",
        },
      ]);
      expect(configs.records.get(RUN)?.delivered?.seq).toBe(2);
    } finally {
      await down.close();
    }
  });

  it("gives up on a slow webhook after its timeout", async () => {
    webhook = await startWebhook({ delayMs: 5000 });
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    configs.records.set(RUN, acmeRecord(webhook.url));
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const { ports, settings } = delivery(configs, store);
    const {
      outcomes: [outcome],
    } = await deliverTaskPushes([relayed(RUN, 1)], ports, {
      ...settings,
      attempts: 1,
      timeoutMs: 200,
    });
    expect(outcome?.failed[0]?.reason).toMatch(/did not answer.*\(1 attempts\)/);
  });

  it("refuses at delivery a name that resolves into the network, and reads nothing for runs without configs", async () => {
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    configs.records.set(RUN, { ...acmeRecord("https://hooks.example.com/a2a") });
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const { ports, settings } = delivery(configs, store);
    const net = network({});
    const {
      outcomes: [outcome],
    } = await deliverTaskPushes(
      [relayed(RUN, 1), relayed("run_not_an_a2a_task", 1)],
      { ...ports, resolve: async () => ["10.1.2.3"], post: net.post },
      { ...settings, allowLoopback: false },
    );
    expect(net.posted).toEqual([]);
    expect(outcome?.failed[0]?.reason).toMatch(/resolves to 10\.1\.2\.3, inside the network/);
  });

  it("connects to the address it checked: a name that answers otherwise the second time never reaches inside", async () => {
    const outside = await startWebhook();
    const inside = await startWebhook();
    try {
      const { runs, store } = runStore();
      const configs = new MemoryTaskPushConfigs();
      configs.records.set(RUN, acmeRecord("https://hooks.example.com/a2a"));
      runs.set(RUN, { data: runState("working"), checkpoints: {} });
      const { ports, settings } = delivery(configs, store);
      // A public address first, then loopback: DNS rebinding.
      const asked: string[] = [];
      const rebinding = async (host: string) => {
        asked.push(host);
        return asked.length === 1 ? ["203.0.113.9"] : ["127.0.0.1"];
      };
      // The test's network: the public address is the outside webhook, loopback the inside one.
      const net = network({ "203.0.113.9": outside.url, "127.0.0.1": inside.url });
      const deliver = (post: PushDeliveryPorts["post"]) =>
        deliverTaskPushes(
          [relayed(RUN, 1)],
          { ...ports, resolve: rebinding, post },
          { ...settings, allowLoopback: false },
        );
      const {
        outcomes: [outcome],
      } = await deliver(net.post);
      expect(outcome?.delivered).toEqual(["hook-1"]);
      expect(asked).toEqual(["hooks.example.com"]);
      expect(net.connected).toEqual(["203.0.113.9"]);
      expect(outside.received).toHaveLength(1);
      expect(inside.received).toHaveLength(0);

      // The control: a connection that resolves the name again itself (as fetch did after the
      // check) is carried inside by the second answer.
      configs.records.set(RUN, acmeRecord("https://hooks.example.com/a2a"));
      runs.set(RUN, { data: runState("completed"), checkpoints: {} });
      await deliver(async (url, init) => {
        const [address = ""] = await rebinding(new URL(url).hostname);
        return net.post(url, { ...init, lookup: fixedLookup(address) });
      });
      expect(inside.received).toHaveLength(1);
    } finally {
      await outside.close();
      await inside.close();
    }
  });

  it("by default POSTs over node:http to the address the injected resolver gave, its name the Host", async () => {
    webhook = await startWebhook();
    const { runs, store } = runStore();
    const configs = new MemoryTaskPushConfigs();
    const port = new URL(webhook.url).port;
    // A name the local stack allows; the injected resolver answers it, not the system's.
    configs.records.set(RUN, acmeRecord(`http://localhost:${port}/hook`));
    runs.set(RUN, { data: runState("working"), checkpoints: {} });
    const { ports, settings } = delivery(configs, store);
    const asked: string[] = [];
    const resolve = async (host: string) => {
      asked.push(host);
      return ["127.0.0.1"];
    };
    await deliverTaskPushes([relayed(RUN, 1)], { ...ports, resolve }, settings);
    expect(asked).toEqual(["localhost"]);
    expect(webhook.states()).toEqual(["TASK_STATE_WORKING"]);
    expect(webhook.received[0]?.headers.host).toBe(`localhost:${port}`);
  });
});

describe("what the relay sends the push queue", () => {
  const pushFeed = { group: "a2a-push", queue: "q.fifo", rules: PUSH_EVENT_RULES };
  const placed = (topic: Topic, type: string, stream: string, orderKey = RUN) => ({
    topic,
    envelope: {
      ...unvalidatedEnvelope(type, {}, { type: stream, id: "x_1", version: 1 }),
      order_key: orderKey,
    },
  });

  it("takes what moves a task: a run's own commands, its end, a step's block, a child's approval request", () => {
    for (const [topic, type, stream] of [
      ["commands", "review.requested", "dag_run"],
      ["commands", "review.confirm.requested", "dag_run"],
      ["events", "workflow.completed", "dag_run"],
      ["events", "workflow.cancelled", "dag_run"],
      ["events", "workflow.rejected", "dag_run"],
      ["events", "node.blocked", "agent_run"],
      ["events", "workflow.child.approval.requested", "dag_run"],
    ] as const)
      expect(takes(pushFeed, placed(topic, type, stream)), type).toBe(true);
  });

  it("leaves out the step roles' answers, other streams' commands and what is no run's", () => {
    expect(takes(pushFeed, placed("events", "step.completed", "agent_run"))).toBe(false);
    expect(takes(pushFeed, placed("commands", "review.requested", "agent_run"))).toBe(false);
    expect(takes(pushFeed, placed("events", "conversation.message.received", "conv"))).toBe(false);
    expect(takes(pushFeed, placed("commands", "review.requested", "dag_run", "conv_1"))).toBe(
      false,
    );
    expect(takes(pushFeed, placed("events", "workflow.completed", "dag_run", "conv_1"))).toBe(
      false,
    );
  });
});

describe("the push function on its queue", () => {
  it("names for receiving again only the messages of a run whose tables fail, and a message that is no stored event with the rest of its group", async () => {
    const webhook = await startWebhook();
    try {
      const { runs, store } = runStore();
      const OTHER = runIdOfTask("1b1c2d3e-4f50-4617-8899-aabbccddeeff") ?? "";
      const THIRD = runIdOfTask("2b1c2d3e-4f50-4617-8899-aabbccddeeff") ?? "";
      const configs = new MemoryTaskPushConfigs();
      for (const run of [RUN, OTHER, THIRD]) {
        configs.records.set(run, acmeRecord(webhook.url));
        runs.set(run, { data: runState("working"), checkpoints: {} });
      }
      const failing: Pick<EventStore, "load"> = {
        load: async (keys) => {
          if (keys.state?.id === RUN) throw new Error("ProvisionedThroughputExceededException");
          return store.load(keys);
        },
      };
      const push = createA2aPushHandler({
        env: { STATE_TABLE: "agentbus-state", A2A_PUSH_ALLOW_LOOPBACK: "true" },
        store: failing,
        configs,
        sleep: async () => {},
      });
      const records = [
        relayed(RUN, 1),
        relayed(OTHER, 1),
        relayed(THIRD, 1),
        sqsRecord({ body: "{not json", groupId: THIRD }),
        relayed(THIRD, 2),
        relayed(RUN, 2),
      ];
      const response = await push(sqsEvent(records));
      const id = (i: number) => records[i]?.messageId;
      expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
        [id(0), id(5), id(3), id(4)].sort(),
      );
      // The other runs' tasks were told, the failing run's not.
      expect(webhook.states()).toEqual(["TASK_STATE_WORKING", "TASK_STATE_WORKING"]);
      expect(configs.records.get(RUN)?.delivered).toBeUndefined();
      expect(configs.records.get(THIRD)?.delivered?.seq).toBe(1);
    } finally {
      await webhook.close();
    }
  });
});

/** A socket's lookup that always hands over `address`. */
function fixedLookup(address: string): LookupFunction {
  return (_host, options, callback) =>
    options.all ? callback(null, [{ address, family: 4 }]) : callback(null, address, 4);
}

/**
 * A transport as the network carries a POST: the host is resolved by the lookup the delivery gives
 * the socket, and the address it hands over is where the POST goes (`routes`: address -> the URL
 * of a webhook of the test on 127.0.0.1); the addresses connected to, and the URLs posted.
 */
function network(routes: Record<string, string>) {
  const connected: string[] = [];
  const posted: string[] = [];
  const post = async (url: string, init: PushRequest): Promise<number> => {
    const address = await new Promise<string>((resolve, reject) =>
      init.lookup(new URL(url).hostname, { all: false }, (error, found) =>
        error ? reject(error) : resolve(String(found)),
      ),
    );
    connected.push(address);
    const route = routes[address];
    if (!route) throw new Error(`no route to ${address}`);
    posted.push(url);
    const answer = await fetch(route, { method: "POST", headers: init.headers, body: init.body });
    return answer.status;
  };
  return { post, connected, posted };
}
