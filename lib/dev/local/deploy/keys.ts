import {
  CreateKeyCommand,
  type CreateKeyCommandInput,
  EnableKeyRotationCommand,
} from "@aws-sdk/client-kms";
import type { Physical } from "../template";
import type { Deployer, ResourceInput } from "./model";

/**
 * `AWS::KMS::Key` as a CreateKey request: its description, spec and usage. The key policy is left
 * out: it names the account's root and IAM, which the emulator does not enforce.
 */
export function createKeyRequest({ props }: ResourceInput): CreateKeyCommandInput {
  const description = props.Description as string | undefined;
  const spec = props.KeySpec as CreateKeyCommandInput["KeySpec"] | undefined;
  const usage = props.KeyUsage as CreateKeyCommandInput["KeyUsage"] | undefined;
  return {
    ...(description === undefined ? {} : { Description: description }),
    ...(spec === undefined ? {} : { KeySpec: spec }),
    ...(usage === undefined ? {} : { KeyUsage: usage }),
  };
}

/** Ref is the key id; GetAtt has Arn and KeyId. */
export function keyPhysical(keyId: string, arn: string): Physical {
  return { ref: keyId, attributes: { Arn: arn, KeyId: keyId } };
}

export const deployKey: Deployer = async (input, ctx) => {
  const { kms } = ctx.clients;
  if (!kms) throw new Error(`key ${input.logicalId} needs a KMS client`);
  const created = await kms.send(new CreateKeyCommand(createKeyRequest(input)));
  const keyId = created.KeyMetadata?.KeyId;
  const arn = created.KeyMetadata?.Arn;
  if (!keyId || !arn) throw new Error(`key ${input.logicalId}: CreateKey answered without its id`);
  if (input.props.EnableKeyRotation === true)
    await kms.send(new EnableKeyRotationCommand({ KeyId: keyId }));
  return { physical: keyPhysical(keyId, arn) };
};
