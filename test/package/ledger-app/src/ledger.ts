import { defineIntegration } from "agentbus";

/** A ledger service: one entry per key, whoever asks twice. */
export interface Ledger {
  record(key: string, entry: LedgerEntry): Promise<{ readonly entryId: string }>;
}

export interface LedgerEntry {
  readonly orderId: string;
  readonly amountCents: number;
}

/** The ledger's in-memory twin: it keeps each key's first entry. */
export class MemoryLedger implements Ledger {
  readonly entries = new Map<string, LedgerEntry>();
  async record(key: string, entry: LedgerEntry) {
    if (!this.entries.has(key)) this.entries.set(key, entry);
    return { entryId: key };
  }
}

export const ledger = defineIntegration<Ledger>({
  name: "ledger",
  access: "write",
  does: "records ledger entries",
  defaults: undefined,
  memory: () => new MemoryLedger(),
});
