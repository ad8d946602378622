import * as z from "../../../schemas/zod";
import {
  content,
  defineModule,
  handlerBeside,
  model,
  OUTPUT_GUARD_ATTENTION,
  personWaitRules,
  type RolePorts,
  sideEffects,
  use,
} from "../../kit";
import {
  conversationContextReader,
  conversationReader,
} from "../customer-support/conversation/conversation";
import { SUPPORT_EVENT_TYPES } from "../customer-support/events/index";
import { orders } from "../customer-support/integrations/orders";
import { payments } from "../customer-support/integrations/payments";
import { TENANT_FAIR_CONCURRENCY } from "../customer-support/tenant-fairness";
import { REFUND_EVENT_TYPES, REFUND_REVIEW_NEEDS_PERSON } from "./events";
import { refundReview } from "./local-script";
import {
  DEFAULT_REFUND_SETTINGS,
  REFUND_MODEL_SCHEMAS,
  REFUND_REVIEW,
  type RefundAgentPorts,
  type RefundAgentSettings,
  refundReviewRole,
} from "./refund-agent";
import { RefundReviewStepInput, RefundReviewStepOutput, refundReviewStep } from "./step";

const cents = z.coerce.number().check(z.int(), z.minimum(0), z.maximum(100_000_000));

/**
 * `REFUND_APPROVAL_ABOVE_CENTS` (default 10000): refunds above this wait for a person's approval;
 * `REFUND_APPROVAL_DEADLINE_SECONDS` (default a day): how long they wait before the call is
 * refused; `REFUND_MAX_TURNS` (default 12): the model turns a review may take.
 */
export const RefundReviewSettings = z.object({
  REFUND_APPROVAL_ABOVE_CENTS: z._default(cents, DEFAULT_REFUND_SETTINGS.approvalAboveCents),
  REFUND_APPROVAL_DEADLINE_SECONDS: z._default(
    z.coerce.number().check(z.int(), z.minimum(60), z.maximum(30 * 24 * 3600)),
    DEFAULT_REFUND_SETTINGS.approvalDeadlineSeconds,
  ),
  REFUND_MAX_TURNS: z._default(
    z.coerce.number().check(z.int(), z.minimum(1), z.maximum(100)),
    DEFAULT_REFUND_SETTINGS.maxTurns,
  ),
});

/**
 * What the refund agent calls: the model, its conversation's content and write tools' ledger, the
 * orders (it cancels one before its refund) and the payment system.
 */
const REFUND_USES = {
  // On the local model, the agent answers with its script (./local-script.ts).
  model: use(model, { localScripts: { "refund-review": refundReview } }),
  content,
  sideEffects,
  orders: use(orders, { cancel: true }),
  payments,
};

/**
 * The refund agent (seed 000 §10): an agent loop over the orders and the payment system, one step
 * per delivery, its refunds under idempotency keys, a person's approval above an amount.
 */
export const refundReviewModule = defineModule({
  descriptor: REFUND_REVIEW,
  entry: handlerBeside(import.meta.url),
  events: [...SUPPORT_EVENT_TYPES, ...REFUND_EVENT_TYPES],
  deployment: {
    batchSize: 1,
    ...TENANT_FAIR_CONCURRENCY,
    delivery: "relay",
    functionTimeoutSeconds: 120,
    // A write whose outcome stays unknown is handed to a person after 5 deliveries
    // (DEFAULT_MAX_UNKNOWN_ATTEMPTS); the queue must hand the step out at least that often.
    maxReceiveCount: 8,
    needs: { heartbeat: "visibility" },
    // A reason the output guard refused (./reason-guard.ts) raises `output-guard-refusals`.
    attention: [...personWaitRules(REFUND_REVIEW_NEEDS_PERSON), OUTPUT_GUARD_ATTENTION],
  },
  settings: RefundReviewSettings,
  uses: REFUND_USES,
  modelSchemas: REFUND_MODEL_SCHEMAS,
  build: (ports, settings) =>
    refundReviewRole(refundAgentPorts(ports), refundAgentSettings(settings)),
  // A workflow node may review a refund request too (./step.ts): it decides, it refunds nothing.
  steps: {
    input: RefundReviewStepInput,
    output: RefundReviewStepOutput,
    run: (ports, settings) =>
      refundReviewStep(ports, { approvalAboveCents: settings.REFUND_APPROVAL_ABOVE_CENTS }),
  },
});

/** The refund agent's ports, from the ones its module is given. */
export function refundAgentPorts(ports: RolePorts<typeof REFUND_USES>): RefundAgentPorts {
  return {
    conversation: conversationContextReader(ports.store),
    conversationNow: conversationReader(ports.store),
    model: ports.model,
    content: ports.content,
    sideEffects: ports.sideEffects,
    orders: ports.orders,
    payments: ports.payments,
  };
}

/** The refund agent's settings, from its module's. */
export function refundAgentSettings(
  settings: z.output<typeof RefundReviewSettings>,
): RefundAgentSettings {
  return {
    approvalAboveCents: settings.REFUND_APPROVAL_ABOVE_CENTS,
    approvalDeadlineSeconds: settings.REFUND_APPROVAL_DEADLINE_SECONDS,
    maxTurns: settings.REFUND_MAX_TURNS,
  };
}
