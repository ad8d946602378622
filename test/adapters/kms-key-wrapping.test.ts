import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kmsKeyWrapping } from "../../functions/adapters/aws/kms-key-wrapping";
import { fromSdk } from "../../functions/adapters/aws/sdk-client";
import type { KeyWrapping } from "../../functions/core/personal-data/key-wrapping";
import { emulator } from "../support/aws";

/** Data keys made and unwrapped by KMS (moto), each bound to its customer's encryption context. */

let kms: KMSClient;
let wrapping: KeyWrapping;
let otherKey: KeyWrapping;
const customer = { tenant: "acme", customer: "c-42" };

beforeAll(async () => {
  kms = new KMSClient({ ...emulator(), maxAttempts: 1 });
  const aws = fromSdk(kms);
  const keyArn = async () => {
    const { KeyMetadata } = await kms.send(new CreateKeyCommand({ Description: "data keys" }));
    return KeyMetadata?.Arn ?? "";
  };
  wrapping = kmsKeyWrapping(aws, await keyArn());
  otherKey = kmsKeyWrapping(aws, await keyArn());
});
afterAll(() => kms?.destroy());

describe("kmsKeyWrapping", () => {
  it("makes a 256-bit data key and gives it back from its wrapped copy", async () => {
    const { plain, wrapped } = await wrapping.newKey(customer);
    expect(plain).toBeInstanceOf(Uint8Array);
    expect(plain).toHaveLength(32);
    expect(Buffer.from(wrapped).includes(Buffer.from(plain))).toBe(false);
    expect(await wrapping.unwrap(wrapped, customer)).toEqual(plain);
    const another = await wrapping.newKey(customer);
    expect(another.plain).not.toEqual(plain);
  });

  it("refuses to unwrap a key under another customer's or tenant's context", async () => {
    const { wrapped } = await wrapping.newKey(customer);
    await expect(wrapping.unwrap(wrapped, { ...customer, customer: "c-43" })).rejects.toMatchObject(
      { name: "InvalidCiphertextException" },
    );
    await expect(wrapping.unwrap(wrapped, { ...customer, tenant: "other" })).rejects.toMatchObject({
      name: "InvalidCiphertextException",
    });
  });

  it("refuses a key wrapped by another KMS key", async () => {
    const { wrapped } = await otherKey.newKey(customer);
    const refused = await wrapping.unwrap(wrapped, customer).catch((error: Error) => error);
    // KMS answers IncorrectKeyException; moto AccessDeniedException.
    expect(["IncorrectKeyException", "AccessDeniedException"]).toContain((refused as Error).name);
  });

  it("refuses a context without its tenant or customer, and a missing key ARN, before calling KMS", async () => {
    await expect(wrapping.newKey({ tenant: "acme", customer: "" })).rejects.toThrow(
      /needs a tenant and a customer/,
    );
    expect(() => kmsKeyWrapping(fromSdk(kms), "")).toThrow(/KMS key's ARN/);
  });
});
