import { ScanCommand } from "@aws-sdk/client-dynamodb";
import {
  DeleteRuleCommand,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
  StartReplayCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inflatedJson } from "../../functions/adapters/dynamodb/deflated-json";
import { erasureRecordId } from "../../functions/core/personal-data/erase";
import { ERASED } from "../../functions/core/personal-data/erased";
import { RETENTION, type RetentionPlaceName } from "../../functions/core/retention";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import {
  customerMessage,
  loadConversation,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { PUBLISH_CONTEXT_KEY } from "../../lib/infra/published-types";
import { opsActions } from "../../lib/operator/actions";
import type { Envelope } from "../../schemas";
import { tenantConversationId } from "../../schemas/ids";
import { localCli } from "../support/cli";
import { captureOutput, type LogCapture } from "../support/log-capture";
import { serviceSignedHeaders } from "../support/sigv4";
import { localSupportStack, TIMEOUT } from "./support-stack";

process.env.POWERTOOLS_LOG_LEVEL = "INFO";

const MARKER = "MARKER-pd-41c7";
const CUSTOMER = "cust_marker";

describe("a customer's words on the local stack, and their erasure", () => {
  let capture: LogCapture;
  beforeAll(() => {
    capture = captureOutput();
  });
  afterAll(() => capture.stop());
  // The test's tap is a rule of its own on each bus: the relay publishes every stored type for it.
  const local = localSupportStack("pd", { context: { [PUBLISH_CONTEXT_KEY]: "all" } });
  const cli = localCli(() => local.env, local.stage, { AGENTBUS_OPERATOR: "privacy-desk" });
  /** The conversation view's streams (what rebuilding the projection folds). */
  const VIEW_TYPES = "conversation,support_route,order_lookup,reply,delivery";

  /** Every item of every table holding the marker, as `<table>:<pk>`. */
  async function inTables(marker = MARKER): Promise<string[]> {
    const found: string[] = [];
    for (const [name, table] of Object.entries(local.env.names.tables)) {
      if (!table) continue;
      let start: Record<string, never> | undefined;
      do {
        const page = await local.env.clients.dynamodb.send(
          new ScanCommand({ TableName: table, ExclusiveStartKey: start }),
        );
        for (const raw of page.Items ?? []) {
          const item = unmarshall(raw);
          // A deflated copy (a compact state's data_z, an event's envelope_z) is read inflated.
          const text = JSON.stringify(item, (k, v) =>
            v instanceof Uint8Array
              ? k.endsWith("_z")
                ? (inflatedJson(v) ?? "")
                : Buffer.from(v).toString("latin1")
              : v,
          );
          if (text.includes(marker)) found.push(`${name}:${String(item.pk)}`);
        }
        start = page.LastEvaluatedKey as Record<string, never> | undefined;
      } while (start);
    }
    return found;
  }

  /** Every queue message holding the marker (peeked: visibility 0). */
  async function inQueues(marker = MARKER): Promise<string[]> {
    const urls = [
      ...Object.values(local.env.names.groups).flatMap((g) =>
        [g.queue, g.deadLetterQueue, g.buffer, g.bufferDeadLetterQueue].filter(
          (u): u is string => u !== undefined,
        ),
      ),
      local.env.names.relayFailureQueue,
    ];
    const found: string[] = [];
    for (const url of urls) {
      const got = await local.env.clients.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }),
      );
      for (const m of got.Messages ?? []) if (m.Body?.includes(marker)) found.push(url);
    }
    return found;
  }

  it(
    "keeps the words only where the README says, and nowhere readable once the customer is erased",
    async () => {
      const from = new Date(Date.now() - 1000).toISOString();
      const conversation = `conv_${ulid()}`;
      const asked = customerMessage(conversation, CUSTOMER, `Where is order 123? ${MARKER}`);
      await local.putMessages(asked);
      await local.delivered(conversation, asked.task_id);
      const held = customerMessage(conversation, CUSTOMER, `Help ${MARKER} ${HUMAN_REVIEW_MARKER}`);
      await local.putMessages(held);
      await local.turnReaches(conversation, held.task_id, "held_for_review");
      const approved = await opsActions(local.env.ops).review(held.task_id, "approved", {
        text: `Edited: ${MARKER}`,
        reason: `checked ${MARKER}`,
      });
      expect(approved.kind, approved.message).toBe("sent");
      await local.delivered(conversation, held.task_id);
      const refund = customerMessage(conversation, CUSTOMER, `Please refund order 123 ${MARKER}`);
      await local.putMessages(refund);
      await local.env.runtime.idle();

      // Before: only in the places the README's table lists as holding plain copies.
      const before = await inTables();
      const places = new Set(before.map(placeOf));
      expect(places).toEqual(
        new Set(["conversationState", "conversationView", "replyState", "agentRuns"]),
      );
      for (const place of places) expect(RETENTION[place as RetentionPlaceName]).toBeDefined();
      expect(await inQueues()).toEqual([]);
      expect(capture.lines().filter((line) => line.includes(MARKER))).toEqual([]);

      // Erased: nowhere readable, and the erasure recorded.
      const erased = await cli("erase", "--customer", CUSTOMER, "--reason", "asked by mail");
      expect(erased.stderr).toBe("");
      expect(erased.code).toBe(0);
      expect(erased.stdout).toContain(`customer ${CUSTOMER} (tenant default) erased`);
      expect(erased.stdout).toContain("archive");
      await local.env.runtime.idle();
      expect(await inTables()).toEqual([]);
      expect(await inQueues()).toEqual([]);

      // The view, the trace, rebuild and replay go on, and show [erased].
      const view = await loadConversation(local.env, conversation);
      expect(view?.turns[asked.task_id]?.text).toBe(ERASED);
      expect(view?.turns[held.task_id]?.reply_text).toBe(ERASED);
      const trace = await cli("trace", asked.task_id, "--json");
      expect(trace.code, trace.stderr).toBe(0);
      expect(trace.stdout).toContain("conversation.message.accepted");
      expect(trace.stdout).not.toContain(MARKER);
      const rebuilt = await cli(
        "rebuild",
        "conversation-projection",
        "--type",
        VIEW_TYPES,
        "--reset",
      );
      expect(rebuilt.stderr).toBe("");
      expect(rebuilt.code).toBe(0);
      const replayed = await cli(
        "replay",
        "--from",
        from,
        "--to",
        new Date().toISOString(),
        "--group",
        "conversation-projection",
        "--reason",
        "after an erasure",
      );
      expect(replayed.stderr).toBe("");
      expect(replayed.code).toBe(0);
      await local.env.runtime.idle();
      const after = await loadConversation(local.env, conversation);
      expect(after?.turns[asked.task_id]?.text).toBe(ERASED);
      expect(after?.turns[held.task_id]?.reply_text).toBe(ERASED);
      expect(await inTables()).toEqual([]);
      expect(capture.lines().filter((line) => line.includes(MARKER))).toEqual([]);

      // A second erasure changes nothing; a customer never seen is refused.
      const again = await cli("erase", "--customer", CUSTOMER);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("was erased already");
      expect(again.stdout).toContain("overwritten     0");
      const unknown = await cli("erase", "--customer", "cust_nobody");
      expect(unknown.code).toBe(2);
      expect(unknown.stderr).toContain("no personal data of customer cust_nobody");
    },
    TIMEOUT * 4,
  );

  it(
    "a service erases its tenant's customer over HTTP: the words read [erased], the erasure is recorded once",
    async () => {
      const door = local.env.frontDoor;
      if (!door) throw new Error("the local stack serves no front door");
      const base = door.url.replace(/\/v1$/, "");
      const conversation = `conv_${ulid()}`;
      const customer = "cust_httpmarker";
      const sent = await signedFetch(
        base,
        "POST",
        `/v1/tenants/acme/conversations/${conversation}/messages`,
        JSON.stringify({ text: `Where is order 123? ${MARKER}`, customer_id: customer }),
      );
      expect(sent.status, JSON.stringify(sent.body)).toBe(202);
      await local.delivered(tenantConversationId("acme", conversation), sent.body.task_id);
      expect(await inTables()).not.toEqual([]);

      const path = `/v1/tenants/acme/customers/${customer}/erasure`;
      const erased = await signedFetch(base, "POST", path, JSON.stringify({ reason: "ticket 9" }));
      expect(erased.status, JSON.stringify(erased.body)).toBe(200);
      expect(erased.body).toMatchObject({
        tenant_id: "acme",
        customer_id: customer,
        outcome: "erased",
      });
      const again = await signedFetch(base, "POST", path);
      expect(again.body).toMatchObject({ outcome: "already_erased", overwritten: 0 });
      const elsewhere = await signedFetch(
        base,
        "POST",
        `/v1/tenants/globex/customers/${customer}/erasure`,
      );
      expect(elsewhere.status).toBe(404);

      await local.env.runtime.idle();
      expect(await inTables()).toEqual([]);
      const read = await signedFetch(base, "GET", `/v1/tenants/acme/conversations/${conversation}`);
      expect(read.status).toBe(200);
      expect(JSON.stringify(read.body)).toContain(ERASED);
      // Both requests sent the same record (its id is the erasure's): the audit keeps it once.
      const recordId = erasureRecordId(
        { tenant: "acme", customer },
        { at: erased.body.erased_at, by: erased.body.erased_by },
      );
      const row = await waitUntil("the erasure's audit record", () =>
        local.inboxRow("audit", recordId),
      );
      expect(row?.envelope?.payload).toMatchObject({
        action: "customer.erase",
        target: `customer/acme/${customer}`,
        reason: "ticket 9",
      });
    },
    TIMEOUT * 2,
  );

  it(
    "a customer's words travel sealed: after their erasure no bus, archive, queue, dead letter, table or log shows them",
    async () => {
      const door = local.env.frontDoor;
      if (!door) throw new Error("the local stack serves no front door");
      const base = door.url.replace(/\/v1$/, "");
      const { eventbridge, sqs } = local.env.clients;
      const words = "MARKER-sealed-b81f";
      const customer = "cust_sealedmarker";
      const sealedPrefix = `sealed:v1:acme:${customer}:`;
      // A tap on each bus with an archive: what is published live, and later what its archive
      // replays to the tap alone (the archive's contents, as a reader of it gets them).
      const tap = await tapOf(local.env, "pd-tap");
      const from = new Date(Date.now() - 1000).toISOString();
      const conversation = `conv_${ulid()}`;
      const sent = await signedFetch(
        base,
        "POST",
        `/v1/tenants/acme/conversations/${conversation}/messages`,
        JSON.stringify({ text: `Where is order 123? ${words}`, customer_id: customer }),
      );
      expect(sent.status, JSON.stringify(sent.body)).toBe(202);
      const tenantConversation = tenantConversationId("acme", conversation);
      await local.delivered(tenantConversation, sent.body.task_id);
      await local.env.runtime.idle();
      const live = await tap.drain();
      // The control: the tap sees the customer's fields, sealed, on the events and commands buses.
      const sealedTypes = new Set(live.filter((b) => b.includes(sealedPrefix)).map(detailType));
      expect([...sealedTypes].sort()).toEqual(
        expect.arrayContaining([
          "conversation.message.accepted",
          "conversation.message.received",
          "notification.send.requested",
          "reply.generated",
        ]),
      );
      expect(live.filter((b) => b.includes(words))).toEqual([]);
      // A dead letter of theirs: the projection gave up on the turn's reply (its copy as published).
      const reply = live
        .map((b) => JSON.parse(b))
        .find((e) => e["detail-type"] === "reply.generated");
      const letter = reply?.detail as Envelope;
      const deadLetterQueue = local.env.names.groups["conversation-projection"]?.deadLetterQueue;
      await sqs.send(
        new SendMessageCommand({
          QueueUrl: deadLetterQueue,
          MessageBody: JSON.stringify(letter),
          MessageGroupId: letter.order_key,
          MessageDeduplicationId: letter.event_id,
        }),
      );

      const path = `/v1/tenants/acme/customers/${customer}/erasure`;
      const erased = await signedFetch(base, "POST", path, JSON.stringify({ reason: "ticket 12" }));
      expect(erased.body).toMatchObject({ outcome: "erased" });
      await local.env.runtime.idle();

      // The dead letter redriven, and the archive replayed to a group that reads the fields:
      // each opens to [erased] and is handled, never failed back into a queue.
      const { observations } = local.env;
      const failedBefore = [observations.errors.length, observations.deadLetters.length];
      const redriven = await cli(
        "dlq",
        "redrive",
        "conversation-projection",
        "--event-id",
        letter.event_id,
      );
      expect(redriven.code, redriven.stderr).toBe(0);
      const to = new Date().toISOString();
      const replayed = await cli(
        "replay",
        "--from",
        from,
        "--to",
        to,
        "--group",
        "conversation-projection",
        "--reason",
        "after an erasure",
      );
      expect(replayed.code, replayed.stderr).toBe(0);
      await local.env.runtime.idle();
      expect([observations.errors.length, observations.deadLetters.length]).toEqual(failedBefore);
      expect(observations.deliveries.get(letter.event_id)?.at(-1)).toMatchObject({
        group: "conversation-projection",
      });
      expect(await inQueues(words)).toEqual([]);
      expect(await inQueues(sealedPrefix)).toEqual([]);
      const view = await loadConversation(local.env, tenantConversation);
      expect(view?.turns[sent.body.task_id]?.text).toBe(ERASED);

      // The archive, read through the tap: the customer's fields are there, sealed, and nothing opens them.
      for (const archive of tap.archives)
        await eventbridge.send(
          new StartReplayCommand({
            ReplayName: `pd-tap-${archive.topic}-${Date.now()}`,
            EventSourceArn: archive.arn,
            EventStartTime: new Date(from),
            EventEndTime: new Date(to),
            Destination: { Arn: archive.busArn, FilterArns: [archive.ruleArn] },
          }),
        );
      const archived = await tap.drain();
      expect(archived.filter((b) => b.includes(sealedPrefix)).length).toBeGreaterThan(0);
      expect(archived.filter((b) => b.includes(words))).toEqual([]);
      expect(await inTables(words)).toEqual([]);
      expect(capture.lines().filter((line) => line.includes(words))).toEqual([]);
      // What an operator reads of them now: the marker.
      const trace = await cli("trace", sent.body.task_id, "--tenant", "acme", "--json");
      expect(trace.code, trace.stderr).toBe(0);
      expect(trace.stdout).not.toContain(words);
      await tap.remove();
    },
    TIMEOUT * 3,
  );
});

/** A request signed as a service signs it (SigV4, the local stack's service credentials). */
async function signedFetch(base: string, method: string, path: string, body?: string) {
  const url = new URL(`${base}${path}`);
  const headers = await serviceSignedHeaders(url, method, body);
  const response = await fetch(url, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** An EventBridge event's detail type, from a tapped body. */
function detailType(body: string): string {
  return String((JSON.parse(body) as Record<string, unknown>)["detail-type"]);
}

/**
 * A queue subscribed to every event of each bus that has an archive (a rule matching every
 * source), what those archives can be replayed to (the rule alone: FilterArns), and its reads.
 */
async function tapOf(env: LocalEnvironment, name: string) {
  const { eventbridge, sqs } = env.clients;
  const outputs = env.deployment.outputs as Record<string, string | undefined>;
  const queue = await sqs.send(new CreateQueueCommand({ QueueName: `${name}-${ulid()}` }));
  const queueUrl = queue.QueueUrl ?? "";
  const attributes = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  const queueArn = attributes.Attributes?.QueueArn ?? "";
  const archives: { topic: string; arn: string; busArn: string; ruleArn: string }[] = [];
  for (const [topic, bus] of Object.entries(env.names.buses)) {
    const id = topic.charAt(0).toUpperCase() + topic.slice(1);
    const arn = outputs[`${id}ArchiveArn`];
    const busArn = outputs[`${id}BusArn`];
    if (!arn || !busArn) continue;
    const rule = await eventbridge.send(
      new PutRuleCommand({
        Name: `${name}-${topic}`,
        EventBusName: bus,
        EventPattern: JSON.stringify({ source: [{ prefix: "" }] }),
      }),
    );
    await eventbridge.send(
      new PutTargetsCommand({
        Rule: `${name}-${topic}`,
        EventBusName: bus,
        Targets: [{ Id: "tap", Arn: queueArn }],
      }),
    );
    archives.push({ topic, arn, busArn, ruleArn: rule.RuleArn ?? "" });
  }
  const drain = () => drainQueue(env, queueUrl);
  const remove = async () => {
    for (const { topic } of archives) {
      const bus = env.names.buses[topic];
      await eventbridge.send(
        new RemoveTargetsCommand({ Rule: `${name}-${topic}`, EventBusName: bus, Ids: ["tap"] }),
      );
      await eventbridge.send(
        new DeleteRuleCommand({ Name: `${name}-${topic}`, EventBusName: bus }),
      );
    }
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  };
  return { archives, drain, remove };
}

/** Every body a queue holds, removed from it. */
async function drainQueue(env: LocalEnvironment, queueUrl: string): Promise<string[]> {
  const { sqs } = env.clients;
  const bodies: string[] = [];
  for (;;) {
    const got = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }),
    );
    if (!got.Messages?.length) return bodies;
    for (const m of got.Messages) {
      bodies.push(m.Body ?? "");
      await sqs.send(
        new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }),
      );
    }
  }
}

/** The place of RETENTION a state table item holding personal data is. */
function placeOf(found: string): string {
  const [table, pk = ""] = found.split(":");
  const type = pk.slice(0, pk.indexOf("#"));
  if (table !== "state") return `${table} table`;
  const places: Record<string, string> = {
    conversation: "conversationState",
    conversation_view: "conversationView",
    reply: "replyState",
    delivery: "replyState",
    agent_run: "agentRuns",
    content: "agentRuns",
    http_request: "acceptedRequests",
  };
  return places[type] ?? `state item ${type}`;
}
