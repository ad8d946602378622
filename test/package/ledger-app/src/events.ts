import { defineEventType, type PayloadTypes, streamFact, z } from "agentbus";

/** The ledger's own fact: the bookkeeper made the entry of a refund (once per refund). */
export const entryRecorded = defineEventType({
  ...streamFact,
  type: "ledger.entry_recorded",
  description: "the ledger entry of a refund was recorded",
  payload: z.object({
    order_id: z.string(),
    refund_id: z.string(),
    entry_id: z.string(),
    amount_cents: z.int(),
  }),
});

// Its payload's type, for defineRole, payloadOf and the test kit.
declare module "agentbus" {
  interface EventPayloads extends PayloadTypes<typeof entryRecorded> {}
}
