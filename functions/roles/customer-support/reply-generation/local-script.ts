import {
  LOCAL_MODEL_NAME,
  type ModelRequest,
  PermanentError,
  type RequestFacts,
} from "../../../kit";

/**
 * Reply generation's script on the local model (a scripted stand-in, NOT a model), which its
 * module registers (`localScripts` of its model's use, ./index.ts): quotes the customer's
 * message and the order facts of the prompt, tells what the refund agent decided when it decided,
 * cites only the allowed source refs the prompt lists, asks for a human review when the request
 * contains `[human-review]`, and refuses the call (PermanentError `model.access_denied`, as
 * Bedrock without model access) when it contains `[model-access-denied]`.
 */

const REPLY_OPENINGS = [
  "Thanks for reaching out.",
  "Thanks for the details.",
  "Sorry for the trouble.",
  "Good question.",
] as const;
const REPLY_ACTIONS = [
  "I have checked your account and the change is now in place.",
  "The steps in our help article should resolve this; reply if they do not.",
  "Your request has been logged and the team will follow up by email.",
  "A corrected invoice is on its way to the address on file.",
] as const;

export const HUMAN_REVIEW_MARKER = "[human-review]";
/** In a reply-generation request: the model refuses the call as Bedrock does without access. */
export const MODEL_ACCESS_DENIED_MARKER = "[model-access-denied]";

const REPLY_QUOTE_CHARS = 60;
const ALLOWED_REFS_HEADER = "Allowed source_refs:";

interface ReplyFacts {
  readonly customer_message?: string;
  readonly intent?: string;
  readonly order?: {
    readonly order_id?: string;
    readonly status?: string;
    readonly item?: string;
    readonly refund?: { readonly status?: string; readonly amount_cents?: number };
    readonly currency?: string;
  };
  readonly order_lookup?: { readonly order_id?: string; readonly found?: boolean };
  /** The refund agent's outcome, for a refund question (what the reply must tell). */
  readonly refund_review?: { readonly decision?: string; readonly reason: string };
}

/**
 * The facts and allowed source refs of a reply-generation prompt (see
 * functions/roles/customer-support/reply-generation/reply-generation.ts `replyPrompt`): the first line of the first user message
 * that is a JSON object, and the `- <ref>` lines after "Allowed source_refs:". Plain text
 * requests give no facts and no refs.
 */
function replyFactsOf(request: ModelRequest): { facts: ReplyFacts; refs: string[]; text: string } {
  const text = request.messages[0]?.text ?? "";
  const lines = text.split("\n");
  let facts: ReplyFacts = {};
  for (const line of lines) {
    if (!line.startsWith("{")) continue;
    try {
      const value: unknown = JSON.parse(line);
      if (value !== null && typeof value === "object") facts = value as ReplyFacts;
    } catch {
      // Not the facts line.
    }
    break;
  }
  const header = lines.indexOf(ALLOWED_REFS_HEADER);
  const refs: string[] = [];
  if (header >= 0)
    for (const line of lines.slice(header + 1)) {
      if (!line.startsWith("- ")) break;
      refs.push(line.slice(2).trim());
    }
  return { facts, refs, text };
}

function money(cents: number, currency: string | undefined): string {
  return `${(cents / 100).toFixed(2)}${currency ? ` ${currency}` : ""}`;
}

export function replyGeneration(request: ModelRequest, facts: RequestFacts) {
  if (facts.text.includes(MODEL_ACCESS_DENIED_MARKER))
    throw new PermanentError(
      "model.access_denied",
      `AccessDeniedException: ${LOCAL_MODEL_NAME} may not be invoked for this request (${MODEL_ACCESS_DENIED_MARKER})`,
    );
  const { facts: given, refs, text } = replyFactsOf(request);
  const message = (given.customer_message ?? text).replace(/\s+/g, " ").trim();
  const quote =
    message.length > REPLY_QUOTE_CHARS ? `${message.slice(0, REPLY_QUOTE_CHARS - 1)}…` : message;
  const parts = [`Re: "${quote}".`, facts.pick(REPLY_OPENINGS, "opening")];
  const order = given.order;
  const cited: string[] = [];
  if (order?.order_id !== undefined) {
    parts.push(
      `Order ${order.order_id}${order.item ? ` (${order.item})` : ""} is ${order.status ?? "on file"}.`,
    );
    cited.push(...refs.filter((ref) => ref === `order:${order.order_id}`));
    const refund = order.refund;
    if (given.refund_review !== undefined) {
      parts.push(given.refund_review.reason);
      cited.push(...refs.filter((ref) => ref === `refund:${order.order_id}`));
    } else if (
      refund?.status !== undefined &&
      (refund.status !== "none" || given.intent === "refund")
    ) {
      parts.push(
        `Refund status: ${refund.status}${
          refund.amount_cents !== undefined
            ? ` (${money(refund.amount_cents, order.currency)})`
            : ""
        }.`,
      );
      cited.push(...refs.filter((ref) => ref === `refund:${order.order_id}`));
    } else if (given.intent === "refund") {
      parts.push("No refund has been requested for it yet.");
    }
  } else if (given.order_lookup?.order_id !== undefined) {
    parts.push(`I could not find order ${given.order_lookup.order_id} on your account.`);
  } else {
    parts.push(facts.pick(REPLY_ACTIONS, "action"));
  }
  cited.push(...refs.filter((ref) => ref.startsWith("message:")));
  const review = facts.text.includes(HUMAN_REVIEW_MARKER);
  return {
    reply_text: parts.join(" "),
    confidence: facts.int(review ? 30 : 60, review ? 55 : 95, "confidence") / 100,
    requires_human_review: review,
    source_refs: cited,
  };
}
