import * as z from "../../../../schemas/zod";
import type { Role } from "../../../kit";
import {
  canonicalJson,
  DEFAULT_STRUCTURED_ATTEMPTS,
  type DescriptorOf,
  defineRole,
  type EmitOf,
  type Envelope,
  ERASED,
  type EventOf,
  guardRecord,
  invokeStructured,
  ModelOutputInvalidError,
  type ModelPort,
  modelSchemaOf,
  type OutputGuardResult,
  PermanentError,
  payloadOf,
  refusalReason,
  type StructuredResult,
  type TypedDecision,
  tenantOf,
} from "../../../kit";
import {
  type ContextMessage,
  type ConversationReader,
  ConversationReads,
  type ConversationSnapshot,
} from "../conversation/conversation";
import type { ReplyGenerationRequested } from "../events/commands";
import { ReplyDraft, type ReplyGenerated } from "../events/conversation";
import { factFields } from "../fact-fields";
import { restsOn } from "../sender/facts";
import { type StepFailedEmit, stepFailedDecision } from "../step-failure";
import { type SupersededEmit, supersededDecision } from "../superseded";
import modelSchemas from "./model-schemas.json";
import { guardRawAnswer, guardReply } from "./reply-guard";
import { decideReview, REVIEW_COMMANDS, type ReviewCommand, type ReviewEmit } from "./review";
import type { ReplyState } from "./state";

/** The draft the model is asked for, as its model-schemas.json keeps it. */
export const REPLY_DRAFT_SCHEMA = "reply_draft";

/**
 * The reply generation group (the generation worker of seed 000 §11.3): turns the gathered facts
 * into a reply draft with a model, validates it, and asks the sender to send it. It never calls a
 * channel itself, so generation and sending are retried separately.
 *
 * One `reply.generation.requested` per task, on the stream `reply/<task_id>`:
 * - discarded before any model call when expired (the pipeline) or `superseded`: its
 *   `input_version` is lower than the conversation's current version (a newer message arrived),
 *   recorded with `support.superseded`, which names the turn that answers (../superseded);
 * - the model gets the turn's context (from the same read of the conversation's state as the
 *   superseded check: the customer's message and the ones sent just before it, see contextWindow
 *   in ./conversation), the intent and the order facts as canonical JSON (no internal ids except
 *   the order's), plus the list of allowed source refs: `order:<order_id>` and
 *   `refund:<order_id>` when an order was found, and `message:<message_event_id>` for each
 *   message of the context. Its answer must be a ReplyDraft whose every source ref is an allowed
 *   one; `invokeStructured` asks again with the issues, up to `maxModelAttempts` calls;
 * - valid draft -> the output guard (./reply-guard.ts) on its text, then `reply.generated` with
 *   the text as the guard left it and its record (`output_guard`), then
 *   `notification.send.requested` (logical attempt 1). A redaction sends the text with the ids
 *   withheld. The reply is held for a person instead (`reply.held_for_review`, nothing sent, the
 *   held text with every finding withheld) when the guard refuses it (reason
 *   `output_guard.refused: <kinds and spans>`, never what was found), when the request says so
 *   (`hold_reason`: the guard refused the refund agent's reason), or when the draft asks for a
 *   human review (`model.requires_human_review`), in that order;
 * - no valid draft within the budget -> `reply.held_for_review` with reason
 *   `model.invalid_output` (the last raw answer as the text, every finding of the guard
 *   withheld), so a person sees it;
 * - any other model error (throttling, outage, no access) is rethrown: nothing is committed and
 *   the queue retries a transient one; a permanent one (bad model id, no access), or a transient
 *   one still there on the queue's last attempt, ends the step with `support.step.failed` and the
 *   hand-off message to the customer (../step-failure.ts).
 * A redelivered request, once the reply is stored, emits nothing. A person approves or rejects a
 * held reply with `reply.approve.requested` / `reply.reject.requested` (./review), obeyed in the
 * tenant the reply records (its request's) only: another is refused as `reply.tenant_mismatch`.
 *
 * Every emitted event keeps the request's `input_version`, the conversation id and
 * `order_key` = conversation id. The send command carries the request's `expires_at` (the reply
 * deadline); when the request had none, now + `sendTtlSeconds`.
 */

export const REPLY_AGGREGATE = "reply";
export const DEFAULT_SEND_TTL_SECONDS = 300;
export const HELD_REQUIRES_REVIEW = "model.requires_human_review";
export const HELD_INVALID_OUTPUT = "model.invalid_output";

export interface ReplyGenerationOptions {
  readonly model: ModelPort;
  /**
   * The conversation's state (conversationReader in ./conversation): its current version, for
   * the superseded check, and the turn's context (its message and the ones just before it).
   */
  readonly conversation: ConversationReader;
  /** Model calls per request, corrections included. @default 3 */
  readonly maxModelAttempts?: number;
  /** Deadline of the send when the request carries none, in seconds from now. @default 300 */
  readonly sendTtlSeconds?: number;
  /** Cap on the model's answer. @default 1024 */
  readonly maxTokens?: number;
}

export const REPLY_SYSTEM_PROMPT =
  "You are a customer support agent of an online shop. Write a short, polite reply to the " +
  "customer's message using only the facts given. Never invent order details, dates or amounts. " +
  "Answer with one JSON object with the fields reply_text (string), confidence (number from 0 " +
  "to 1), requires_human_review (boolean: true when a person must check the reply before it is " +
  "sent) and source_refs (array of strings: the facts the reply relies on, each one of the " +
  "allowed source refs listed in the request).";

type ReplyCommand = "reply.generation.requested" | ReviewCommand;

export const REPLY_GENERATION: DescriptorOf<ReplyCommand, ReplyEmit> = {
  group: "reply-generation",
  subscriptions: ["reply.generation.requested", ...REVIEW_COMMANDS],
  // A person's edited text and reason go into the reply and its send.
  readsPersonal: REVIEW_COMMANDS,
  emits: [
    "reply.generated",
    "reply.held_for_review",
    "notification.send.requested",
    "reply.approved",
    "reply.rejected",
    "support.step.failed",
    "support.superseded",
  ],
  stateOf: (event) => ({ type: REPLY_AGGREGATE, id: event.task_id }),
  personalState: {
    stateOf: ({ taskId }) => (taskId ? { type: REPLY_AGGREGATE, id: taskId } : undefined),
    erase: (state: ReplyState): ReplyState => ({
      ...state,
      reply_text: ERASED,
      ...(state.review?.reason === undefined
        ? {}
        : { review: { ...state.review, reason: ERASED } }),
    }),
  },
};

/** What a new request emits: the draft, then its send or its hold for a person's review. */
type DraftEmit = "reply.generated" | "reply.held_for_review" | "notification.send.requested";
type ReplyEmit = DraftEmit | ReviewEmit | StepFailedEmit | SupersededEmit;

export function replyGenerationRole(options: ReplyGenerationOptions): Role<ReplyState> {
  const settings = replySettings(options);
  const reads = new ConversationReads(options.conversation, conversationIdOf);
  return defineRole<ReplyState, ReplyCommand, ReplyEmit>({
    ...REPLY_GENERATION,
    // A person's decision on a held reply is obeyed in the reply's tenant only.
    tenantOfState: (state) => state.tenant_id,
    failed: (_state, event, failure, { now }) =>
      event.event_type === "reply.generation.requested"
        ? stepFailedDecision("reply_generation", event, failure, now)
        : undefined,
    async discard(existing, event) {
      if (existing || event.input_version === undefined) return undefined;
      if (event.event_type !== "reply.generation.requested") return undefined;
      const { version } = await reads.forDiscard(event);
      return event.input_version < version ? "superseded" : undefined;
    },
    async discarded(_existing, event, reason) {
      if (reason !== "superseded" || event.event_type !== "reply.generation.requested")
        return undefined;
      const request = event.payload;
      return supersededDecision(event, request.conversation_id, await reads.afterDiscard(event));
    },
    async decide(existing, event, { now }) {
      if (event.event_type !== "reply.generation.requested")
        return decideReview(existing, event, now, settings.sendTtl);
      if (existing) return {};
      return decideReply(settings, event, await reads.afterDiscard(event), now);
    },
  });
}

function conversationIdOf(event: Envelope): string {
  return payloadOf(event, "reply.generation.requested").conversation_id;
}

/** The validated options the reply decision needs. */
interface ReplySettings {
  readonly model: ModelPort;
  readonly maxAttempts: number;
  readonly sendTtl: number;
  readonly maxTokens: number;
}

/** What every decision about one request shares. */
interface ReplyContext {
  readonly event: Envelope;
  readonly request: ReplyGenerationRequested;
  /** The turn's messages, oldest first (its own message last). */
  readonly messages: readonly ContextMessage[];
  readonly now: Date;
  readonly fact: ReturnType<typeof factFields>;
  readonly base: Pick<
    ReplyState,
    | "task_id"
    | "conversation_id"
    | "tenant_id"
    | "customer_id"
    | "channel"
    | "input_version"
    | "generated_at"
  >;
}

/** Checks the options and fills in the defaults; a bad value is a PermanentError. */
function replySettings(options: ReplyGenerationOptions): ReplySettings {
  const maxAttempts = options.maxModelAttempts ?? DEFAULT_STRUCTURED_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new PermanentError(
      "reply.invalid_option",
      `maxModelAttempts must be a positive integer, got ${maxAttempts}`,
    );
  const sendTtl = options.sendTtlSeconds ?? DEFAULT_SEND_TTL_SECONDS;
  if (!Number.isFinite(sendTtl) || sendTtl <= 0)
    throw new PermanentError(
      "reply.invalid_option",
      `sendTtlSeconds must be a positive number, got ${sendTtl}`,
    );
  return {
    model: options.model,
    maxAttempts,
    sendTtl,
    maxTokens: options.maxTokens ?? 1024,
  };
}

/** One new request: ask the model for a draft, then send it or hold it for review. */
async function decideReply(
  settings: ReplySettings,
  event: EventOf<"reply.generation.requested">,
  conversation: ConversationSnapshot,
  now: Date,
): Promise<TypedDecision<ReplyState, DraftEmit>> {
  const request = event.payload;
  const messages = conversation.context(request.context_version);
  const context = replyContext(event, request, messages, now);
  const allowed = allowedSourceRefs(request, messages);
  let result: StructuredResult<ReplyDraft>;
  try {
    result = await generateDraft(settings, context, allowed);
  } catch (error) {
    if (!(error instanceof ModelOutputInvalidError)) throw error;
    return invalidOutputDecision(context, error);
  }
  return draftDecision(settings, context, result.value, result.attempts);
}

function replyContext(
  event: Envelope,
  request: ReplyGenerationRequested,
  messages: readonly ContextMessage[],
  now: Date,
): ReplyContext {
  return {
    event,
    request,
    messages,
    now,
    fact: factFields(event, request.conversation_id),
    base: {
      task_id: event.task_id,
      conversation_id: request.conversation_id,
      tenant_id: tenantOf(event),
      customer_id: request.customer_id,
      channel: request.channel,
      ...(event.input_version === undefined ? {} : { input_version: event.input_version }),
      generated_at: now.toISOString(),
    },
  };
}

/** Asks the model for a valid draft, with corrections, up to `maxAttempts` calls. */
function generateDraft(
  settings: ReplySettings,
  { event, request, messages }: ReplyContext,
  allowed: readonly string[],
): Promise<StructuredResult<ReplyDraft>> {
  return invokeStructured(
    settings.model,
    {
      system: REPLY_SYSTEM_PROMPT,
      messages: [{ role: "user", text: replyPrompt(request, messages, allowed) }],
      maxTokens: settings.maxTokens,
      metadata: {
        role: "reply-generation",
        task_id: event.task_id,
        correlation_id: event.correlation_id,
        tenant_id: tenantOf(event),
      },
    },
    replyDraftSchema(allowed),
    {
      maxAttempts: settings.maxAttempts,
      output: {
        name: REPLY_DRAFT_SCHEMA,
        schema: modelSchemaOf(modelSchemas, REPLY_DRAFT_SCHEMA, "reply-generation"),
      },
    },
  );
}

/** No valid draft within the budget: hold the last raw answer for a person. */
function invalidOutputDecision(
  context: ReplyContext,
  error: ModelOutputInvalidError,
): TypedDecision<ReplyState, DraftEmit> {
  const raw = error.rawText.trim().slice(0, 4000) || "(the model gave no usable reply)";
  const guard = guardRawAnswer(raw, context.event, context.request, context.messages);
  const text = guard.redacted;
  return {
    state: {
      ...context.base,
      status: "held_for_review",
      reply_text: text,
      reason: HELD_INVALID_OUTPUT,
      model_attempts: error.attempts,
    },
    emit: [heldEvent(context, text, HELD_INVALID_OUTPUT, guard)],
  };
}

/**
 * A valid draft, guarded: `reply.generated` with the text as the guard left it, then the send
 * or, when the guard refused it, the request asks for it or the draft does, the hold for review.
 */
function draftDecision(
  settings: ReplySettings,
  context: ReplyContext,
  draft: ReplyDraft,
  attempts: number,
): TypedDecision<ReplyState, DraftEmit> {
  const guard = guardReply(draft.reply_text, context.event, context.request, context.messages);
  const text = guard.redacted;
  const held = heldReason(guard, context.request, draft);
  const generated: ReplyGenerated = {
    ...draft,
    reply_text: text,
    conversation_id: context.request.conversation_id,
    output_guard: guardRecord(guard),
  };
  const state: ReplyState = {
    ...context.base,
    status: held ? "held_for_review" : "sent_for_delivery",
    reply_text: text,
    confidence: draft.confidence,
    source_refs: draft.source_refs,
    ...(held ? { reason: held } : {}),
    model_attempts: attempts,
  };
  const next = held ? heldEvent(context, text, held) : sendEvent(settings, context, text);
  return {
    state,
    emit: [{ type: "reply.generated", payload: generated, ...context.fact }, next],
  };
}

/** Why a guarded draft is held for a person, or undefined when it may be sent. */
function heldReason(
  guard: OutputGuardResult,
  request: ReplyGenerationRequested,
  draft: ReplyDraft,
): string | undefined {
  if (guard.verdict === "refuse") return refusalReason(guard);
  if (request.hold_reason !== undefined) return request.hold_reason;
  return draft.requires_human_review ? HELD_REQUIRES_REVIEW : undefined;
}

function heldEvent(
  { request, fact }: ReplyContext,
  replyText: string,
  reason: string,
  guard?: OutputGuardResult,
): EmitOf<"reply.held_for_review"> {
  return {
    type: "reply.held_for_review",
    payload: {
      conversation_id: request.conversation_id,
      reply_text: replyText,
      reason,
      ...(guard === undefined ? {} : { output_guard: guardRecord(guard) }),
    },
    ...fact,
  };
}

/** The send command, logical attempt 1, due by the request's deadline or now + `sendTtl`. */
function sendEvent(
  settings: ReplySettings,
  context: ReplyContext,
  text: string,
): EmitOf<"notification.send.requested"> {
  const { event, request, now, fact } = context;
  return {
    type: "notification.send.requested",
    payload: {
      conversation_id: request.conversation_id,
      customer_id: request.customer_id,
      channel: request.channel,
      text,
      logical_attempt: 1,
      ...(request.order === undefined ? {} : { rests_on: restsOn(request.order) }),
    },
    ...fact,
    expiresAt: event.expires_at ?? new Date(now.getTime() + settings.sendTtl * 1000).toISOString(),
  };
}

/** The source refs a reply to this request may cite: its order, and each message of its context. */
export function allowedSourceRefs(
  request: ReplyGenerationRequested,
  messages: readonly Pick<ContextMessage, "message_event_id">[],
): string[] {
  const refs: string[] = [];
  if (request.order !== undefined)
    refs.push(`order:${request.order.order_id}`, `refund:${request.order.order_id}`);
  for (const m of messages) refs.push(`message:${m.message_event_id}`);
  return refs;
}

/** ReplyDraft, refined so that every source ref is one of `allowed`. */
export function replyDraftSchema(allowed: readonly string[]): z.ZodMiniType<ReplyDraft> {
  const set = new Set(allowed);
  return ReplyDraft.check(
    z.superRefine((draft, ctx) => {
      draft.source_refs.forEach((ref, index) => {
        if (!set.has(ref))
          ctx.addIssue({
            code: "custom",
            path: ["source_refs", index],
            message: `"${ref}" is not an allowed source ref; use only: ${allowed.join(", ")}`,
          });
      });
    }),
  );
}

/**
 * The user message: the facts as canonical JSON, then the allowed source refs, one a line. The
 * facts hold the turn's own message (`customer_message`) and, when the customer wrote more just
 * before it, those messages too (`earlier_messages`, oldest first, each with its source ref).
 */
export function replyPrompt(
  request: ReplyGenerationRequested,
  messages: readonly Pick<ContextMessage, "message_event_id" | "text">[],
  allowed: readonly string[],
): string {
  const earlier = messages.slice(0, -1);
  const facts: Record<string, unknown> = {
    customer_message: messages.at(-1)?.text ?? "",
    intent: request.intent,
    ...(earlier.length > 0
      ? {
          earlier_messages: earlier.map((m) => ({
            ref: `message:${m.message_event_id}`,
            text: m.text,
          })),
        }
      : {}),
  };
  if (request.order !== undefined) {
    const { customer_id: _customer, ...order } = request.order;
    facts.order = order;
  } else if (request.order_id !== undefined) {
    facts.order_lookup = { order_id: request.order_id, found: false };
  }
  if (request.refund_review !== undefined) facts.refund_review = request.refund_review;
  return [
    "Facts (JSON):",
    canonicalJson(facts),
    "",
    "Allowed source_refs:",
    ...allowed.map((ref) => `- ${ref}`),
  ].join("\n");
}
