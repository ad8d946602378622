import { ulid } from "ulid";
import { DynamoSideEffects } from "../../../../functions/adapters/dynamodb/side-effects";
import type { SideEffectRecord } from "../../../../functions/core/side-effects";
import type { ConversationView } from "../../../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { AggregateRef, Envelope } from "../../../../schemas";
import { fromSdk } from "../../../operator/from-sdk";
import type { LocalEnvironment } from "../environment";

/* The customer-support conversation's building blocks: customers' messages and what to read back. */

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
  clientSeq?: number,
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
    // A client's first send of a new message (a new event id): its first attempt.
    attempt: 1,
    payload: {
      text,
      customer_id: customerId,
      channel: "chat",
      // The message's place in the conversation, as a client that counts its messages sends it.
      ...(clientSeq === undefined ? {} : { client_seq: clientSeq }),
    },
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
  return new DynamoSideEffects({ client: fromSdk(env.clients.dynamodb), tableName }).get(key);
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

/** One conversation the local run plays: its customer, its messages, and its view at the end. */
export interface ConversationCase {
  readonly label: string;
  readonly conversationId: string;
  readonly customerId: string;
  /** One per message sent, in order. */
  readonly messages: readonly Envelope[];
  view?: ConversationView;
}
