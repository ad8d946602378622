import { describe, expect, it } from "vitest";
import { PermanentError, TransientError, UnknownOutcomeError } from "../../functions/core/errors";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import {
  closeByPerson,
  resendByPerson,
  type WriteFound,
  type WriteOnce,
  writeOnce,
} from "../../functions/core/write-once";

/**
 * The contract of an outside write run once (functions/core/write-once.ts), clause by clause, on
 * an outside system that applies each key once and fails its next calls and queries as told.
 */

const T0 = new Date("2026-01-01T00:00:00.000Z");
const KEY = "task_1:entry:1";

type CallFault = "timeout-after" | "timeout-before" | "refuse" | "unavailable";
type QueryFault = "unknown" | "timeout";

class Books {
  readonly entries = new Map<string, string>();
  readonly callFaults: CallFault[] = [];
  readonly queryFaults: QueryFault[] = [];
  calls = 0;
  queries = 0;

  async post(key: string): Promise<string> {
    this.calls += 1;
    const fault = this.callFaults.shift();
    if (fault === "refuse") throw new PermanentError("books.closed", "the period is closed");
    if (fault === "unavailable") throw new TransientError("books.unavailable", "try later");
    if (fault === "timeout-before") throw new UnknownOutcomeError("books.timeout", "no answer");
    const id = this.entries.get(key) ?? `entry-${this.entries.size + 1}`;
    this.entries.set(key, id);
    if (fault === "timeout-after") throw new UnknownOutcomeError("books.timeout", "no answer");
    return id;
  }

  async find(key: string): Promise<WriteFound<string>> {
    this.queries += 1;
    const fault = this.queryFaults.shift();
    if (fault === "timeout") throw new UnknownOutcomeError("books.timeout", "no answer");
    if (fault === "unknown") return { status: "unknown" };
    const id = this.entries.get(key);
    return id ? { status: "applied", output: id } : { status: "not_applied" };
  }
}

function setup() {
  const books = new Books();
  const ledger = new InMemorySideEffects();
  const write = (step: Partial<WriteOnce<string>> = {}): WriteOnce<string> => ({
    name: "books",
    call: () => books.post(KEY),
    query: () => books.find(KEY),
    ledger,
    key: KEY,
    taskId: "task_1",
    kind: "entry",
    now: T0,
    unknownCode: "books.outcome_unknown",
    ...step,
  });
  return { books, ledger, write };
}

describe("writeOnce", () => {
  it("claims, calls once and records succeeded; the step again is answered by the record", async () => {
    const { books, ledger, write } = setup();
    expect(await writeOnce(write())).toEqual({ kind: "succeeded", output: "entry-1", by: "call" });
    expect(await writeOnce(write())).toEqual({
      kind: "succeeded",
      output: "entry-1",
      by: "record",
    });
    expect(books.calls).toBe(1);
    expect(await ledger.get(KEY)).toMatchObject({ state: "succeeded", attempts: 2 });
  });

  it("resolves a timeout by the query: applied, or not applied and called once more", async () => {
    const after = setup();
    after.books.callFaults.push("timeout-after");
    expect(await writeOnce(after.write())).toMatchObject({ by: "query after timeout" });
    expect([after.books.calls, after.books.entries.size]).toEqual([1, 1]);
    const before = setup();
    before.books.callFaults.push("timeout-before");
    expect(await writeOnce(before.write())).toMatchObject({ kind: "succeeded", by: "retry" });
    expect([before.books.calls, before.books.entries.size]).toEqual([2, 1]);
  });

  it("records a refusal failed, and answers it from the record after", async () => {
    const { books, ledger, write } = setup();
    books.callFaults.push("refuse");
    const refused = {
      kind: "failed",
      error: { code: "books.closed", message: "the period is closed" },
    };
    expect(await writeOnce(write())).toEqual(refused);
    expect(await writeOnce(write())).toEqual(refused);
    expect(books.calls).toBe(1);
    expect((await ledger.get(KEY))?.state).toBe("failed");
  });

  it("asks first on a retry of a record an earlier attempt left", async () => {
    const { books, ledger, write } = setup();
    books.callFaults.push("unavailable");
    await expect(writeOnce(write())).rejects.toMatchObject({ code: "books.unavailable" });
    expect((await ledger.get(KEY))?.state).toBe("pending");
    expect(await writeOnce(write({ receiveCount: 2 }))).toMatchObject({ by: "retry" });
    expect([books.queries, books.calls, books.entries.size]).toEqual([1, 2, 1]);
  });

  it("an outcome it cannot learn is thrown below the bound and returned at it, under one key", async () => {
    const { books, ledger, write } = setup();
    books.callFaults.push("timeout-after");
    books.queryFaults.push("unknown", "unknown");
    const first = writeOnce(write({ maxUnknownAttempts: 2 }));
    await expect(first).rejects.toBeInstanceOf(TransientError);
    await expect(first).rejects.toMatchObject({
      code: "books.outcome_unknown",
      message: `books: the query by key could not tell (key ${KEY}, attempt 1 of 2)`,
    });
    const second = await writeOnce(write({ maxUnknownAttempts: 2, receiveCount: 2 }));
    expect(second).toMatchObject({ kind: "unknown", error: { code: "books.outcome_unknown" } });
    expect(await ledger.get(KEY)).toMatchObject({ state: "unknown", attempts: 2 });
    expect([...ledger.records.keys()]).toEqual([KEY]);
    expect(books.calls).toBe(1);
  });

  it("resends an unclear outcome under the same key only while the integration says it is safe", async () => {
    const { books, write } = setup();
    books.callFaults.push("timeout-before");
    books.queryFaults.push("unknown");
    const safe = await writeOnce(write({ resendSafeWithinSeconds: 60 }));
    expect(safe).toMatchObject({ kind: "succeeded", by: "retry" });
    expect(books.calls).toBe(2);
  });

  it("without a query: a timeout is unknown, and the next attempt calls again only when safe", async () => {
    const idempotent = setup();
    const noQuery = { query: undefined, resendSafeWithinSeconds: Number.POSITIVE_INFINITY };
    idempotent.books.callFaults.push("timeout-before");
    await expect(writeOnce(idempotent.write(noQuery))).rejects.toMatchObject({
      message: `books: no answer (key ${KEY}, attempt 1 of 5)`,
    });
    const again = await writeOnce(idempotent.write({ ...noQuery, receiveCount: 2 }));
    expect(again).toMatchObject({ kind: "succeeded", by: "retry" });
    const unsafe = setup();
    unsafe.books.callFaults.push("timeout-after");
    const blind = { query: undefined, maxUnknownAttempts: 2 };
    await expect(writeOnce(unsafe.write(blind))).rejects.toBeInstanceOf(TransientError);
    expect(await writeOnce(unsafe.write({ ...blind, receiveCount: 2 }))).toMatchObject({
      kind: "unknown",
    });
    expect(unsafe.books.calls).toBe(1);
  });

  it("learnOnly: calls nothing, and closes a key the integration never saw", async () => {
    const { books, ledger, write } = setup();
    books.callFaults.push("unavailable");
    await expect(writeOnce(write())).rejects.toBeInstanceOf(TransientError);
    const notWanted = { code: "books.not_posted", message: "the step was cancelled" };
    expect(await writeOnce(write({ learnOnly: notWanted }))).toEqual({
      kind: "not_called",
      error: notWanted,
    });
    expect(books.calls).toBe(1);
    expect(await ledger.get(KEY)).toMatchObject({ state: "failed", error: notWanted });
  });
});

describe("a person's answer to a write handed to them", () => {
  async function escalated() {
    const t = setup();
    t.books.callFaults.push("timeout-before");
    t.books.queryFaults.push("unknown");
    expect(await writeOnce(t.write({ maxUnknownAttempts: 1 }))).toMatchObject({ kind: "unknown" });
    return t;
  }

  it("resendByPerson calls again under the same key and records what it gives", async () => {
    const { books, ledger, write } = await escalated();
    expect(await resendByPerson(write())).toMatchObject({ kind: "succeeded", by: "retry" });
    expect((await ledger.get(KEY))?.state).toBe("succeeded");
    expect([...books.entries.keys()]).toEqual([KEY]);
  });

  it("closeByPerson closes the record as they found it, and nothing is called", async () => {
    const { books, ledger, write } = await escalated();
    await closeByPerson(write(), { applied: true, output: "entry-by-hand" });
    expect(await ledger.get(KEY)).toMatchObject({
      state: "succeeded",
      result: { output_json: '"entry-by-hand"' },
    });
    expect(await writeOnce(write())).toMatchObject({ output: "entry-by-hand", by: "record" });
    expect(books.calls).toBe(1);
  });
});
