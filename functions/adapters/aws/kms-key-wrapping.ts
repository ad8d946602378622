import type { DataKeyContext, KeyWrapping } from "../../core/personal-data/key-wrapping";
import type { AwsClient } from "./client";
import { Decrypt, GenerateDataKey } from "./operations";

/** Bytes in an AES-256 data key. */
const DATA_KEY_BYTES = 32;

/**
 * The KMS encryption context a data key is bound to: KMS refuses to unwrap it under any other, and
 * CloudTrail records it with each call (ids only, never personal data). The stack's grants name
 * these keys (`kms:EncryptionContextKeys`).
 */
export const ENCRYPTION_CONTEXT_KEYS = ["tenant_id", "customer_id"] as const;

function encryptionContext(context: DataKeyContext): Record<string, string> {
  if (!context.tenant || !context.customer)
    throw new Error(
      `a data key needs a tenant and a customer, got ${JSON.stringify({ tenant: context.tenant, customer: context.customer })}`,
    );
  return { tenant_id: context.tenant, customer_id: context.customer };
}

/**
 * Data keys wrapped by the KMS key `keyArn` (`CUSTOMER_KEYS_KMS_KEY`): GenerateDataKey (AES_256)
 * makes one, Decrypt unwraps it; both with the customer's encryption context, and Decrypt names
 * the key, so a ciphertext of another key is refused rather than opened with it. A refusal is
 * KMS's error, as the client gives it (`InvalidCiphertextException` for another context).
 */
export function kmsKeyWrapping(aws: AwsClient, keyArn: string): KeyWrapping {
  if (!keyArn) throw new Error("kmsKeyWrapping needs the KMS key's ARN (CUSTOMER_KEYS_KMS_KEY)");
  return {
    async newKey(context) {
      const EncryptionContext = encryptionContext(context);
      const made = await aws.send(
        GenerateDataKey({ KeyId: keyArn, KeySpec: "AES_256", EncryptionContext }),
      );
      if (!made.CiphertextBlob)
        throw new Error(`KMS made a data key under ${keyArn} without its wrapped copy`);
      return { plain: dataKey(made.Plaintext, keyArn), wrapped: made.CiphertextBlob };
    },
    async unwrap(wrapped, context) {
      const EncryptionContext = encryptionContext(context);
      const opened = await aws.send(
        Decrypt({ KeyId: keyArn, CiphertextBlob: wrapped, EncryptionContext }),
      );
      return dataKey(opened.Plaintext, keyArn);
    },
  };
}

function dataKey(plain: Uint8Array | undefined, keyArn: string): Uint8Array {
  if (plain?.length !== DATA_KEY_BYTES)
    throw new Error(
      `KMS gave a data key of ${plain?.length ?? "no"} bytes under ${keyArn}, not ${DATA_KEY_BYTES}`,
    );
  return plain;
}
