import { DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { eventItem } from "../../functions/adapters/dynamodb/items";
import { DynamoSideEffects } from "../../functions/adapters/dynamodb/side-effects";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { listingAfter } from "../../functions/core/listing";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps, StateSummary } from "../../functions/core/ports";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import {
  type ConversationState,
  conversationReader,
} from "../../functions/roles/customer-support/conversation/conversation";
import {
  type ConversationView,
  summarizeConversation,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { replyGenerationRole } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import { pendingApprovals } from "../../lib/operator/approvals";
import { heldReplies } from "../../lib/operator/customer-support";
import { fromSdk } from "../../lib/operator/from-sdk";
import { unknownSideEffects } from "../../lib/operator/lists";
import { operatorEnvelope } from "../../lib/operator/operator-command";
import type { OpsStack } from "../../lib/operator/stack";
import {
  reviewCheck,
  reviewCommand,
  sendResolveCheck,
  sendResolveCommand,
} from "../../lib/operator/support-actions";
import { cancelCheck, cancelCommand } from "../../lib/operator/support-cancel";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { referenceLocalModel } from "../support/reference";
import { createTables, deleteTables } from "../support/tables";

/**
 * A held reply of tenant acme's conversation, on moto: listed for acme and no other tenant (so is
 * its unknown send), and the operator's approval (or cancel) goes in acme, read from the
 * conversation's state, which reply generation obeys for a reply that records acme.
 */

let client: DynamoDBClient;
let tables: TableNames;
let stack: OpsStack;
let deps: ConsumerDeps;

const TASK = `task_${newUlid()}`;
const CONV = `conv_${newUlid()}`;
const KEY = `${TASK}:reply:1`;
/** A held reply of the same conversation as reply generation stores one now: with its tenant. */
const RECORDED_TASK = `task_${newUlid()}`;

const reply: ReplyState = {
  task_id: TASK,
  conversation_id: CONV,
  customer_id: "cust_alice",
  channel: "chat",
  input_version: 1,
  status: "held_for_review",
  reply_text: "Your refund is on its way.",
  model_attempts: 1,
  generated_at: "2026-12-02T10:00:00.000Z",
};

const conversation: ConversationState = {
  conversation_id: CONV,
  customer_id: "cust_alice",
  tenant_id: "acme",
  version: 1,
  messages: [],
};

const view: ConversationView = {
  conversation_id: CONV,
  tenant_id: "acme",
  version: 1,
  turns: { [TASK]: { task_id: TASK, input_version: 1, status: "held_for_review" } },
  turn_order: [TASK],
};

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  tables = await createTables(client, `support-tenant-${newUlid().toLowerCase()}`);
  stack = { dynamodb: client, names: { tables } } as unknown as OpsStack;
  const clock = new ManualClock("2026-12-02T10:00:00.000Z");
  const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
  deps = { store, registry, clock, ids: ulidSource(clock) };
  const put = async (type: string, id: string, next: unknown, summary?: StateSummary) => {
    const listing = summary && { summary, listing: listingAfter(undefined, summary, clock.now()) };
    await store.commit({
      state: { aggregate: { type, id }, expectedRevision: 0, next, version: 0, ...listing },
    });
  };
  await put("reply", TASK, reply);
  await put("reply", RECORDED_TASK, { ...reply, task_id: RECORDED_TASK, tenant_id: "acme" });
  await put("conversation", CONV, conversation);
  await put("conversation_view", CONV, view, summarizeConversation(view));
  // The send of the held reply's first draft, whose outcome is unknown; and the task's first
  // event, which names its tenant.
  const sideEffects = new DynamoSideEffects({
    client: fromSdk(client),
    tableName: tables.sideEffects,
  });
  const now = clock.now();
  await sideEffects.claim(KEY, { task_id: TASK, kind: "reply" }, now);
  await sideEffects.markUnknown(KEY, { code: "channel.timeout", message: "no answer" }, now);
  const first = {
    event_id: newUlid(),
    event_type: "conversation.message.accepted",
    schema_version: 1,
    occurred_at: now.toISOString(),
    correlation_id: `corr_${newUlid()}`,
    causation_id: null,
    task_id: TASK,
    tenant_id: "acme",
    aggregate: { type: "conversation", id: CONV, version: 1 },
    order_key: CONV,
    producer: "conversation",
    attempt: 1,
    payload: {},
  } as unknown as Envelope;
  await client.send(
    new PutItemCommand({ TableName: tables.events, Item: marshall(eventItem(first)) }),
  );
});

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

describe("a held reply of tenant acme", () => {
  it("is listed for acme, named so, and for no other tenant", async () => {
    const held = await heldReplies(stack, 50, "acme");
    expect(held.map((h) => [h.task_id, h.tenant])).toEqual([[TASK, "acme"]]);
    expect(await heldReplies(stack, 50, "default")).toEqual([]);
    const approvals = await pendingApprovals(stack, 50, "acme");
    expect(approvals.map((a) => [a.kind, a.id, a.tenant])).toEqual([["held_reply", TASK, "acme"]]);
    expect(await pendingApprovals(stack, 50, "globex")).toEqual([]);
  });

  it("has its unknown send listed for acme, the task's tenant read from its first event", async () => {
    const acme = await unknownSideEffects(stack, 100, "acme");
    expect(acme.map((r) => [r.key, r.taskId, r.tenant])).toEqual([[KEY, TASK, "acme"]]);
    expect(await unknownSideEffects(stack, 100, "default")).toEqual([]);
    const all = await unknownSideEffects(stack, 100);
    expect(all.map((r) => r.key)).toContain(KEY);
  });

  it("is approved with a command in acme, read from the conversation's state", async () => {
    const command = reviewCommand(TASK, "approved", { reason: "checked" }, "ops_anna");
    expect(operatorEnvelope(command)).not.toHaveProperty("tenant_id");
    const decided = await reviewCheck(stack, command, "approved");
    if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
    expect(operatorEnvelope(decided.command)).toMatchObject({
      event_type: "reply.approve.requested",
      conversation_id: CONV,
      tenant_id: "acme",
    });
  });

  it("is refused when the operator names another tenant (--tenant), and sent in acme when it names acme", async () => {
    const approve = reviewCommand(TASK, "approved", {}, "ops_anna");
    const cancel = cancelCommand(TASK, undefined, "ops_anna");
    const refused = { refused: `conversation ${CONV} belongs to tenant acme, not globex` };
    expect(await reviewCheck(stack, approve, "approved", "globex")).toEqual(refused);
    expect(await cancelCheck(stack, cancel, "globex")).toEqual(refused);
    const resolve = sendResolveCommand(KEY, TASK, "abandon", undefined, "ops_anna");
    expect(await sendResolveCheck(stack, resolve, "abandon", "globex")).toEqual(refused);
    const decided = await reviewCheck(stack, approve, "approved", "acme");
    if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
    expect(operatorEnvelope(decided.command)).toMatchObject({ tenant_id: "acme" });
  });

  it("is cancelled with a command in acme", async () => {
    const decided = await cancelCheck(stack, cancelCommand(TASK, undefined, "ops_anna"));
    if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
    expect(operatorEnvelope(decided.command)).toMatchObject({
      event_type: "support.cancel.requested",
      tenant_id: "acme",
    });
  });
});

describe("the operator's approval of a held reply that records tenant acme", () => {
  /** The approval as `agentbus reply approve` sends it, checked against the stack. */
  async function approval(): Promise<Envelope> {
    const command = reviewCommand(RECORDED_TASK, "approved", {}, "ops_anna");
    const decided = await reviewCheck(stack, command, "approved");
    if (!("command" in decided)) throw new Error(`not decided: ${JSON.stringify(decided)}`);
    const parsed = registry.parse(operatorEnvelope(decided.command));
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.envelope;
  }
  const replies = () =>
    replyGenerationRole({
      model: referenceLocalModel(),
      conversation: conversationReader(deps.store),
    });

  it("is obeyed by reply generation, and what it emits is acme's; the same naming another tenant is dead-lettered", async () => {
    const approve = await approval();
    await expect(
      consume({ ...approve, tenant_id: "globex" }, replies(), deps),
    ).rejects.toMatchObject({ code: "reply.tenant_mismatch" });
    const result = await consume(approve, replies(), deps);
    expect(result.status).toBe("applied");
    const emitted = result.steps.flatMap((step) => step.emitted);
    expect(emitted.map((e) => [e.event_type, e.tenant_id])).toEqual([
      ["reply.approved", "acme"],
      ["notification.send.requested", "acme"],
    ]);
  });
});
