import { PermanentError } from "../errors";
import type { ContentStore } from "./content";

/**
 * A run's conversation with its model, as its item keeps it: the references (./content.ts) of its
 * newest MESSAGES_KEPT messages in `messages`, and the older ones in pages stored in the content
 * store, each page a list of references and the reference of the page before it (`earlier`). So
 * the item is the same size at turn 2,000 as at turn 10, whatever the run's length, and the model
 * is still sent the whole conversation.
 *
 * A page is sealed when the messages not yet in a page reach MESSAGES_KEPT: it holds exactly the
 * item's `messages` then, so `messages` always holds the messages after the newest page and, once
 * the run has MESSAGES_KEPT of them, the newest of those before it too (a window that slides by
 * one each message, so the item's size never moves). A run stored before pages holds all its
 * references in `messages`, and seals them into its first page at its next message.
 */

/** How many of the newest references the run's item keeps. */
export const MESSAGES_KEPT = 16;

/** The pages of a run's older messages. */
export interface EarlierMessages {
  /** The reference of the newest page. */
  readonly page: string;
  /** How many messages the pages hold (the oldest of the conversation). */
  readonly sealed: number;
  /** How many messages the conversation has. */
  readonly total: number;
}

/** A page as stored: the references it holds, oldest first, and the page before it. */
interface Page {
  readonly earlier: string | null;
  readonly messages: readonly string[];
}

export interface Conversation {
  readonly messages: readonly string[];
  readonly earlier?: EarlierMessages;
}

/** How many messages a conversation has. */
export function messageCount(conversation: Conversation): number {
  return conversation.earlier?.total ?? conversation.messages.length;
}

/** The conversation with one more message (its reference); a page stored when one is sealed. */
export async function withMessage(
  conversation: Conversation,
  ref: string,
  content: Pick<ContentStore, "put">,
): Promise<Conversation> {
  const total = messageCount(conversation) + 1;
  const sealed = conversation.earlier?.sealed ?? 0;
  const messages = [...conversation.messages, ref];
  const unsealed = total - sealed;
  if (unsealed < MESSAGES_KEPT)
    return {
      messages: messages.slice(-MESSAGES_KEPT),
      ...(conversation.earlier ? { earlier: { ...conversation.earlier, total } } : {}),
    };
  const page: Page = {
    earlier: conversation.earlier?.page ?? null,
    messages: messages.slice(-unsealed),
  };
  const stored = await content.put(JSON.stringify(page));
  return {
    messages: messages.slice(-MESSAGES_KEPT),
    earlier: { page: stored, sealed: total, total },
  };
}

/**
 * The references of every message of the conversation, oldest first: its pages read newest to
 * oldest (one read each), then the item's own references after the newest page.
 */
export async function conversationRefs(
  conversation: Conversation,
  content: Pick<ContentStore, "getMany">,
): Promise<string[]> {
  const { earlier } = conversation;
  if (!earlier) return [...conversation.messages];
  const pages: (readonly string[])[] = [];
  for (let ref: string | null = earlier.page; ref !== null; ) {
    const [text] = await content.getMany([ref]);
    const page = pageOf(ref, text);
    pages.unshift(page.messages);
    ref = page.earlier;
  }
  const after = earlier.total - earlier.sealed;
  const refs = [...pages.flat(), ...(after > 0 ? conversation.messages.slice(-after) : [])];
  if (refs.length !== earlier.total)
    throw new PermanentError(
      "agent.conversation_broken",
      `the conversation's pages hold ${refs.length} messages; the run counts ${earlier.total}`,
      { details: { page: earlier.page, found: refs.length, total: earlier.total } },
    );
  return refs;
}

/** The texts of every message of the conversation, oldest first. */
export async function conversationTexts(
  conversation: Conversation,
  content: Pick<ContentStore, "getMany">,
): Promise<string[]> {
  return content.getMany(await conversationRefs(conversation, content));
}

function pageOf(ref: string, text: string | undefined): Page {
  const page = JSON.parse(text ?? "null") as Partial<Page> | null;
  if (!page || !Array.isArray(page.messages))
    throw new PermanentError(
      "agent.conversation_broken",
      `${ref} is not a page of a conversation`,
      {
        details: { ref },
      },
    );
  return {
    earlier: typeof page.earlier === "string" ? page.earlier : null,
    messages: page.messages,
  };
}
