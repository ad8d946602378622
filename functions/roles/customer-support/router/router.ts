import type { EmitSpec, Role } from "../../../kit";
import {
  type DescriptorOf,
  defineRole,
  type EmitOf,
  type EventOf,
  type TypedDecision,
} from "../../../kit";
import {
  CONVERSATION_AGGREGATE,
  type ConversationContextReader,
  streamContextReader,
} from "../conversation/conversation";
import type { RouteRequested } from "../events/commands";
import { type Intent, OrderId, type Routed } from "../events/conversation";
import { factFields } from "../fact-fields";

/**
 * The router group: decides what a customer's message is about, with fixed rules (no model).
 *
 * Rules, first match wins (`routeMessage`):
 * 1. `order_number_with_refund_words`: the text names an order number and has a refund word
 *    -> intent `refund`;
 * 2. `order_number`: the text names an order number -> intent `order_status`;
 * 3. `no_order_number`: anything else -> intent `general`.
 *
 * An order number is a keyword followed by a token that holds at least one digit and is a valid
 * OrderId (letters, digits, `_`, `-`):
 * - keywords: `order` / `orders` (optionally followed by `number`, `no`, `no.`, `num`, `id`,
 *   then optionally `is`), `订单`, `订单号`, `订单编号`;
 * - between keyword and token: spaces, `:`, `：`, `#`.
 * So "order 123", "order #A-1001", "Order no. 123", "my order number is 123", "订单 123",
 * "订单号：A-1001" name an order; "order status", "#1" or a bare "123" do not.
 * Refund words (case-insensitive): refund (also refunds, refunded), money back, reimburse,
 * 退款, 退钱.
 *
 * Each `support.route.requested` is routed once, on the stream `support_route/<task_id>`:
 * `support.routed` (the intent and the rule), then `refund.review.requested` for a refund question
 * about an order (the refund agent), `order.lookup.requested` for another question about an order,
 * else `reply.generation.requested`. Every emitted event keeps the request's
 * `input_version`, the conversation id and `order_key` = conversation id; the commands also keep
 * its `expires_at` (facts carry no deadline, so read models never drop them). A redelivered
 * request, once the route is stored, emits nothing.
 */

export const SUPPORT_ROUTE_AGGREGATE = "support_route";

export const ROUTER_RULES = {
  refund: "order_number_with_refund_words",
  orderStatus: "order_number",
  general: "no_order_number",
} as const;

export interface Route {
  readonly intent: Intent;
  readonly order_id?: string;
  readonly rule: string;
}

export interface RouteState extends Route {
  readonly task_id: string;
  readonly conversation_id: string;
  readonly routed_at: string;
}

const ORDER_NUMBER =
  /(?:\borders?\b(?:\s*(?:number|num|no\.?|id)\b\.?)?(?:\s*is\b)?|订单编号|订单号|订单)[\s:：#]*([A-Za-z0-9][A-Za-z0-9_-]{0,63})/giu;
const REFUND_WORDS = /refund|money\s+back|reimburse|退款|退钱/iu;

/** The order number the text names, if any (see the rules above). */
export function findOrderId(text: string): string | undefined {
  for (const match of text.matchAll(ORDER_NUMBER)) {
    const token = match[1]?.replace(/[-_]+$/, "");
    if (token && /[0-9]/.test(token) && OrderId.safeParse(token).success) return token;
  }
  return undefined;
}

/** Applies the routing rules to a message's text. */
export function routeMessage(text: string): Route {
  return routeTexts([text]);
}

/**
 * Applies the routing rules to a turn's context (oldest first, the turn's own message last): the
 * merged intent. The order number is the newest one named; refund words in any of the messages
 * count. So "I want a refund" then "the order number is A-1002" routes to a refund of A-1002.
 */
export function routeTexts(texts: readonly string[]): Route {
  const orderId = texts.reduceRight<string | undefined>(
    (found, t) => found ?? findOrderId(t),
    undefined,
  );
  if (orderId === undefined) return { intent: "general", rule: ROUTER_RULES.general };
  if (texts.some((t) => REFUND_WORDS.test(t)))
    return { intent: "refund", order_id: orderId, rule: ROUTER_RULES.refund };
  return { intent: "order_status", order_id: orderId, rule: ROUTER_RULES.orderStatus };
}

/** The router's group and what it takes (the topology declares it from this). */
export const ROUTER: DescriptorOf<"support.route.requested", RouterEmit> = {
  group: "router",
  subscriptions: ["support.route.requested"],
  emits: [
    "support.routed",
    "order.lookup.requested",
    "refund.review.requested",
    "reply.generation.requested",
  ],
  stateOf: (event) => ({ type: SUPPORT_ROUTE_AGGREGATE, id: event.task_id }),
  // A conversation's stream carries the route requests of all its turns, one state each.
  sharedStreams: [CONVERSATION_AGGREGATE],
  // Folded with each turn's context as the conversation's stream recorded it: the conversation's
  // state keeps only its last messages, and a fold must not depend on when it runs.
  foldWith: (recorded) =>
    routerRole({ context: streamContextReader(recorded.readStream) }) as Role<unknown>,
};

export interface RouterOptions {
  /** The turn's context (see conversationContextReader in ./conversation). */
  readonly context: ConversationContextReader;
}

/** The route's fact, then the command for the turn's next step. */
type RouterEmit = "support.routed" | RouterCommand;
type RouterCommand =
  | "order.lookup.requested"
  | "refund.review.requested"
  | "reply.generation.requested";

export function routerRole(options: RouterOptions): Role<RouteState> {
  return defineRole<RouteState, "support.route.requested", RouterEmit>({
    ...ROUTER,
    async decide(existing, event, { now }) {
      if (existing) return {};
      const request = event.payload;
      const messages = await options.context(request.conversation_id, request.context_version);
      return routed(event, request, routeTexts(messages.map((m) => m.text)), now);
    },
  });
}

/**
 * `support.routed`, then the refund agent (a refund question about an order), the order lookup
 * (another question about an order) or the reply request (no order named).
 */
function routed(
  event: EventOf<"support.route.requested">,
  request: RouteRequested,
  route: Route,
  now: Date,
): TypedDecision<RouteState, RouterEmit> {
  const fact = factFields(event, request.conversation_id);
  const command = { ...fact, expiresAt: event.expires_at };
  const routedFact: Routed = {
    conversation_id: request.conversation_id,
    intent: route.intent,
    ...(route.order_id === undefined ? {} : { order_id: route.order_id }),
    rule: route.rule,
  };
  return {
    state: {
      ...route,
      task_id: event.task_id,
      conversation_id: request.conversation_id,
      routed_at: now.toISOString(),
    },
    emit: [
      { type: "support.routed", payload: routedFact, ...fact },
      nextCommand(request, route, command),
    ],
  };
}

function nextCommand(
  request: RouteRequested,
  route: Route,
  command: Pick<EmitSpec, "expiresAt" | "inputVersion" | "orderKey" | "conversationId">,
): EmitOf<RouterCommand> {
  if (route.order_id === undefined)
    return {
      type: "reply.generation.requested",
      payload: { ...request, intent: route.intent },
      ...command,
    };
  if (route.intent === "refund")
    return {
      type: "refund.review.requested",
      payload: { ...request, intent: "refund", order_id: route.order_id },
      ...command,
    };
  return {
    type: "order.lookup.requested",
    payload: { ...request, intent: route.intent, order_id: route.order_id },
    ...command,
  };
}
