import { describe, expect, it } from "vitest";
// The refund review's event types (refund.approved), which its role module would define.
import "../../functions/roles/refund-review/events";
import {
  type DescriptorOf,
  defineIntegration,
  defineModule,
  defineRole,
  InMemorySideEffects,
  type SideEffectStore,
  sideEffectKey,
  sideEffects,
  UnknownOutcomeError,
  type WriteFound,
  writeOnce,
} from "../../functions/kit";
import { testRole } from "../../lib/testing";

/**
 * An outside write, exactly once, by a role that is no agent: bookkeeping posts a ledger entry
 * for each refund approved, to an accounts system of its own (an integration), through
 * `writeOnce` (functions/core/write-once.ts) under a key derived from the step.
 */

// The integration: the accounts system's port, and its twin, which posts one entry per key.
interface LedgerEntry {
  readonly order_id: string;
  readonly amount_cents: number;
}
interface Accounts {
  /** Post the entry under `key`; its entry id. */
  post(entry: LedgerEntry, key: string): Promise<string>;
  /** What the accounts know of `key`. */
  find(key: string): Promise<WriteFound<string>>;
}

class InMemoryAccounts implements Accounts {
  readonly entries = new Map<string, LedgerEntry & { readonly id: string }>();
  async post(entry: LedgerEntry, key: string) {
    const id = this.entries.get(key)?.id ?? `entry-${this.entries.size + 1}`;
    this.entries.set(key, { ...entry, id });
    return id;
  }
  async find(key: string): Promise<WriteFound<string>> {
    const entry = this.entries.get(key);
    return entry ? { status: "applied", output: entry.id } : { status: "not_applied" };
  }
}

const accounts = defineIntegration<Accounts>({
  name: "accounts",
  access: "write",
  does: "posts ledger entries",
  defaults: undefined,
  memory: () => new InMemoryAccounts(),
});

// The role: one entry per approved refund, under the key `<task_id>:ledger-entry:1`.
type Books = { readonly entry?: string; readonly escalated?: string };

const BOOKKEEPING: DescriptorOf<"refund.approved"> = {
  group: "bookkeeping",
  subscriptions: ["refund.approved"],
  stateOf: (event) => ({ type: "books", id: event.task_id }),
};

function bookkeeping(ports: { accounts: Accounts; sideEffects: SideEffectStore }) {
  return defineRole<Books, "refund.approved">({
    ...BOOKKEEPING,
    async decide(_state, event, { now, receiveCount }) {
      const { order_id, amount_cents } = event.payload;
      const key = sideEffectKey(event.task_id, "ledger-entry", 1);
      const outcome = await writeOnce({
        name: "accounts",
        call: () => ports.accounts.post({ order_id, amount_cents }, key),
        query: () => ports.accounts.find(key),
        ledger: ports.sideEffects,
        key,
        taskId: event.task_id,
        kind: "ledger-entry",
        now,
        receiveCount,
        unknownCode: "accounts.outcome_unknown",
      });
      if (outcome.kind === "succeeded") return { state: { entry: outcome.output } };
      // Refused, or handed to a person: the record stays `unknown`, listed by `agentbus status`.
      return { state: { escalated: outcome.error.message } };
    },
  });
}

const bookkeepingModule = defineModule({
  descriptor: BOOKKEEPING,
  entry: "none",
  deployment: {},
  uses: { accounts, sideEffects },
  build: (ports) => bookkeeping(ports),
});

/** The accounts twin, faulty: a post times out after it applied; the query cannot tell `n` times. */
class FaultyAccounts extends InMemoryAccounts {
  posts = 0;
  constructor(private unclearQueries: number) {
    super();
  }
  override async post(entry: LedgerEntry, key: string): Promise<string> {
    this.posts += 1;
    await super.post(entry, key);
    throw new UnknownOutcomeError("accounts.timeout", "the accounts did not answer");
  }
  override async find(key: string): Promise<WriteFound<string>> {
    if (this.unclearQueries-- > 0) return { status: "unknown" };
    return super.find(key);
  }
}

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const KEY = `${TASK}:ledger-entry:1`;

async function refundApproved(unclearQueries: number) {
  const faulty = new FaultyAccounts(unclearQueries);
  const ledger = new InMemorySideEffects();
  const t = testRole(bookkeepingModule, {
    integrations: { accounts: faulty, sideEffects: ledger },
  });
  const [approved] = await t.append(
    { aggregate: { type: "refund", id: TASK }, taskId: TASK },
    {
      type: "refund.approved",
      payload: {
        order_id: "456",
        conversation_id: "conv_01KB0Q3V9X7T2M4N6P8R0S1W3Z",
        amount_cents: 3450,
        refund_id: "rf_1",
      },
    },
  );
  if (!approved) throw new Error("nothing appended");
  return { t, faulty, ledger, approved };
}

describe("an outside write, exactly once, by a role that is not an agent", () => {
  it("a post that times out after applying is learnt by key on redelivery: one entry", async () => {
    const { t, faulty, ledger, approved } = await refundApproved(1);
    await expect(t.deliver(approved)).rejects.toMatchObject({ code: "accounts.outcome_unknown" });
    expect((await ledger.get(KEY))?.state).toBe("unknown");
    // The queue hands the event out again: the record is asked about before anything is posted.
    expect((await t.deliver(approved, { receiveCount: 2 })).status).toBe("applied");
    expect(await t.state({ type: "books", id: TASK })).toEqual({ entry: "entry-1" });
    expect([faulty.posts, faulty.entries.size]).toEqual([1, 1]);
    expect(await ledger.get(KEY)).toMatchObject({ state: "succeeded", attempts: 2 });
    expect((await t.deliver(approved, { receiveCount: 3 })).status).toBe("duplicate");
  });

  it("an outcome that cannot be learnt is escalated after five deliveries, never a new key", async () => {
    const { t, faulty, ledger, approved } = await refundApproved(Number.POSITIVE_INFINITY);
    for (let receiveCount = 1; receiveCount < 5; receiveCount++)
      await expect(t.deliver(approved, { receiveCount })).rejects.toMatchObject({
        code: "accounts.outcome_unknown",
      });
    expect((await t.deliver(approved, { receiveCount: 5 })).status).toBe("applied");
    expect(await t.state({ type: "books", id: TASK })).toEqual({
      escalated: `accounts: the query by key could not tell (key ${KEY}, attempt 5 of 5)`,
    });
    expect(faulty.posts).toBe(1);
    expect([...ledger.records.keys()]).toEqual([KEY]);
    expect(await ledger.get(KEY)).toMatchObject({ state: "unknown", attempts: 5 });
  });
});
