import { ulid } from "ulid";
import type { ConversationView } from "../../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { LocalDelivery } from "../../../functions/roles/customer-support/integrations/reply-channel/memory";
import type { Envelope } from "../../../schemas";
import type { LocalEnvironment } from "./environment";
import { putOnBus } from "./put-on-bus";
import { refundCheck, runRefund } from "./refund-scenario";
import { type Check, check } from "./scenario/check";
import {
  type ConversationCase,
  customerMessage,
  loadConversation,
  sendCommandOf,
  sideEffectOf,
  streamOf,
  waitUntil,
} from "./scenario/customer-support";
import { readDeadLetters } from "./scenario/dead-letters";

/**
 * The customer-support conversation (seed 000 §10, §11) on the local stack: customers' messages
 * go through ingress, router, order lookup, reply generation and the sender to the local channel,
 * with the situations the issue names staged on purpose:
 * - two messages in quick succession: the sender is held back until both replies are generated;
 *   the first reply's send is then superseded and only the second one is delivered, and the
 *   first turn shows `superseded` by the second;
 * - the send command delivered three times (replayed twice onto the commands bus): one delivery;
 * - the channel times out after applying a send: the sender learns the outcome by querying the
 *   channel with the same idempotency key, and the customer gets one message;
 * - a message whose client deadline passes while reply generation is held back: the generation
 *   request is discarded as expired before any model call, and nothing is delivered;
 * - a refund question: the refund agent cancels the order and refunds it once (./refund-scenario);
 * - a poison message (a customer id that looks like a phone number): dead-lettered with its reason.
 */

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

const delivered = (view: ConversationView | undefined, taskId: string) =>
  view?.turns[taskId]?.status === "delivered" ? view : undefined;

type Log = (line: string) => void;

/** Case 1: two messages in quick succession; `firstSend` is the first reply's send command. */
interface QuickSuccession {
  readonly conversation: ConversationCase;
  readonly first: Envelope;
  readonly second: Envelope;
  readonly firstSend: Envelope;
}

/** Case 2: the send command of `message`'s reply, delivered three times. */
interface TripleSend {
  readonly conversation: ConversationCase;
  readonly message: Envelope;
  readonly send: Envelope;
}

/** Case 3: the channel times out after applying the send of `message`'s reply. */
interface TimeoutAfterApply {
  readonly conversation: ConversationCase;
  readonly message: Envelope;
}

/** Case 4: `message` expires while `request` (its reply generation request) is held back. */
interface Expired {
  readonly conversation: ConversationCase;
  readonly message: Envelope;
  readonly request: Envelope;
}

export async function runConversationScenario(
  env: LocalEnvironment,
  log: Log = () => {},
): Promise<ConversationScenarioResult> {
  const quick = await runQuickSuccession(env, log);
  const triple = await runTripleSend(env, log);
  const timeout = await runTimeoutAfterApply(env, log);
  const late = await runExpired(env, log);
  const refund = await runRefund(env, log);
  const poison = await sendPoison(env, log);

  await env.runtime.idle();
  for (const { conversation } of [quick, late])
    conversation.view = await loadConversation(env, conversation.conversationId);
  const deadLetters = await readDeadLetters(env);

  const cases = [quick, triple, timeout, late, refund].map((c) => c.conversation);
  const checks: Check[] = [
    ...quickSuccessionChecks(env, quick),
    tripleSendCheck(env, triple),
    await timeoutAfterApplyCheck(env, timeout),
    expiredCheck(env, late),
    await refundCheck(env, refund),
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

/** Send customers' messages to the events bus as a client does. */
function send(env: LocalEnvironment, ...messages: Envelope[]): Promise<void> {
  return putOnBus(env, "events", messages);
}

/** A new conversation (no messages yet) of a customer. */
function newCase(label: string, customerId: string): ConversationCase {
  return { label, conversationId: `conv_${ulid()}`, customerId, messages: [] };
}

/** What the local channel delivered in a conversation. */
function deliveriesTo(env: LocalEnvironment, conversationId: string) {
  return env.channel.deliveries().filter((d) => d.conversationId === conversationId);
}

/** Wait until the reply to `message` is delivered; the conversation's view by then. */
function waitForDelivery(
  env: LocalEnvironment,
  who: string,
  c: ConversationCase,
  message: Envelope,
) {
  return waitUntil(`${who} delivery`, async () =>
    delivered(await loadConversation(env, c.conversationId), message.task_id),
  );
}

/** 1. Two messages in quick succession: the sender is held back until both replies exist. */
async function runQuickSuccession(env: LocalEnvironment, log: Log): Promise<QuickSuccession> {
  log("support: alice asks about order 123, then about A-1001 before the first reply is sent");
  const quick = newCase("quick succession", "cust_alice");
  const m1 = customerMessage(
    quick.conversationId,
    quick.customerId,
    "Hi, has the refund for order 123 gone through?",
    {},
    1,
  );
  const m2 = customerMessage(
    quick.conversationId,
    quick.customerId,
    "Sorry, I meant order A-1001: where is it now?",
    {},
    2,
  );
  (quick.messages as Envelope[]).push(m1, m2);
  env.runtime.pauseGroup("sender");
  await send(env, m1);
  const firstSend = await waitUntil("the first reply's send command", () =>
    sendCommandOf(env, m1.task_id),
  );
  await send(env, m2);
  await waitUntil("the second reply's send command", () => sendCommandOf(env, m2.task_id));
  env.runtime.resumeGroup("sender");
  quick.view = await waitForDelivery(env, "the second reply's", quick, m2);
  return { conversation: quick, first: m1, second: m2, firstSend };
}

/** 2. The send command delivered three times (replayed twice onto the commands bus). */
async function runTripleSend(env: LocalEnvironment, log: Log): Promise<TripleSend> {
  log("support: bob asks about order 456; his reply's send command is delivered three times");
  const triple = newCase("send delivered 3x", "cust_bob");
  const m3 = customerMessage(triple.conversationId, triple.customerId, "Was order 456 delivered?");
  (triple.messages as Envelope[]).push(m3);
  env.runtime.pauseGroup("sender");
  await send(env, m3);
  const tripleSend = await waitUntil("bob's send command", () => sendCommandOf(env, m3.task_id));
  await putOnBus(env, "commands", [tripleSend, tripleSend]);
  env.runtime.resumeGroup("sender");
  triple.view = await waitForDelivery(env, "bob's", triple, m3);
  return { conversation: triple, message: m3, send: tripleSend };
}

/** 3. The channel applies the send and then times out. */
async function runTimeoutAfterApply(env: LocalEnvironment, log: Log): Promise<TimeoutAfterApply> {
  log("support: carol asks about order 789; the channel times out after delivering the reply");
  const timeout = newCase("timeout after apply", "cust_carol");
  env.channel.inject({ kind: "timeout-after-apply", recipient: timeout.customerId });
  const m4 = customerMessage(
    timeout.conversationId,
    timeout.customerId,
    "When will the refund for order 789 arrive?",
  );
  (timeout.messages as Envelope[]).push(m4);
  await send(env, m4);
  timeout.view = await waitForDelivery(env, "carol's", timeout, m4);
  return { conversation: timeout, message: m4 };
}

/** 4. The client's deadline passes while reply generation is held back. */
async function runExpired(env: LocalEnvironment, log: Log): Promise<Expired> {
  const { runtime } = env;
  log(
    "support: alice asks a question only worth answering within 8 s; reply generation is held back past that",
  );
  const late = newCase("expired", "cust_alice");
  const m5 = customerMessage(late.conversationId, late.customerId, "Is the shop open today?", {
    expires_at: new Date(Date.now() + 8000).toISOString(),
  });
  (late.messages as Envelope[]).push(m5);
  runtime.pauseGroup("reply-generation");
  await send(env, m5);
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
  return { conversation: late, message: m5, request: lateRequest };
}

/** 5. Poison: a message whose customer id looks like a phone number. */
async function sendPoison(env: LocalEnvironment, log: Log): Promise<Envelope> {
  log("support: a client sends a message whose customer id looks like a phone number");
  const poison = customerMessage(`conv_${ulid()}`, "cust_dave", "hello");
  (poison.payload as { customer_id: string }).customer_id = "user_13800138000";
  await send(env, poison);
  return poison;
}

function quickSuccessionChecks(
  env: LocalEnvironment,
  { conversation, first, second, firstSend }: QuickSuccession,
): Check[] {
  const quickDeliveries = deliveriesTo(env, conversation.conversationId);
  const firstSendOutcomes = env.observations.deliveries.get(firstSend.event_id) ?? [];
  const firstTurn = conversation.view?.turns[first.task_id];
  return [
    check(
      "quick succession: one reply delivered, built from the second message",
      quickDeliveries.length === 1 &&
        quickDeliveries[0]?.key === `${second.task_id}:reply:1` &&
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
      "quick succession: the first turn says it will get no reply, and which turn answers",
      firstTurn?.status === "superseded" && firstTurn.superseded_by === second.task_id,
      `status ${firstTurn?.status ?? "?"}, superseded by ${firstTurn?.superseded_by ?? "none"}`,
    ),
  ];
}

function tripleSendCheck(env: LocalEnvironment, { conversation, message, send }: TripleSend) {
  const tripleKey = `${message.task_id}:reply:1`;
  const tripleDeliveries = deliveriesTo(env, conversation.conversationId);
  const senderSaw = env.observations.deliveries
    .get(send.event_id)
    ?.filter((d) => d.group === "sender")
    .map((d) => d.status);
  return check(
    "send delivered 3x: one delivery, the sender applied it once",
    tripleDeliveries.length === 1 &&
      tripleDeliveries[0]?.key === tripleKey &&
      senderSaw?.filter((s) => s === "applied").length === 1,
    `${tripleDeliveries.length} deliveries; sender: ${senderSaw?.join(", ") ?? "nothing"}`,
  );
}

async function timeoutAfterApplyCheck(
  env: LocalEnvironment,
  { conversation, message }: TimeoutAfterApply,
): Promise<Check> {
  const timeoutKey = `${message.task_id}:reply:1`;
  const timeoutRecord = await sideEffectOf(env, timeoutKey);
  const timeoutNext = await sideEffectOf(env, `${message.task_id}:reply:2`);
  const timeoutTurn = conversation.view?.turns[message.task_id];
  return check(
    "timeout after apply: resolved by query, one delivery, the same key",
    deliveriesTo(env, conversation.conversationId).length === 1 &&
      timeoutTurn?.delivery?.confirmed_by === "query" &&
      timeoutTurn.delivery.idempotency_key === timeoutKey &&
      timeoutRecord?.state === "succeeded" &&
      timeoutNext === undefined,
    `confirmed by ${timeoutTurn?.delivery?.confirmed_by ?? "?"}, record ${timeoutRecord?.state ?? "none"} after ${timeoutRecord?.attempts ?? 0} claim(s)`,
  );
}

function expiredCheck(env: LocalEnvironment, { conversation, message, request }: Expired): Check {
  const lateOutcome = env.observations.deliveries
    .get(request.event_id)
    ?.find((d) => d.group === "reply-generation");
  const modelCalls = env.model.calls({ taskId: message.task_id }).length;
  return check(
    "expired: discarded before the model, nothing delivered",
    lateOutcome?.status === "discarded" &&
      lateOutcome.reason === "expired" &&
      modelCalls === 0 &&
      deliveriesTo(env, conversation.conversationId).length === 0,
    `reply-generation ${lateOutcome?.status ?? "?"} ${lateOutcome?.reason ?? ""}, ${modelCalls} model calls`,
  );
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
    // Order lookup says whether it found the order; a refund question's order is the refund
    // agent's to look up, and its turn has no `order_found`.
    const lookup = turn.order_found === undefined ? "" : turn.order_found ? " found" : " not found";
    const facts = [
      turn.intent ? `intent ${turn.intent}` : undefined,
      turn.order_id ? `order ${turn.order_id}${lookup}` : undefined,
      `status ${turn.status}`,
      turn.superseded_by ? `answered by the turn of ${turn.superseded_by}` : undefined,
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
