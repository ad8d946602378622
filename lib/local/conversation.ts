import { ulid } from "ulid";
import type { LocalDelivery } from "../../functions/adapters/channel/local-channel";
import { DynamoSideEffects } from "../../functions/adapters/dynamodb/side-effects";
import type { SideEffectRecord } from "../../functions/core/side-effects";
import type { ConversationView } from "../../functions/roles/conversation-projection";
import type { AggregateRef, Envelope } from "../../schemas";
import type { LocalEnvironment } from "./environment";
import { type Check, putOnBus, readDeadLetters } from "./scenario";

/**
 * The customer-support conversation (seed 000 §10, §11) on the local stack: customers' messages
 * go through ingress, router, order lookup, reply generation and the sender to the local channel,
 * with the situations the issue names staged on purpose:
 * - two messages in quick succession: the sender is held back until both replies are generated;
 *   the first reply's send is then superseded and only the second one is delivered;
 * - the send command delivered three times (replayed twice onto the commands bus): one delivery;
 * - the channel times out after applying a send: the sender learns the outcome by querying the
 *   channel with the same idempotency key, and the customer gets one message;
 * - a message whose client deadline passes while reply generation is held back: the generation
 *   request is discarded as expired before any model call, and nothing is delivered;
 * - a poison message (a customer id that looks like a phone number): dead-lettered with its reason.
 */

export interface ConversationCase {
  readonly label: string;
  readonly conversationId: string;
  readonly customerId: string;
  /** One per message sent, in order. */
  readonly messages: readonly Envelope[];
  view?: ConversationView;
}

export interface ConversationScenarioResult {
  readonly cases: readonly ConversationCase[];
  readonly checks: Check[];
  /** The correlation ids of every message (one causal trace each). */
  readonly correlations: string[];
}

/** The consumer groups the conversation needs. */
export const SUPPORT_GROUPS = [
  "conversation",
  "router",
  "order-lookup",
  "reply-generation",
  "sender",
  "conversation-projection",
] as const;

/** Whether the stack runs every support group. */
export function hasConversation(env: LocalEnvironment): boolean {
  return SUPPORT_GROUPS.every((group) => env.groups.includes(group));
}

/**
 * A customer's message as a client sends it: `conversation.message.received`, unsequenced
 * (aggregate conversation/<id> at version 0), a new task and correlation per message, order key =
 * conversation id.
 */
export function customerMessage(
  conversationId: string,
  customerId: string,
  text: string,
  extra: Partial<Envelope> = {},
): Envelope {
  const id = ulid();
  return {
    event_id: id,
    event_type: "conversation.message.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: `task_${id}`,
    conversation_id: conversationId,
    aggregate: { type: "conversation", id: conversationId, version: 0 },
    order_key: conversationId,
    producer: "chat-widget",
    attempt: 1,
    payload: { text, customer_id: customerId, channel: "chat" },
    ...extra,
  };
}

/** The conversation's read model (the conversation projection's state). */
export async function loadConversation(
  env: LocalEnvironment,
  conversationId: string,
): Promise<ConversationView | undefined> {
  const { state } = await env.store.load({
    state: { type: "conversation_view", id: conversationId },
  });
  return state?.data as ConversationView | undefined;
}

/** Events of one stream, in order (empty when the stream does not exist yet). */
export function streamOf(env: LocalEnvironment, ref: AggregateRef): Promise<Envelope[]> {
  return env.store.readStream(ref, 1, 1000);
}

/** The send command generated for a message's task, once reply generation has appended it. */
export async function sendCommandOf(
  env: LocalEnvironment,
  taskId: string,
): Promise<Envelope | undefined> {
  const events = await streamOf(env, { type: "reply", id: taskId });
  return events.find((e) => e.event_type === "notification.send.requested");
}

/** The side-effect record of a key (the sender's idempotency record). */
export async function sideEffectOf(
  env: LocalEnvironment,
  key: string,
): Promise<SideEffectRecord | undefined> {
  const tableName = env.names.tables.sideEffects;
  return new DynamoSideEffects({ client: env.clients.dynamodb, tableName }).get(key);
}

/** Poll until `probe` returns something truthy; the error says what was waited for. */
export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const delivered = (view: ConversationView | undefined, taskId: string) =>
  view?.turns[taskId]?.status === "delivered" ? view : undefined;

export async function runConversationScenario(
  env: LocalEnvironment,
  log: (line: string) => void = () => {},
): Promise<ConversationScenarioResult> {
  const { runtime, channel, model } = env;
  const send = (...messages: Envelope[]) => putOnBus(env, "events", messages);
  const conv = () => `conv_${ulid()}`;
  const deliveriesTo = (conversationId: string) =>
    channel.deliveries().filter((d) => d.conversationId === conversationId);

  // 1. Two messages in quick succession.
  log("support: alice asks about order 123, then about A-1001 before the first reply is sent");
  const quick: ConversationCase = {
    label: "quick succession",
    conversationId: conv(),
    customerId: "cust_alice",
    messages: [],
  };
  const m1 = customerMessage(
    quick.conversationId,
    quick.customerId,
    "Hi, has the refund for order 123 gone through?",
  );
  const m2 = customerMessage(
    quick.conversationId,
    quick.customerId,
    "Sorry, I meant order A-1001: where is it now?",
  );
  (quick.messages as Envelope[]).push(m1, m2);
  runtime.pauseGroup("sender");
  await send(m1);
  const firstSend = await waitUntil("the first reply's send command", () =>
    sendCommandOf(env, m1.task_id),
  );
  await send(m2);
  await waitUntil("the second reply's send command", () => sendCommandOf(env, m2.task_id));
  runtime.resumeGroup("sender");
  quick.view = await waitUntil("the second reply's delivery", async () =>
    delivered(await loadConversation(env, quick.conversationId), m2.task_id),
  );

  // 2. The send command delivered three times.
  log("support: bob asks about order 456; his reply's send command is delivered three times");
  const triple: ConversationCase = {
    label: "send delivered 3x",
    conversationId: conv(),
    customerId: "cust_bob",
    messages: [],
  };
  const m3 = customerMessage(triple.conversationId, triple.customerId, "Was order 456 delivered?");
  (triple.messages as Envelope[]).push(m3);
  runtime.pauseGroup("sender");
  await send(m3);
  const tripleSend = await waitUntil("bob's send command", () => sendCommandOf(env, m3.task_id));
  await putOnBus(env, "commands", [tripleSend, tripleSend]);
  runtime.resumeGroup("sender");
  triple.view = await waitUntil("bob's delivery", async () =>
    delivered(await loadConversation(env, triple.conversationId), m3.task_id),
  );

  // 3. The channel applies the send and then times out.
  log("support: carol asks about order 789; the channel times out after delivering the reply");
  const timeout: ConversationCase = {
    label: "timeout after apply",
    conversationId: conv(),
    customerId: "cust_carol",
    messages: [],
  };
  channel.inject({ kind: "timeout-after-apply", recipient: timeout.customerId });
  const m4 = customerMessage(
    timeout.conversationId,
    timeout.customerId,
    "When will the refund for order 789 arrive?",
  );
  (timeout.messages as Envelope[]).push(m4);
  await send(m4);
  timeout.view = await waitUntil("carol's delivery", async () =>
    delivered(await loadConversation(env, timeout.conversationId), m4.task_id),
  );

  // 4. The client's deadline passes while reply generation is held back.
  log(
    "support: alice asks a question only worth answering within 8 s; reply generation is held back past that",
  );
  const late: ConversationCase = {
    label: "expired",
    conversationId: conv(),
    customerId: "cust_alice",
    messages: [],
  };
  const m5 = customerMessage(late.conversationId, late.customerId, "Is the shop open today?", {
    expires_at: new Date(Date.now() + 8000).toISOString(),
  });
  (late.messages as Envelope[]).push(m5);
  runtime.pauseGroup("reply-generation");
  await send(m5);
  const lateRequest = await waitUntil("the late generation request", async () =>
    (await streamOf(env, { type: "support_route", id: m5.task_id })).find(
      (e) => e.event_type === "reply.generation.requested",
    ),
  );
  const expiresAt = Date.parse(lateRequest.expires_at ?? "");
  await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 500));
  runtime.resumeGroup("reply-generation");
  await waitUntil("the expired discard", () =>
    env.observations.deliveries
      .get(lateRequest.event_id)
      ?.some((d) => d.group === "reply-generation" && d.status === "discarded"),
  );

  // 5. Poison.
  log("support: a client sends a message whose customer id looks like a phone number");
  const poison = customerMessage(conv(), "cust_dave", "hello");
  (poison.payload as { customer_id: string }).customer_id = "user_13800138000";
  await send(poison);

  await runtime.idle();
  late.view = await loadConversation(env, late.conversationId);
  const deadLetters = await readDeadLetters(env);

  const cases = [quick, triple, timeout, late];
  const quickDeliveries = deliveriesTo(quick.conversationId);
  const firstSendOutcomes = env.observations.deliveries.get(firstSend.event_id) ?? [];
  const tripleKey = `${m3.task_id}:reply:1`;
  const tripleDeliveries = deliveriesTo(triple.conversationId);
  const senderSaw = env.observations.deliveries
    .get(tripleSend.event_id)
    ?.filter((d) => d.group === "sender")
    .map((d) => d.status);
  const timeoutKey = `${m4.task_id}:reply:1`;
  const timeoutRecord = await sideEffectOf(env, timeoutKey);
  const timeoutNext = await sideEffectOf(env, `${m4.task_id}:reply:2`);
  const timeoutTurn = timeout.view?.turns[m4.task_id];
  const lateOutcome = env.observations.deliveries
    .get(lateRequest.event_id)
    ?.find((d) => d.group === "reply-generation");
  const checks: Check[] = [
    check(
      "quick succession: one reply delivered, built from the second message",
      quickDeliveries.length === 1 &&
        quickDeliveries[0]?.key === `${m2.task_id}:reply:1` &&
        (quickDeliveries[0]?.text.includes("A-1001") ?? false),
      quickDeliveries.map((d) => `${d.key}: ${d.text.slice(0, 60)}`).join(" | ") || "none",
    ),
    check(
      "quick succession: the first reply's send discarded as superseded",
      firstSendOutcomes.some(
        (d) => d.group === "sender" && d.status === "discarded" && d.reason === "superseded",
      ),
      firstSendOutcomes.map((d) => `${d.group} ${d.status} ${d.reason ?? ""}`).join(", "),
    ),
    check(
      "send delivered 3x: one delivery, the sender applied it once",
      tripleDeliveries.length === 1 &&
        tripleDeliveries[0]?.key === tripleKey &&
        senderSaw?.filter((s) => s === "applied").length === 1,
      `${tripleDeliveries.length} deliveries; sender: ${senderSaw?.join(", ") ?? "nothing"}`,
    ),
    check(
      "timeout after apply: resolved by query, one delivery, the same key",
      deliveriesTo(timeout.conversationId).length === 1 &&
        timeoutTurn?.delivery?.confirmed_by === "query" &&
        timeoutTurn.delivery.idempotency_key === timeoutKey &&
        timeoutRecord?.state === "succeeded" &&
        timeoutNext === undefined,
      `confirmed by ${timeoutTurn?.delivery?.confirmed_by ?? "?"}, record ${timeoutRecord?.state ?? "none"} after ${timeoutRecord?.attempts ?? 0} claim(s)`,
    ),
    check(
      "expired: discarded before the model, nothing delivered",
      lateOutcome?.status === "discarded" &&
        lateOutcome.reason === "expired" &&
        model.calls({ taskId: m5.task_id }).length === 0 &&
        deliveriesTo(late.conversationId).length === 0,
      `reply-generation ${lateOutcome?.status ?? "?"} ${lateOutcome?.reason ?? ""}, ${model.calls({ taskId: m5.task_id }).length} model calls`,
    ),
    check(
      "poison message: dead-lettered with its reason",
      deadLetters.some(
        (d) => d.eventId === poison.event_id && d.code === "envelope.invalid_payload",
      ),
      deadLetters.map((d) => d.code).join(", ") || "no dead letters",
    ),
  ];
  return {
    cases,
    checks,
    correlations: cases.flatMap((c) => c.messages.map((m) => m.correlation_id)),
  };
}

function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}

/** A conversation as the projection sees it: each message, what it became, and the delivery. */
export function renderConversation(
  c: ConversationCase,
  deliveries: readonly LocalDelivery[],
): string {
  const lines = [`${c.label}: conversation ${c.conversationId} (${c.customerId})`];
  const view = c.view;
  for (const message of c.messages) {
    const turn = view?.turns[message.task_id];
    const text = (message.payload as { text?: string }).text ?? "";
    lines.push(`  v${turn?.input_version ?? "?"} "${text}"`);
    if (!turn) {
      lines.push("      not in the conversation view (never accepted)");
      continue;
    }
    const facts = [
      turn.intent ? `intent ${turn.intent}` : undefined,
      turn.order_id
        ? `order ${turn.order_id} ${turn.order_found ? "found" : "not found"}`
        : undefined,
      `status ${turn.status}`,
    ].filter(Boolean);
    lines.push(`      ${facts.join(", ")}`);
    if (turn.reply_text) lines.push(`      reply: ${turn.reply_text}`);
    if (turn.delivery)
      lines.push(
        `      delivery: key ${turn.delivery.idempotency_key}${turn.delivery.confirmed_by ? `, confirmed by ${turn.delivery.confirmed_by}` : ""}${turn.delivery.code ? `, ${turn.delivery.code}` : ""}`,
      );
  }
  const mine = deliveries.filter((d) => d.conversationId === c.conversationId);
  lines.push(`  channel: ${mine.length} deliver${mine.length === 1 ? "y" : "ies"}`);
  for (const d of mine) lines.push(`    ${d.at} ${d.key} -> ${d.recipient}: ${d.text}`);
  return lines.join("\n");
}
