import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type {
  CustomerKey,
  CustomerKeyStore,
  CustomerRecord,
  DataSubject,
  ErasureRecord,
} from "../../core/personal-data/customer-keys";
import type { AwsClient, AwsCommand } from "../aws/client";
import { GetItem, PutItem, UpdateItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { batchGetItems } from "./reads";

type Item = Record<string, AttributeValue>;

export interface DynamoCustomerKeysOptions {
  readonly client: AwsClient;
  /** The customer-keys table's name (`CUSTOMER_KEYS_TABLE`). */
  readonly tableName: string;
}

/**
 * The customer keys (functions/core/personal-data/customer-keys.ts) on their own table, `pk`
 * only, in no index:
 * - `customer#<tenant>#<customer>`: the current key (`key_id`, `wrapped_key`: wrapped by KMS, so
 *   the table alone opens nothing), the last erasure (`erased_at`, `erased_by`,
 *   `erasure_reason`), and the page new conversations are listed on (`conversation_page`, from 0);
 * - `conversations#<tenant>#<customer>#<page>`: the customer's conversations (`conversations`, a
 *   string set of at most CONVERSATIONS_PER_PAGE ids), so no item grows with the customer's
 *   history and listing one bills one write unit (an update bills the whole item);
 * - `conversation#<conversation id>`: its owner (`tenant_id`, `customer_id`), claimed once with a
 *   conditional put.
 * A conversation is listed once, by its first claim, before the claim is put: a claim found
 * already made is read, not written again, and a claim cut short after its listing is completed
 * by the next. A claim that lost a race leaves its conversation listed under the loser too: the
 * erasure erases only the conversations the customer owns (ownerOf).
 * Items written before the pages keep their list on the customer's item (`conversations`): it is
 * read with the pages. Every read is strongly consistent: an erasure is seen by the next read.
 */
export class DynamoCustomerKeys implements CustomerKeyStore {
  constructor(private readonly options: DynamoCustomerKeysOptions) {}

  async customer(subject: DataSubject): Promise<CustomerRecord | undefined> {
    const item = await this.get(customerKey(subject));
    if (!item) return undefined;
    const keyId = item.key_id?.S;
    const wrapped = item.wrapped_key?.B;
    const erasedAt = item.erased_at?.S;
    return {
      subject,
      ...(keyId && wrapped ? { key: { keyId, wrapped } } : {}),
      ...(erasedAt
        ? {
            erased: {
              at: erasedAt,
              by: item.erased_by?.S ?? "",
              ...(item.erasure_reason?.S ? { reason: item.erasure_reason.S } : {}),
            },
          }
        : {}),
    };
  }

  /**
   * The conversations on the customer's pages, 0 to its current one, and those an item written
   * before the pages lists on itself.
   */
  async conversationsOf(subject: DataSubject): Promise<readonly string[]> {
    const item = await this.get(customerKey(subject));
    const last = Number(item?.conversation_page?.N ?? 0);
    const keys = Array.from({ length: last + 1 }, (_, page) => pageKey(subject, page));
    const found = await batchGetItems(
      this.options.client,
      this.options.tableName,
      keys.map((pk) => ({ pk: { S: pk } })),
      { consistent: true },
    );
    const byPage = new Map(found.map((page) => [String(page.pk), page.conversations]));
    const pages = keys.flatMap((pk) => {
      const listed = byPage.get(pk);
      return listed instanceof Set ? [...listed].map(String) : [];
    });
    return [...new Set([...(item?.conversations?.SS ?? []), ...pages])];
  }

  async createKey(subject: DataSubject, key: CustomerKey, now: Date): Promise<CustomerKey> {
    try {
      await this.update(customerKey(subject), {
        UpdateExpression:
          "SET key_id = :id, wrapped_key = :wrapped, key_created_at = :now, tenant_id = :tenant, customer_id = :customer",
        ConditionExpression: "attribute_not_exists(key_id)",
        ExpressionAttributeValues: {
          ":id": { S: key.keyId },
          ":wrapped": { B: key.wrapped },
          ":now": { S: now.toISOString() },
          ...subjectValues(subject),
        },
      });
      return key;
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      const existing = (await this.customer(subject))?.key;
      if (!existing) throw new Error(`the key of ${subject.tenant}/${subject.customer} vanished`);
      return existing;
    }
  }

  async claimConversation(conversationId: string, subject: DataSubject): Promise<DataSubject> {
    const claimed = await this.ownerOf(conversationId);
    if (claimed) return claimed;
    await this.list(subject, conversationId);
    try {
      await this.send("PutItem", () =>
        PutItem({
          TableName: this.options.tableName,
          Item: {
            pk: { S: conversationKey(conversationId) },
            tenant_id: { S: subject.tenant },
            customer_id: { S: subject.customer },
          },
          ConditionExpression: "attribute_not_exists(pk)",
        }),
      );
      return subject;
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      return (await this.ownerOf(conversationId)) ?? subject;
    }
  }

  /** Lists the conversation on the customer's current page; a full page starts the next one. */
  private async list(subject: DataSubject, conversationId: string): Promise<void> {
    const item = await this.get(customerKey(subject));
    let page = Number(item?.conversation_page?.N ?? 0);
    for (;;) {
      try {
        await this.update(pageKey(subject, page), {
          UpdateExpression: "ADD conversations :listed",
          ConditionExpression:
            "attribute_not_exists(conversations) OR size(conversations) < :max OR contains(conversations, :id)",
          ExpressionAttributeValues: {
            ":listed": { SS: [conversationId] },
            ":id": { S: conversationId },
            ":max": { N: String(CONVERSATIONS_PER_PAGE) },
          },
        });
        return;
      } catch (error) {
        if (!isConditionFailure(error)) throw error;
      }
      page++;
      await this.turnPage(subject, page);
    }
  }

  /** Moves the customer's current page on to `page` (unless another claim moved it as far). */
  private async turnPage(subject: DataSubject, page: number): Promise<void> {
    try {
      await this.update(customerKey(subject), {
        UpdateExpression:
          "SET conversation_page = :page, tenant_id = :tenant, customer_id = :customer",
        ConditionExpression: "attribute_not_exists(conversation_page) OR conversation_page < :page",
        ExpressionAttributeValues: { ":page": { N: String(page) }, ...subjectValues(subject) },
      });
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
    }
  }

  async ownerOf(conversationId: string): Promise<DataSubject | undefined> {
    const item = await this.get(conversationKey(conversationId));
    const tenant = item?.tenant_id?.S;
    const customer = item?.customer_id?.S;
    return tenant && customer ? { tenant, customer } : undefined;
  }

  async eraseKey(subject: DataSubject, keyId: string, erasure: ErasureRecord): Promise<boolean> {
    try {
      await this.update(customerKey(subject), {
        UpdateExpression: `REMOVE key_id, wrapped_key, key_created_at SET erased_at = :at, erased_by = :by${erasure.reason ? ", erasure_reason = :reason" : " REMOVE erasure_reason"}`,
        ConditionExpression: "key_id = :id",
        ExpressionAttributeValues: {
          ":id": { S: keyId },
          ":at": { S: erasure.at },
          ":by": { S: erasure.by },
          ...(erasure.reason ? { ":reason": { S: erasure.reason } } : {}),
        },
      });
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw error;
    }
  }

  private async get(pk: string): Promise<Item | undefined> {
    const out = await this.send("GetItem", () =>
      GetItem({ TableName: this.options.tableName, Key: { pk: { S: pk } }, ConsistentRead: true }),
    );
    return out.Item;
  }

  private update(
    pk: string,
    expression: {
      UpdateExpression: string;
      ConditionExpression?: string;
      ExpressionAttributeValues: Item;
    },
  ) {
    return this.send("UpdateItem", () =>
      UpdateItem({ TableName: this.options.tableName, Key: { pk: { S: pk } }, ...expression }),
    );
  }

  private async send<I extends object, O extends object>(
    operation: string,
    command: () => AwsCommand<I, O>,
  ): Promise<O> {
    try {
      return await this.options.client.send(command());
    } catch (error) {
      if (isConditionFailure(error)) throw error;
      throw dynamoFailure(error, `${operation} on the customer-keys table`);
    }
  }
}

export function customerKey(subject: DataSubject): string {
  return `customer#${subject.tenant}#${subject.customer}`;
}

/** The most conversation ids one page item lists: 20 ids of 40 bytes stay within 1 KB. */
export const CONVERSATIONS_PER_PAGE = 20;

export function pageKey(subject: DataSubject, page: number): string {
  return `conversations#${subject.tenant}#${subject.customer}#${page}`;
}

export function conversationKey(conversationId: string): string {
  return `conversation#${conversationId}`;
}

function subjectValues(subject: DataSubject): Item {
  return { ":tenant": { S: subject.tenant }, ":customer": { S: subject.customer } };
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof Error && error.name === "ConditionalCheckFailedException";
}
