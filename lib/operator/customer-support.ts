import { DynamoSideEffects } from "../../functions/adapters/dynamodb/side-effects";
import type { SideEffectRecord } from "../../functions/core/side-effects";
import {
  CONVERSATION_AGGREGATE,
  conversationVersionReader,
} from "../../functions/roles/customer-support/conversation/conversation";
import {
  CONVERSATION_VIEW_AGGREGATE,
  type ConversationTurn,
  type ConversationView,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { REPLY_AGGREGATE } from "../../functions/roles/customer-support/reply-generation/reply-generation";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import { DELIVERY_AGGREGATE } from "../../functions/roles/customer-support/sender/sender";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import { fromSdk } from "./from-sdk";
import { summaries } from "./lists";
import { eventStoreOf, type OpsStack } from "./stack";

/**
 * What the support commands read and send (seed 000 §14, what waits for a person): held replies
 * and their conversations, the sender's state and side-effect records (the commands themselves are
 * built and sent by ./operator-command).
 */

const storeOf = eventStoreOf;

export async function stateData<S>(
  stack: OpsStack,
  type: string,
  id: string,
): Promise<S | undefined> {
  const loaded = await storeOf(stack).load({ state: { type, id } });
  return (loaded.state?.data ?? undefined) as S | undefined;
}

/** The reply generation group's state of a task's reply, if it has one. */
export function loadReply(stack: OpsStack, taskId: string): Promise<ReplyState | undefined> {
  return stateData<ReplyState>(stack, REPLY_AGGREGATE, taskId);
}

/** The sender's state of a task's deliveries, if it has one. */
export function loadDelivery(stack: OpsStack, taskId: string): Promise<DeliveryState | undefined> {
  return stateData<DeliveryState>(stack, DELIVERY_AGGREGATE, taskId);
}

/** The conversation's current version (0 when it has none). */
export function conversationVersion(stack: OpsStack, conversationId: string): Promise<number> {
  return conversationVersionReader(storeOf(stack))(conversationId);
}

/** The side-effect record of a key, strongly consistent; undefined when never claimed. */
export function loadSideEffect(
  stack: OpsStack,
  key: string,
): Promise<SideEffectRecord | undefined> {
  const store = new DynamoSideEffects({
    client: fromSdk(stack.dynamodb),
    tableName: stack.names.tables.sideEffects,
  });
  return store.get(key);
}

export interface HeldReply extends ConversationTurn {
  readonly conversation_id: string;
  /** The conversation's tenant. */
  readonly tenant: string;
}

/**
 * The held turns of the conversations waiting `held_reply` (by-waiting-since), newest waits
 * first; with `tenant`, that tenant's conversations only.
 */
export async function heldReplies(
  stack: OpsStack,
  limit = 50,
  tenant?: string,
): Promise<HeldReply[]> {
  const rows = await summaries(stack, { waiting: "held_reply" }, limit, { tenant });
  const held: HeldReply[] = [];
  for (const row of rows) {
    const view = await stateData<ConversationView>(stack, CONVERSATION_VIEW_AGGREGATE, row.id);
    for (const id of view?.turn_order ?? []) {
      const turn = view?.turns[id];
      if (turn?.status === "held_for_review")
        held.push({ ...turn, conversation_id: row.id, tenant: row.tenant });
    }
  }
  return held;
}

/**
 * The tenant a conversation's state records (the conversation group's, which refuses another
 * tenant's message), as stored: undefined for the default tenant and for no conversation.
 */
export async function conversationTenantId(
  stack: OpsStack,
  conversationId: string,
): Promise<string | undefined> {
  const state = await stateData<{ tenant_id?: string }>(
    stack,
    CONVERSATION_AGGREGATE,
    conversationId,
  );
  return state?.tenant_id;
}
