import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import type { DataKeyContext, KeyWrapping } from "./key-wrapping";

/**
 * Data keys wrapped by a local 256-bit key with AES-256-GCM, the customer bound as associated
 * data: what KMS does in AWS, for the in-memory runs and the tests. Wrapped: iv (12) | tag (16) |
 * key (32).
 */
export function localKeyWrapping(localKey: Uint8Array = randomBytes(32)): KeyWrapping {
  if (localKey.byteLength !== 32) throw new Error("the local key must be 32 bytes");
  const aad = (context: DataKeyContext) =>
    Buffer.from(`${context.tenant}\n${context.customer}`, "utf8");
  return {
    async newKey(context) {
      const plain = new Uint8Array(randomBytes(32));
      const iv = randomBytes(12);
      const cipher = createCipheriv("aes-256-gcm", localKey, iv).setAAD(aad(context));
      const body = Buffer.concat([cipher.update(plain), cipher.final()]);
      return { plain, wrapped: new Uint8Array(Buffer.concat([iv, cipher.getAuthTag(), body])) };
    },
    async unwrap(wrapped, context) {
      const bytes = Buffer.from(wrapped);
      const decipher = createDecipheriv("aes-256-gcm", localKey, bytes.subarray(0, 12))
        .setAAD(aad(context))
        .setAuthTag(bytes.subarray(12, 28));
      return new Uint8Array(Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]));
    },
  };
}
