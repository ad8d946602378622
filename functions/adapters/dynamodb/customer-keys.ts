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
 *   the table alone opens nothing), the conversations it seals (`conversations`, a string set),
 *   and the last erasure (`erased_at`, `erased_by`, `erasure_reason`);
 * - `conversation#<conversation id>`: its owner (`tenant_id`, `customer_id`), claimed once with a
 *   conditional put.
 * Every read is strongly consistent: an erasure is seen by the next read.
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
      conversations: item.conversations?.SS ?? [],
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
    let owner = subject;
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
    } catch (error) {
      if (!isConditionFailure(error)) throw error;
      owner = (await this.ownerOf(conversationId)) ?? subject;
    }
    // Listed whether this claim or an earlier one made it: a claim cut short is completed here.
    await this.update(customerKey(owner), {
      UpdateExpression:
        "ADD conversations :conversation SET tenant_id = :tenant, customer_id = :customer",
      ExpressionAttributeValues: {
        ":conversation": { SS: [conversationId] },
        ...subjectValues(owner),
      },
    });
    return owner;
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

export function conversationKey(conversationId: string): string {
  return `conversation#${conversationId}`;
}

function subjectValues(subject: DataSubject): Item {
  return { ":tenant": { S: subject.tenant }, ":customer": { S: subject.customer } };
}

function isConditionFailure(error: unknown): boolean {
  return error instanceof Error && error.name === "ConditionalCheckFailedException";
}
