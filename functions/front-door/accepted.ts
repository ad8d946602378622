import type { Envelope } from "../../schemas";

/**
 * What the front door keeps of each request it accepted under an `Idempotency-Key`, so that a
 * client's retry is the same request: the envelope it put on the bus and the answer it gave.
 *
 * Why not Powertools' idempotency utility: it keeps the answer, but a request whose function
 * stopped after putting the event and before saving the answer is run again once the record
 * expires, minting a second event id, hence a second task. Here the envelope is stored before it
 * is put on the bus, and every retry puts that same envelope again: consumers take a repeated
 * event id as a duplicate, so a retry at any point is one task.
 */
export interface AcceptedRequest {
  /**
   * `<tenant>#<SHA-256 of the user id and the Idempotency-Key>` (a service's without a user: of
   * the key): a key is the caller's alone, within its tenant.
   */
  readonly key: string;
  /** SHA-256 of the method, path and body: the same key with another request is refused. */
  readonly request_sha256: string;
  readonly envelope: Envelope;
  /** The answer's body (202). */
  readonly response: Readonly<Record<string, unknown>>;
  readonly accepted_at: string;
}

export interface AcceptedRequests {
  /** Store `record` unless one is stored under its key; the stored record either way. */
  putIfAbsent(record: AcceptedRequest, expiresAt: Date): Promise<AcceptedRequest>;
  /** The record stored under `key`, if any. */
  find(key: string): Promise<AcceptedRequest | undefined>;
}

/** In memory, for tests and the simulation. */
export class InMemoryAcceptedRequests implements AcceptedRequests {
  readonly records = new Map<string, AcceptedRequest>();

  async putIfAbsent(record: AcceptedRequest): Promise<AcceptedRequest> {
    const stored = this.records.get(record.key);
    if (stored) return structuredClone(stored);
    this.records.set(record.key, structuredClone(record));
    return record;
  }

  async find(key: string): Promise<AcceptedRequest | undefined> {
    const stored = this.records.get(key);
    return stored && structuredClone(stored);
  }
}
