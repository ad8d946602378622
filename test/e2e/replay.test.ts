import { GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { ListReplaysCommand, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { SendMessageCommand } from "@aws-sdk/client-sqs";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StateItem, storedGate, storedStateOf } from "../../functions/adapters/dynamodb/items";
import {
  InboxAttr,
  inboxKey,
  StateAttr,
  streamKey,
} from "../../functions/adapters/dynamodb/tables";
import type { TaskView } from "../../functions/roles/task-projection/task-projection";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { runScenario, type ScenarioResult } from "../../lib/dev/local/scenario";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { listDeadLetters } from "../../lib/operator/dead-letters";
import type { DeadLetterView } from "../../lib/operator/views";
import { auditedOutcomes } from "../support/audit";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";

const STAGE = `rpl-${Date.now().toString(36)}`;
const GROUP = "task-projection";
const DAY = 86_400_000;

/**
 * `agentbus replay` on the local stack after the reference workload: a window of the events
 * archive replayed to one group reaches that group only and changes nothing it already applied;
 * a replayed unsequenced message older than the inbox's time to live is discarded as expired,
 * while an old dead letter redriven is applied; a repeated command starts nothing; bad input and a
 * dry run start nothing.
 */
describe("agentbus replay", () => {
  let env: LocalEnvironment;
  let scenario: ScenarioResult;
  let from = "";
  let to = "";

  const cli = localCli(() => env, STAGE, { AGENTBUS_OPERATOR: "ops-oncall" });
  const replays = async () =>
    (
      await env.clients.eventbridge.send(
        new ListReplaysCommand({ NamePrefix: `agentbus-${STAGE}-` }),
      )
    ).Replays?.map((r) => `${r.ReplayName} ${r.State}`) ?? [];
  const viewOf = async (taskId: string) =>
    (await env.store.load({ state: { type: "task_view", id: taskId } })).state?.data as
      | TaskView
      | undefined;
  const taskC = () => scenario.views.C?.task_id ?? "";
  const views = async () =>
    Promise.all(Object.values(scenario.views).map((v) => viewOf(v?.task_id ?? "")));
  /** How many outcomes each event has had so far, to find what a step added. */
  const mark = () => new Map([...env.observations.deliveries].map(([id, ds]) => [id, ds.length]));
  const since = (before: Map<string, number>) =>
    [...env.observations.deliveries].flatMap(([id, ds]) =>
      ds.slice(before.get(id) ?? 0).map((d) => ({ ...d, eventId: id })),
    );

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
    from = new Date(Date.now() - 1000).toISOString();
    scenario = await runScenario(env);
    await env.runtime.idle();
    to = new Date().toISOString();
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("ran the reference workload", () => {
    expect(scenario.checks.filter((c) => !c.ok)).toEqual([]);
  });

  it("a dry run shows the archive, the rule, the window and an estimate, and starts nothing", async () => {
    const dry = await cli("replay", "--from", from, "--to", to, "--group", GROUP, "--dry-run");
    expect(dry.stderr).toBe("");
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(env.deployment.outputs.EventsArchiveArn);
    expect(dry.stdout).toContain(env.deployment.outputs.TaskProjectionEventsRuleArn);
    expect(dry.stdout).toContain(`window ${from} .. ${to}`);
    // Tasks A (4 events), B (3) and C (1): the stored events of the group's types.
    expect(Number(/about (\d+) stored event/.exec(dry.stdout)?.[1])).toBeGreaterThanOrEqual(8);
    expect(dry.stdout).toContain("nothing started");
    expect(await replays()).toEqual([]);
  }, 240_000);

  it("refuses bad input with exit code 2 and starts no replay", async () => {
    const now = Date.now();
    const cases: [string[], RegExp][] = [
      [["--from", "yesterday", "--to", to], /not an ISO 8601 time/],
      [["--from", "2026-11-30T10:00", "--to", to], /not an ISO 8601 time/],
      [["--from", to, "--to", from], /is not before --to/],
      [["--from", from, "--to", new Date(now + 3_600_000).toISOString()], /in the future/],
      [["--from", new Date(now - 31 * DAY).toISOString(), "--to", to], /outside the retention/],
      [["--from", from, "--to", to, "--group", "no-such-group"], /groups: .*task-projection/],
      [["--from", from], /--to/],
    ];
    const results = await Promise.all(cases.map(([args]) => cli("replay", ...args)));
    for (const [i, [args, message]] of cases.entries()) {
      expect(results[i]?.code, args.join(" ")).toBe(2);
      expect(results[i]?.stderr, args.join(" ")).toMatch(message);
    }
    expect(await replays()).toEqual([]);
  }, 240_000);

  it("replays the window to one group only, which applies nothing twice", async () => {
    const before = await views();
    const deadBefore = await listDeadLetters(env.ops);
    const deliveries = env.channel.deliveries().length;
    const modelCalls = env.model.calls().length;
    const seen = mark();
    const result = await cli(
      "replay",
      "--from",
      from,
      "--to",
      to,
      "--group",
      GROUP,
      "--reason",
      "projection bug fixed",
    );
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const name = /started (agentbus-\S+)/.exec(result.stdout)?.[1] ?? "";
    expect(result.stdout).toContain(`${name}: COMPLETED`);
    expect(await replays()).toEqual([`${name} COMPLETED`]);
    const recorded = /operator\.action\.recorded ([0-9A-Z]{26})/.exec(result.stdout)?.[1] ?? "";
    await waitUntil(
      "the audit record",
      async () => (await auditedOutcomes(env.store, [recorded]))[0],
    );
    // The replayed task events come back to the group as duplicates.
    const taskEvents = scenario.views.A?.history.length ?? 0;
    await waitUntil("the replayed events handled", () =>
      since(seen).filter((d) => d.group === GROUP && d.status === "duplicate").length >= taskEvents
        ? true
        : undefined,
    );
    await env.runtime.idle();

    const handled = since(seen);
    // Only the chosen group got the replay; audit only the record of the action.
    expect(handled.filter((d) => d.group !== GROUP)).toEqual([
      expect.objectContaining({ group: "audit", eventId: recorded, status: "applied" }),
    ]);
    // Nothing applied twice: every replayed delivery was a duplicate, the views are as they were.
    const mine = handled.filter((d) => d.group === GROUP);
    expect(mine.length).toBeGreaterThanOrEqual(10);
    expect(new Set(mine.map((d) => d.status))).toEqual(new Set(["duplicate"]));
    expect(await views()).toEqual(before);
    expect(env.channel.deliveries()).toHaveLength(deliveries);
    expect(env.model.calls()).toHaveLength(modelCalls);
    // The window's invalid message is dead-lettered again by the group's dispatcher (as it was
    // when it first came), and that is all that changed in any dead-letter queue.
    const key = (d: DeadLetterView) => `${d.group} ${d.queue} ${d.eventId} ${d.code}`;
    const added = (await listDeadLetters(env.ops)).map(key);
    for (const k of deadBefore.map(key)) {
      expect(added, `${k} still dead-lettered`).toContain(k);
      added.splice(added.indexOf(k), 1);
    }
    const poison = deadBefore.find((d) => d.group === GROUP && d.code === "envelope.invalid");
    expect(added).toEqual([`${GROUP} buffer ${poison?.eventId} envelope.invalid`]);
  }, 240_000);

  it("the same command again finds the replay it started and starts nothing", async () => {
    const listed = await replays();
    const seen = mark();
    const again = await cli("replay", "--from", from, "--to", to, "--group", GROUP, "--no-wait");
    expect(again.code).toBe(0);
    expect(again.stdout).not.toContain("replayed up to");
    expect(again.stdout).toMatch(
      /already started: agentbus-\S+ \(COMPLETED\); nothing new started/,
    );
    expect(again.stdout).not.toContain("operator.action.recorded");
    expect(await replays()).toEqual(listed);
    await env.runtime.idle();
    expect(since(seen)).toEqual([]);
  }, 240_000);

  it("past the dedup horizon a replayed client message is discarded as expired; an old dead letter redriven applies", async () => {
    // A client's feedback sent eight days ago: applied then, its inbox row since expired (TTL).
    const old = new Date(Date.now() - 8 * DAY);
    const sent = feedback(taskC(), 4, old);
    await env.clients.eventbridge.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: env.buses.events,
            Source: "agentbus.client",
            DetailType: sent.event_type,
            Detail: JSON.stringify(sent),
            Time: old,
          },
        ],
      }),
    );
    await waitUntil("the old feedback applied", async () =>
      (await viewOf(taskC()))?.feedback.count === 2 ? true : undefined,
    );
    await env.clients.dynamodb.send(
      new UpdateItemCommand({
        TableName: env.names.tables.inbox,
        Key: { [InboxAttr.pk]: { S: inboxKey(GROUP, sent.event_id) } },
        UpdateExpression: "SET #ttl = :past",
        ExpressionAttributeNames: { "#ttl": InboxAttr.ttl },
        ExpressionAttributeValues: { ":past": { N: String(Math.floor(Date.now() / 1000) - 60) } },
      }),
    );
    // The view's state item keeps the id among its recent ones until the same time: gone too.
    await expireRecentId(
      env,
      { type: "task_view", id: taskC() },
      sent.event_id,
      Math.floor(Date.now() / 1000) - 60,
    );
    await env.runtime.idle();

    const window = [
      "--from",
      new Date(old.getTime() - DAY).toISOString(),
      "--to",
      new Date(old.getTime() + DAY).toISOString(),
    ];
    const result = await cli("replay", ...window, "--group", GROUP);
    expect(result.code).toBe(0);
    await waitUntil("the replayed feedback discarded", () =>
      env.observations.deliveries
        .get(sent.event_id)
        ?.some((d) => d.group === GROUP && d.status === "discarded" && d.reason === "expired"),
    );
    await env.runtime.idle();
    expect((await viewOf(taskC()))?.feedback).toEqual({ count: 2, rating_total: 9 });
    const [row] = await env.store.inboxRecords(GROUP, [sent.event_id]);
    expect(row).toMatchObject({ outcome: "discarded", reason: "expired" });

    // A dead letter as old, never applied, is not a replay: redriven, it is applied.
    const letter = feedback(taskC(), 2, new Date(Date.now() - 10 * DAY));
    await env.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: env.names.groups[GROUP]?.deadLetterQueue,
        MessageBody: JSON.stringify(letter),
        MessageGroupId: letter.order_key,
        MessageDeduplicationId: letter.event_id,
      }),
    );
    const redrive = await cli("dlq", "redrive", GROUP, "--event-id", letter.event_id);
    expect(redrive.code).toBe(0);
    await waitUntil("the redriven feedback applied", async () =>
      (await viewOf(taskC()))?.feedback.count === 3 ? true : undefined,
    );
    expect((await viewOf(taskC()))?.feedback).toEqual({ count: 3, rating_total: 11 });
  }, 240_000);
});

/**
 * Moves when a state's recent id stops counting to `until` (epoch seconds), in whichever form the
 * item keeps its gate records: the `gate_recent` map, or deflated with its checkpoints in `gate_z`
 * (functions/adapters/dynamodb/items.ts storedGate).
 */
async function expireRecentId(
  env: LocalEnvironment,
  ref: { type: string; id: string },
  eventId: string,
  until: number,
): Promise<void> {
  const TableName = env.names.tables.state;
  const Key = { [StateAttr.pk]: { S: streamKey(ref) } };
  const { Item } = await env.clients.dynamodb.send(
    new GetItemCommand({ TableName, Key, ConsistentRead: true }),
  );
  const deflated = Item?.[StateAttr.gateDeflated]?.B;
  if (!deflated) {
    await env.clients.dynamodb.send(
      new UpdateItemCommand({
        TableName,
        Key,
        UpdateExpression: "SET #recent.#id = :until",
        ExpressionAttributeNames: { "#recent": StateAttr.recent, "#id": eventId },
        ExpressionAttributeValues: { ":until": { N: String(until) } },
      }),
    );
    return;
  }
  const gate = storedStateOf(unmarshall(Item ?? {}) as StateItem).gate;
  if (!gate) throw new Error(`${streamKey(ref)} has no gate records`);
  const stored = storedGate({ ...gate, recent: { ...gate.recent, [eventId]: until } });
  if (!stored.gate_z) throw new Error("the gate records, deflated before, would now be maps");
  await env.clients.dynamodb.send(
    new UpdateItemCommand({
      TableName,
      Key,
      UpdateExpression: "SET #gz = :gz",
      ExpressionAttributeNames: { "#gz": StateAttr.gateDeflated },
      ExpressionAttributeValues: { ":gz": { B: stored.gate_z } },
    }),
  );
}

/** A client's feedback on a task (unsequenced), written at `at`. */
function feedback(taskId: string, rating: number, at: Date) {
  const id = ulid();
  return {
    event_id: id,
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: at.toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    order_key: taskId,
    producer: "web-client",
    payload: { rating },
  };
}
