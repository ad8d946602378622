import type { DataKeyContext } from "./key-wrapping";

/**
 * Where each customer's data key is kept, wrapped (./key-wrapping), and which conversations are
 * whose. One record per customer of a tenant: its current key, the conversations it owns, and
 * the erasures made of it. Erasing deletes the key: what was sealed under it never opens again.
 */

/** A customer of a tenant: whose data a data key seals. */
export type DataSubject = DataKeyContext;

export interface CustomerKey {
  /** Names the key in every value sealed under it (a customer erased and back gets a new one). */
  readonly keyId: string;
  readonly wrapped: Uint8Array;
}

/** Who erased a customer, when, and why: never what was erased. */
export interface ErasureRecord {
  readonly at: string;
  readonly by: string;
  readonly reason?: string;
}

export interface CustomerRecord {
  readonly subject: DataSubject;
  /** Absent once erased (until the customer's data is sealed again, under a new key). */
  readonly key?: CustomerKey;
  /** The last erasure, when there was one. */
  readonly erased?: ErasureRecord;
}

export interface CustomerKeyStore {
  /** The customer's key and last erasure: what sealing and opening read. */
  customer(subject: DataSubject): Promise<CustomerRecord | undefined>;
  /**
   * The conversations whose personal data is sealed under the customer's keys: what an erasure
   * reads (a separate read, so the key's readers never pay for a long list).
   */
  conversationsOf(subject: DataSubject): Promise<readonly string[]>;
  /** Sets the customer's key unless it has one; answers the key it has afterwards. */
  createKey(subject: DataSubject, key: CustomerKey, now: Date): Promise<CustomerKey>;
  /** Records that a conversation is the customer's (the first claim stands); answers its owner. */
  claimConversation(conversationId: string, subject: DataSubject): Promise<DataSubject>;
  ownerOf(conversationId: string): Promise<DataSubject | undefined>;
  /**
   * Deletes the customer's key `keyId` (a key made since stays) and records the erasure; false
   * when the customer had no such key (erased already, or unknown).
   */
  eraseKey(subject: DataSubject, keyId: string, erasure: ErasureRecord): Promise<boolean>;
}

export function subjectKey(subject: DataSubject): string {
  return `${subject.tenant}#${subject.customer}`;
}

/** The customer keys in memory: the simulated runs and the tests. */
export class InMemoryCustomerKeys implements CustomerKeyStore {
  private readonly customers = new Map<string, CustomerRecord>();
  private readonly owners = new Map<string, DataSubject>();
  private readonly conversations = new Map<string, readonly string[]>();

  async customer(subject: DataSubject) {
    return this.customers.get(subjectKey(subject));
  }

  async conversationsOf(subject: DataSubject) {
    return this.conversations.get(subjectKey(subject)) ?? [];
  }

  async createKey(subject: DataSubject, key: CustomerKey) {
    const record = this.recordOf(subject);
    if (record.key) return record.key;
    this.customers.set(subjectKey(subject), { ...record, key });
    return key;
  }

  async claimConversation(conversationId: string, subject: DataSubject) {
    const owner = this.owners.get(conversationId) ?? subject;
    this.owners.set(conversationId, owner);
    const listed = this.conversations.get(subjectKey(owner)) ?? [];
    if (!listed.includes(conversationId))
      this.conversations.set(subjectKey(owner), [...listed, conversationId]);
    return owner;
  }

  async ownerOf(conversationId: string) {
    return this.owners.get(conversationId);
  }

  async eraseKey(subject: DataSubject, keyId: string, erasure: ErasureRecord) {
    const record = this.customers.get(subjectKey(subject));
    if (record?.key?.keyId !== keyId) return false;
    const { key: _erased, ...rest } = record;
    this.customers.set(subjectKey(subject), { ...rest, erased: erasure });
    return true;
  }

  private recordOf(subject: DataSubject): CustomerRecord {
    return this.customers.get(subjectKey(subject)) ?? { subject };
  }
}
