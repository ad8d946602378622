import { randomUUID } from "node:crypto";
import {
  type ListTasksRequest,
  type Message,
  Role,
  type StreamResponse,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runIdOfTask } from "../../functions/front-door/a2a/task";
import { NEEDS_CONFIRMATION_MARKER } from "../../functions/roles/content-agents/local-scripts";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { loadRun } from "../../lib/dev/local/scenario/workflow";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { startWebhook } from "../support/push-webhook";

/**
 * A step role offered over A2A (the reference stack's reviewer: `steps.a2a` of the content agents),
 * called through the local front door by @a2a-js/sdk's own client: it reads the agent card, sends
 * a message that starts a long-form run and streams the task until the review asks for a
 * confirmation (`input-required`), answers it with a message on the task, and streams the task to
 * completion; another tenant's token finds no such task. A task's push config sends its states to
 * a webhook the test runs on 127.0.0.1 (the local stack's allowance), from the event store's stream.
 */

const STAGE = `a2a${ulid().slice(-6).toLowerCase()}`;
const TIMEOUT = 240_000;

/** A user's message, as the SDK's types spell it. */
function userMessage(text: string, taskId = ""): Message {
  return {
    messageId: randomUUID(),
    contextId: taskId,
    taskId,
    role: Role.ROLE_USER,
    parts: [
      {
        content: { $case: "text", value: text },
        metadata: undefined,
        filename: "",
        mediaType: "text/plain",
      },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The task's states a stream sent, and the task as it last was. */
async function follow(stream: AsyncIterable<StreamResponse>) {
  const states: TaskState[] = [];
  let task: Task | undefined;
  const artifacts: string[] = [];
  for await (const { payload } of stream) {
    if (payload?.$case === "task") {
      task = payload.value;
      states.push(payload.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
    }
    if (payload?.$case === "statusUpdate")
      states.push(payload.value.status?.state ?? TaskState.TASK_STATE_UNSPECIFIED);
    if (payload?.$case === "artifactUpdate")
      artifacts.push(payload.value.artifact?.artifactId ?? "");
  }
  return { states, task, artifacts };
}

describe("an offered role over A2A, called with @a2a-js/sdk's client", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: STAGE,
      envOverrides: { AGENT_CONFIRM_SECONDS: "600" },
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  const door = () => {
    if (!env.frontDoor) throw new Error("the local stack serves no front door");
    return env.frontDoor;
  };
  const origin = () => door().url.replace(/\/v1$/, "");

  /** The SDK's client of the reviewer, its calls carrying the tenant's token. */
  const clientOf = async (tenant: string): Promise<Client> => {
    const token = await door().issuer.token({ tenant_id: tenant, sub: `u-${tenant}` });
    const fetchImpl: typeof fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("authorization", `Bearer ${token}`);
      return fetch(input, { ...init, headers });
    };
    const factory = new ClientFactory({
      ...ClientFactoryOptions.default,
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }),
    });
    return factory.createFromUrl(`${origin()}/v1/a2a/review/.well-known/agent-card.json`, "");
  };

  it(
    "card, send, stream to input-required, answer, stream to completion; another tenant finds no task",
    async () => {
      const acme = await clientOf("acme");
      const card = await acme.getAgentCard();
      expect(card.name).toBe("review");
      expect(card.capabilities?.streaming).toBe(true);
      expect(card.skills.map((s) => s.id)).toEqual(["review"]);
      expect(card.skills[0]?.description).toContain("long-form article");
      expect(card.supportedInterfaces[0]?.url).toBe(`${origin()}/v1/a2a/review`);
      expect(card.securitySchemes.bearer?.scheme).toMatchObject({
        $case: "httpAuthSecurityScheme",
        value: { scheme: "Bearer", bearerFormat: "JWT" },
      });
      // The stack offers one agent: the well-known card is its.
      const root = await fetch(`${origin()}/.well-known/agent-card.json`);
      expect(root.status).toBe(200);
      expect(((await root.json()) as { name: string }).name).toBe("review");
      // A call without the token is refused before anything is started.
      const anonymous = await fetch(`${origin()}/v1/a2a/review`, { method: "POST", body: "{}" });
      expect(anonymous.status).toBe(401);

      const asked = await follow(
        acme.sendMessageStream({
          tenant: "",
          message: userMessage(`${NEEDS_CONFIRMATION_MARKER} a quote on tidal power fees`),
          configuration: undefined,
          metadata: undefined,
        }),
      );
      const taskId = asked.task?.id ?? "";
      expect(asked.states[0]).toBe(TaskState.TASK_STATE_SUBMITTED);
      expect(asked.states).toContain(TaskState.TASK_STATE_WORKING);
      expect(asked.states.at(-1)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const waiting = await acme.getTask({ tenant: "", id: taskId, historyLength: undefined });
      expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(waiting.status?.message?.metadata?.agentbus).toMatchObject({ step: "review" });

      // Another tenant's token: no such task, to read, to answer or to cancel.
      const globex = await clientOf("globex");
      await expect(
        globex.getTask({ tenant: "", id: taskId, historyLength: undefined }),
      ).rejects.toThrow(/not found/i);
      await expect(
        follow(
          globex.sendMessageStream({
            tenant: "",
            message: userMessage("approve", taskId),
            configuration: undefined,
            metadata: undefined,
          }),
        ),
      ).rejects.toThrow(/not found/i);
      await expect(
        globex.cancelTask({ tenant: "", id: taskId, metadata: undefined }),
      ).rejects.toThrow(/not found/i);

      // The caller's answer, a message on the task: the review resumes and the run completes.
      const answered = await follow(
        acme.sendMessageStream({
          tenant: "",
          message: userMessage("approve: the source confirmed the quote", taskId),
          configuration: undefined,
          metadata: undefined,
        }),
      );
      expect(answered.states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
      // The task as it was answered, then on past the answer to its end.
      expect(answered.states[0]).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(answered.states.slice(1)).not.toContain(TaskState.TASK_STATE_INPUT_REQUIRED);
      expect(answered.artifacts).toContain("review");
      const done = await acme.getTask({ tenant: "", id: taskId, historyLength: undefined });
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(done.artifacts.map((a) => a.artifactId)).toContain("review");

      // The task is the run: the review was BLOCKED, confirmed by the caller, and completed.
      const run = await loadRun(env, runIdOfTask(taskId) ?? "");
      expect(run?.tenant_id).toBe("acme");
      expect(run?.run.status).toBe("COMPLETED");
      expect(run?.timeline.filter((t) => t.node_id === "review").map((t) => t.event)).toEqual(
        expect.arrayContaining(["node.blocked", "node.unblocked", "node.completed"]),
      );
      await expect(
        globex.getTask({ tenant: "", id: taskId, historyLength: undefined }),
      ).rejects.toThrow(/not found/i);
    },
    TIMEOUT * 2,
  );
  it(
    "an operator's approval moves an input-required task on: a subscription follows it to completion",
    async () => {
      const acme = await clientOf("acme");
      const asked = await follow(
        acme.sendMessageStream({
          tenant: "",
          message: userMessage(`${NEEDS_CONFIRMATION_MARKER} a quote on wave power permits`),
          configuration: undefined,
          metadata: undefined,
        }),
      );
      const taskId = asked.task?.id ?? "";
      expect(asked.states.at(-1)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      // The confirmation is one of the approvals an operator sees, and answers.
      const cli = localCli(() => env, STAGE, { AGENTBUS_OPERATOR: "alice" });
      const approved = await cli("approve", runIdOfTask(taskId) ?? "", "--step", "review");
      expect(approved.code, approved.stderr).toBe(0);
      const followed = await follow(acme.resubscribeTask({ tenant: "", id: taskId }));
      expect(followed.states.at(-1)).toBe(TaskState.TASK_STATE_COMPLETED);
      expect(followed.artifacts).toContain("review");
    },
    TIMEOUT * 2,
  );
  it(
    "push notifications: a config set with the message gets the task's states, to completed",
    async () => {
      const webhook = await startWebhook();
      try {
        const acme = await clientOf("acme");
        expect((await acme.getAgentCard()).capabilities?.pushNotifications).toBe(true);
        const asked = await follow(
          acme.sendMessageStream({
            tenant: "",
            message: userMessage(`${NEEDS_CONFIRMATION_MARKER} a quote on offshore wind leases`),
            configuration: {
              acceptedOutputModes: [],
              returnImmediately: false,
              taskPushNotificationConfig: {
                tenant: "",
                id: "",
                taskId: "",
                url: webhook.url,
                token: "acme-webhook-token",
                authentication: undefined,
              },
            },
            metadata: undefined,
          }),
        );
        const taskId = asked.task?.id ?? "";
        expect(asked.states.at(-1)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const page = { tenant: "", taskId, pageSize: 10, pageToken: "" };
        const listed = await acme.listTaskPushNotificationConfig(page);
        expect(listed.configs.map((c) => c.url)).toEqual([webhook.url]);
        const globex = await clientOf("globex");
        await expect(globex.listTaskPushNotificationConfig(page)).rejects.toThrow(/not found/i);
        await expect(
          globex.createTaskPushNotificationConfig({
            tenant: "",
            id: "",
            taskId,
            url: "http://127.0.0.1:9/elsewhere",
            token: "",
            authentication: undefined,
          }),
        ).rejects.toThrow(/not found/i);

        await until(() => webhook.states().includes("TASK_STATE_INPUT_REQUIRED"));
        await follow(
          acme.sendMessageStream({
            tenant: "",
            message: userMessage("approve", taskId),
            configuration: undefined,
            metadata: undefined,
          }),
        );
        await until(() => webhook.states().includes("TASK_STATE_COMPLETED"));
        const states = webhook.states();
        expect(states.at(-1)).toBe("TASK_STATE_COMPLETED");
        expect(states.indexOf("TASK_STATE_INPUT_REQUIRED")).toBeLessThan(
          states.indexOf("TASK_STATE_COMPLETED"),
        );
        for (const push of webhook.received) {
          expect(push.body.task?.id).toBe(taskId);
          expect(push.headers["x-a2a-notification-token"]).toBe("acme-webhook-token");
        }
        // Each state once: the notification ids do not repeat.
        const ids = webhook.received.map((r) => r.headers["x-a2a-notification-id"]);
        expect(new Set(ids).size).toBe(ids.length);
      } finally {
        await webhook.close();
      }
    },
    TIMEOUT * 2,
  );
  it(
    "ListTasks: each tenant lists its own tasks of the agent, newest first, page by page",
    async () => {
      const acme = await clientOf("acme");
      const globex = await clientOf("globex");
      const start = async (client: Client, text: string) => {
        const asked = await follow(
          client.sendMessageStream({
            tenant: "",
            message: userMessage(`${NEEDS_CONFIRMATION_MARKER} ${text}`),
            configuration: undefined,
            metadata: undefined,
          }),
        );
        expect(asked.states.at(-1)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        return asked.task?.id ?? "";
      };
      const older = await start(acme, "a quote on geothermal grants");
      const newer = await start(acme, "a quote on heat pump rebates");
      const theirs = await start(globex, "a quote on solar tariffs");
      const list = (client: Client, params: Partial<ListTasksRequest> = {}) =>
        client.listTasks({
          tenant: "",
          contextId: "",
          status: TaskState.TASK_STATE_UNSPECIFIED,
          pageToken: "",
          statusTimestampAfter: undefined,
          ...params,
        });
      const waiting = await list(acme, { status: TaskState.TASK_STATE_INPUT_REQUIRED });
      const ids = waiting.tasks.map((t) => t.id);
      expect(ids.indexOf(newer)).toBeGreaterThanOrEqual(0);
      expect(ids.indexOf(newer)).toBeLessThan(ids.indexOf(older));
      expect(ids).not.toContain(theirs);
      expect(waiting.tasks.map((t) => t.status?.state)).toEqual(
        ids.map(() => TaskState.TASK_STATE_INPUT_REQUIRED),
      );
      // Page by page: one task a page, each once, the same as the whole list.
      const paged: string[] = [];
      let pageToken = "";
      do {
        const page = await list(acme, { pageSize: 1, pageToken });
        expect(page.tasks.length).toBeLessThanOrEqual(1);
        paged.push(...page.tasks.map((t) => t.id));
        pageToken = page.nextPageToken;
      } while (pageToken !== "" && paged.length < 50);
      expect(paged).toEqual((await list(acme, { pageSize: 100 })).tasks.map((t) => t.id));
      expect(paged).toEqual(expect.arrayContaining([older, newer]));
      // Another tenant sees none of them: not in its list, not by context, not with acme's token.
      const theirList = await list(globex);
      expect(theirList.tasks.map((t) => t.id)).toContain(theirs);
      expect(theirList.tasks.map((t) => t.id)).not.toContain(newer);
      expect((await list(globex, { contextId: newer })).tasks).toEqual([]);
      expect((await list(acme, { contextId: newer })).tasks.map((t) => t.id)).toEqual([newer]);
      const acmePage = await list(acme, { pageSize: 1 });
      expect(acmePage.nextPageToken).not.toBe("");
      await expect(list(globex, { pageToken: acmePage.nextPageToken })).rejects.toThrow(
        /another tenant/,
      );
      // The front door's own list has the same runs.
      const token = await door().issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const runs = await fetch(`${door().url}/runs?status=RUNNING&limit=100`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(runs.status).toBe(200);
      const listed = ((await runs.json()) as { runs: { run_id: string }[] }).runs;
      expect(listed.map((r) => r.run_id)).toEqual(
        expect.arrayContaining([runIdOfTask(older), runIdOfTask(newer)]),
      );
      expect(listed.map((r) => r.run_id)).not.toContain(runIdOfTask(theirs));
    },
    TIMEOUT * 2,
  );
});

/** Wait until `done()` holds, looking every 200 ms, at most `TIMEOUT`. */
async function until(done: () => boolean): Promise<void> {
  const deadline = Date.now() + TIMEOUT;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("the webhook did not receive it in time");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
