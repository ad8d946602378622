import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetItemCommand } from "@aws-sdk/client-dynamodb";
import { type Message, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { inboxKey } from "../../functions/adapters/dynamodb/tables";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { fromSdk } from "../../lib/operator/from-sdk";
import {
  awsClients,
  type DeployedStack,
  deployStack,
  dockerAvailable,
  eventually,
  type LocalStack,
  queueName,
  startLocalStack,
  stopCommands,
} from "./localstack";
import { type PlayedScenario, playScenario } from "./scenario";

/**
 * The stack as `cdk deploy` deploys it, deployed with cdklocal into LocalStack (started with
 * Testcontainers), its relay, dispatch and consumer functions running as Lambda functions inside
 * LocalStack behind LocalStack's own event source mappings. The moto suite (test/e2e) covers the
 * same scenario on machines without Docker; this one needs a Docker engine and skips without one.
 */
const docker = await dockerAvailable();
if (!docker.ok) console.warn(`LocalStack suite skipped: ${docker.why}`);

/** Starting LocalStack (image pull), bundling, bootstrap and deploy. */
const SETUP_TIMEOUT_MS = 20 * 60_000;
/** Per check; the first one also waits for the functions' cold starts. */
const CONVERGE_TIMEOUT_MS = 6 * 60_000;
/** After the views converged, how long a late duplicate gets to show up before the final read. */
const SETTLE_MS = 10_000;
const GROUP = taskProjection.group;

const log = (line: string) => console.log(`[localstack] ${line}`);

describe.skipIf(!docker.ok)("AgentBus deployed to LocalStack (Lambda inside LocalStack)", () => {
  const stage = `ls${ulid().slice(-8).toLowerCase()}`;
  let workDir: string | undefined;
  let keepWorkDir = true;
  let localstack: LocalStack | undefined;
  let clients: ReturnType<typeof awsClients> | undefined;
  let stack: DeployedStack;
  let store: DynamoEventStore;
  let played: PlayedScenario;

  const aws = () => {
    if (!clients) throw new Error("setup did not finish");
    return clients;
  };
  const diagnostics = () =>
    localstack
      ? `LocalStack log (errors and warnings, last 40):\n${localstack.logTail(40, /error|warn|exception|traceback/i)}`
      : "";
  const converge = { timeoutMs: CONVERGE_TIMEOUT_MS, diagnostics };

  beforeAll(async () => {
    const started = Date.now();
    workDir = await mkdtemp(join(tmpdir(), "agentbus-localstack-"));
    let mark = Date.now();
    localstack = await startLocalStack();
    log(
      `${localstack.image} at ${localstack.endpoint} (${Math.round((Date.now() - mark) / 1000)} s)`,
    );
    mark = Date.now();
    // Leave the last minutes of the setup budget to the scenario and to a clear error.
    const deadline = started + SETUP_TIMEOUT_MS - 3 * 60_000;
    stack = await deployStack(localstack, { stage, workDir, deadline, log });
    log(`${stack.stackName} deployed (${Math.round((Date.now() - mark) / 1000)} s)`);

    clients = awsClients(localstack.endpoint);
    store = new DynamoEventStore({
      client: fromSdk(clients.dynamodb),
      tables: {
        state: stack.outputs.get("StateTableName"),
        events: stack.outputs.get("EventsTableName"),
        inbox: stack.outputs.get("InboxTableName"),
      },
    });
    const bus = stack.outputs.find(
      "bus of the events topic",
      "BusName",
      (name) => name === `agentbus-${stage}-events`,
    );
    played = await playScenario({ store, eventbridge: clients.eventbridge, bus });
    keepWorkDir = false;
  }, SETUP_TIMEOUT_MS);

  afterAll(async () => {
    try {
      stopCommands(); // when setup timed out while cdklocal was still running
      clients?.destroy();
      await localstack?.stop();
    } finally {
      if (workDir && !keepWorkDir) await rm(workDir, { recursive: true, force: true });
      else if (workDir)
        log(`setup failed; cdklocal output and the assembly are kept in ${workDir}`);
    }
  }, 120_000);

  const loadView = async (taskId: string) => {
    const { state } = await store.load({ state: { type: "task_view", id: taskId } });
    return state?.data as TaskView | undefined;
  };

  const inboxRow = async (eventId: string) => {
    const response = await aws().dynamodb.send(
      new GetItemCommand({
        TableName: stack.outputs.get("InboxTableName"),
        Key: { pk: { S: inboxKey(GROUP, eventId) } },
        ConsistentRead: true,
      }),
    );
    return response.Item ? unmarshall(response.Item) : undefined;
  };

  /** Look at up to 10 messages of a queue without taking them (visibility 0). */
  const peek = async (queueUrl: string): Promise<Message[]> => {
    const response = await aws().sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ["All"],
      }),
    );
    return response.Messages ?? [];
  };

  const groupQueue = (suffix: string) =>
    stack.outputs.find(
      `${GROUP} queue ${suffix}`,
      "QueueUrl",
      (url) => queueName(url) === `agentbus-${stage}-${GROUP}${suffix}`,
    );

  it("task A: the view is delivered, each of v1..v4 applied once, in order", async () => {
    const view = await eventually(
      "task A view delivered",
      () => loadView(played.tasks.A),
      (v) => v?.status === "delivered",
      converge,
    );
    expect(view?.history.map((h) => h.version)).toEqual([1, 2, 3, 4]);
    expect(view?.history.map((h) => h.event_id)).toEqual(played.committed.A.map((e) => e.event_id));
  });

  it("task B: v3 also put straight on the bus; the view converges to v1..v3 in order", async () => {
    const view = await eventually(
      "task B view generated",
      () => loadView(played.tasks.B),
      (v) => v?.status === "generated",
      converge,
    );
    expect(view?.history.map((h) => h.version)).toEqual([1, 2, 3]);
    expect(view?.history.map((h) => h.event_id)).toEqual(played.committed.B.map((e) => e.event_id));
  });

  it("task C: the expired feedback is discarded and recorded in the inbox with its reason", async () => {
    const row = await eventually(
      "inbox row of the expired feedback",
      () => inboxRow(played.expired.event_id),
      (r) => r !== undefined,
      converge,
    );
    expect(row).toMatchObject({
      pk: inboxKey(GROUP, played.expired.event_id),
      outcome: "discarded",
      reason: "expired",
    });
  });

  it("the poison message is in the buffer dead-letter queue with its error code", async () => {
    const bufferDlq = groupQueue("-buffer-dlq");
    const dead = await eventually(
      "poison message in the buffer dead-letter queue",
      async () => (await peek(bufferDlq)).find((m) => eventIdOf(m) === played.poison.event_id),
      (m) => m !== undefined,
      converge,
    );
    expect(dead?.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue).toBe(
      "envelope.invalid",
    );
    expect(dead?.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.reason]?.StringValue).toMatch(
      /correlation_id/,
    );
  });

  it("task C: the feedback put twice is applied once", async () => {
    await eventually(
      "task C view with feedback",
      () => loadView(played.tasks.C),
      (v) => (v?.feedback.count ?? 0) >= 1 && v?.history.length === 1,
      converge,
    );
    // A second delivery would come after the first; give it time before the final read.
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const view = await loadView(played.tasks.C);
    expect(view).toMatchObject({
      status: "accepted",
      feedback: { count: 1, rating_total: 5 },
    });
    expect(view?.history.map((h) => h.version)).toEqual([1]);
    expect(await inboxRow(played.feedback.event_id)).toMatchObject({ outcome: "applied" });
  });

  it("no event of the scenario reached the group's FIFO dead-letter queue", async () => {
    const ours = new Set([
      ...Object.values(played.committed).flatMap((events) => events.map((e) => e.event_id)),
      played.feedback.event_id,
      played.expired.event_id,
    ]);
    const dlq = groupQueue("-dlq.fifo");
    const seen: string[] = [];
    for (let round = 0; round < 3; round++) {
      for (const message of await peek(dlq)) {
        const id = eventIdOf(message);
        if (id && ours.has(id)) seen.push(`${id}: ${deadLetterCode(message)}`);
      }
    }
    expect(seen).toEqual([]);
  });
});

/** The event id of a queued envelope or EventBridge event (`detail` is the envelope). */
function eventIdOf(message: Message): string | undefined {
  try {
    const body = JSON.parse(message.Body ?? "") as {
      event_id?: string;
      detail?: { event_id?: string };
    };
    return body.event_id ?? body.detail?.event_id;
  } catch {
    return undefined;
  }
}

function deadLetterCode(message: Message): string {
  return message.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue ?? "unknown";
}
