import { GetCallerIdentityCommand, STSClient } from "@aws-sdk/client-sts";
import { PrincipalArn } from "../../schemas/events/operator";
import type { ClientConfig } from "./stack";

/**
 * Who the operator's tools act as on AWS: the ARN STS `GetCallerIdentity` answers for the
 * credentials of a client configuration, the `principal` of every record the CLI and the console
 * put on the audit topic (./audit.ts). Asked once per process for each configuration (endpoint,
 * region, access key), not once per action, through the SDK's STS client; it goes to the
 * configuration's endpoint when it names one (the local stack's: moto answers it). When it cannot
 * be read (no credentials, STS out of reach), the records go without it, and the process is
 * warned once.
 */

const identities = new Map<string, Promise<string | undefined>>();

/** The ARN the credentials of `config` act as (asked once per process), undefined if unknown. */
export function callerPrincipal(config: ClientConfig): Promise<string | undefined> {
  const key = [config.endpoint ?? "", config.region, config.credentials?.accessKeyId ?? ""].join(
    "\u0000",
  );
  let known = identities.get(key);
  if (!known) {
    known = getCallerIdentity(config).catch((error: unknown) => {
      process.emitWarning(
        `audit records name no AWS principal: STS GetCallerIdentity failed (${error instanceof Error ? `${error.name}: ${error.message}` : String(error)})`,
      );
      return undefined;
    });
    identities.set(key, known);
  }
  return known;
}

/** One STS GetCallerIdentity call (see top): the caller's ARN. */
export async function getCallerIdentity(config: ClientConfig): Promise<string> {
  const sts = new STSClient(config);
  try {
    const { Arn } = await sts.send(new GetCallerIdentityCommand({}));
    return principalOf(Arn);
  } finally {
    sts.destroy();
  }
}

/** The ARN of a GetCallerIdentity answer; an error when it names none. */
export function principalOf(arn: string | undefined): string {
  const parsed = PrincipalArn.safeParse(arn);
  if (!parsed.success) throw new Error(`STS's answer names no ARN: ${String(arn).slice(0, 200)}`);
  return parsed.data;
}
