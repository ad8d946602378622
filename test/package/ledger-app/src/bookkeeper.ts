import { defineModule, defineRole, payloadOf, type RolePorts } from "agentbus";
import { entryRecorded } from "./events.js";
import { type Ledger, ledger } from "./ledger.js";

interface Book {
  readonly entries: number;
}

/** Records a ledger entry for every refund made, once per refund, and says so. */
export function bookkeeperRole(book: Ledger) {
  return defineRole<Book, "refund.approved", "ledger.entry_recorded">({
    group: "bookkeeper",
    subscriptions: ["refund.approved"],
    emits: ["ledger.entry_recorded"],
    // The book's stream carries its entries: its id is an opaque id (<prefix>_<token>).
    stateOf: (event) => ({
      type: "ledger_book",
      id: `book_${payloadOf(event, "refund.approved").order_id}`,
    }),
    async decide(state, event) {
      const { order_id, amount_cents, refund_id } = event.payload;
      const { entryId } = await book.record(refund_id, {
        orderId: order_id,
        amountCents: amount_cents,
      });
      const payload = { order_id, refund_id, entry_id: entryId, amount_cents };
      return {
        state: { entries: (state?.entries ?? 0) + 1 },
        emit: [{ type: "ledger.entry_recorded", payload }],
      };
    },
  });
}

const uses = { book: ledger };

export const bookkeeperModule = defineModule({
  descriptor: {
    group: "bookkeeper",
    subscriptions: ["refund.approved"],
    emits: ["ledger.entry_recorded"],
  },
  entry: "src/handler.ts",
  deployment: {},
  uses,
  events: [entryRecorded],
  build: (ports: RolePorts<typeof uses>) => bookkeeperRole(ports.book),
});
