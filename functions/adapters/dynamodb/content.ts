import {
  type ContentOverwriter,
  type ContentStore,
  contentRef,
  contentTooLarge,
  MAX_CONTENT_BYTES,
  missingContent,
} from "../../core/agent/content";
import type { AwsClient } from "../aws/client";
import { PutItem } from "../aws/operations";
import { dynamoFailure } from "./failure";
import { type BatchGetOptions, batchGetByPk, MAX_BATCH_GET_KEYS } from "./reads";
import { StateAttr } from "./tables";

export { MAX_CONTENT_BYTES };

/** The state table's partition key of the content item of `ref`. */
export function contentKey(ref: string): string {
  return `content#${ref}`;
}

/** The attribute that holds a content item's text. */
export const CONTENT_TEXT_ATTRIBUTE = "text";

export interface DynamoContentStoreOptions {
  readonly client: AwsClient;
  /** The state table's name. */
  readonly tableName: string;
  /** How unprocessed keys of a read are retried (./reads). */
  readonly batchGet?: BatchGetOptions;
}

/**
 * The ContentStore on the state table: one item per text and scope, `pk` = `content#<ref>` (the
 * hex SHA-256 of the scope and the text: ../../core/agent/content.ts contentRef), the text in
 * `text`.
 *
 * Why the state table and not a table of its own: the functions that run agents already hold its
 * grants (no new table, grant or environment variable to deploy), and nothing else there notices
 * the items. Its indexes are sparse (by-due, by-kind-listed, by-waiting-since): an item without
 * their key attributes has no entry in them, so a content item is written to the table alone. Its
 * key cannot be an aggregate's either: a state item's key is `<type>#<id>` with an opaque id
 * (`<prefix>_<token>`), and a hex reference has no `_`. Content items have no `ttl`: they stay
 * for as long as the runs that refer to them (a text a crash left unreferenced stays too).
 *
 * What it costs: a put is one unconditional PutItem, ceil(item size / 1 KB) write units (the text
 * plus ~80 bytes of key and names) and no index write; storing a text that is there already
 * costs the same again (a conditional put would too: a failed condition is billed like a write),
 * and leaves the item as it was. A read is strongly consistent (a text written by one invocation
 * is read by the next at once, and a reference that is not found is a permanent error), so
 * ceil(item size / 4 KB) read units per text, in BatchGetItem calls of at most 100 references.
 *
 * A text over MAX_CONTENT_BYTES is refused (PermanentError `content.too_large`) before anything
 * is written: DynamoDB items are limited to 400 KB.
 */
export class DynamoContentStore implements ContentStore, ContentOverwriter {
  private readonly client: AwsClient;
  private readonly tableName: string;
  private readonly batchGet: BatchGetOptions;

  constructor(options: DynamoContentStoreOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
    this.batchGet = options.batchGet ?? {};
  }

  /** The text under `ref` replaced (an erasure: the reference no longer hashes what it holds). */
  async overwrite(ref: string, text: string): Promise<void> {
    try {
      await this.client.send(
        PutItem({
          TableName: this.tableName,
          Item: { [StateAttr.pk]: { S: contentKey(ref) }, [CONTENT_TEXT_ATTRIBUTE]: { S: text } },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "PutItem (content) on the state table");
    }
  }

  async put(text: string, scope?: string): Promise<string> {
    const tooLarge = contentTooLarge(text);
    if (tooLarge) throw tooLarge;
    const ref = contentRef(text, scope);
    try {
      await this.client.send(
        PutItem({
          TableName: this.tableName,
          Item: {
            [StateAttr.pk]: { S: contentKey(ref) },
            [CONTENT_TEXT_ATTRIBUTE]: { S: text },
          },
        }),
      );
    } catch (error) {
      throw dynamoFailure(error, "PutItem (content) on the state table");
    }
    return ref;
  }

  async getMany(refs: readonly string[]): Promise<string[]> {
    // BatchGetItem refuses a key listed twice in one call: each reference is read once.
    const unique = [...new Set(refs)];
    const texts = new Map<string, string>();
    for (let i = 0; i < unique.length; i += MAX_BATCH_GET_KEYS) {
      const keys = unique
        .slice(i, i + MAX_BATCH_GET_KEYS)
        .map((ref) => ({ table: this.tableName, pk: contentKey(ref) }));
      const found = await batchGetByPk(this.client, keys, true, this.batchGet);
      for (const item of found.get(this.tableName) ?? []) {
        const text = item[CONTENT_TEXT_ATTRIBUTE];
        if (typeof text === "string") texts.set(String(item[StateAttr.pk]), text);
      }
    }
    return refs.map((ref) => {
      const text = texts.get(contentKey(ref));
      if (text === undefined) throw missingContent(ref);
      return text;
    });
  }
}
