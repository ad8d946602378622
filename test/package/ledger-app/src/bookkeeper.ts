import { defineModule, defineRole, payloadOf, type RolePorts } from "agentbus";
import { type Ledger, ledger } from "./ledger.js";

interface Book {
  readonly entries: number;
}

/** Records a ledger entry for every refund made, once per refund. */
export function bookkeeperRole(book: Ledger) {
  return defineRole<Book, "refund.approved">({
    group: "bookkeeper",
    subscriptions: ["refund.approved"],
    stateOf: (event) => ({ type: "ledger_book", id: payloadOf(event, "refund.approved").order_id }),
    async decide(state, event) {
      const { order_id, amount_cents, refund_id } = event.payload;
      await book.record(refund_id, { orderId: order_id, amountCents: amount_cents });
      return { state: { entries: (state?.entries ?? 0) + 1 }, emit: [] };
    },
  });
}

const uses = { book: ledger };

export const bookkeeperModule = defineModule({
  descriptor: { group: "bookkeeper", subscriptions: ["refund.approved"] },
  entry: "src/handler.ts",
  deployment: {},
  uses,
  build: (ports: RolePorts<typeof uses>) => bookkeeperRole(ports.book),
});
