import { CreateArchiveCommand, type CreateArchiveCommandInput } from "@aws-sdk/client-eventbridge";
import type { Physical } from "../template";
import type { Deployer, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/**
 * `AWS::Events::Archive` as a CreateArchive request: every event of the bus that matches the
 * pattern is kept for `agentbus replay` (the emulator's replay is made to behave like AWS's in
 * lib/dev/local/moto_launcher.py).
 */
export function createArchiveRequest(
  { logicalId, props }: ResourceInput,
  placement: Placement,
): CreateArchiveCommandInput & { ArchiveName: string } {
  const pattern = props.EventPattern;
  const retention = props.RetentionDays;
  return {
    // Archive names are at most 48 characters.
    ArchiveName:
      (props.ArchiveName as string | undefined) ?? generatedName(placement, logicalId, 48),
    EventSourceArn: String(props.SourceArn),
    ...(props.Description ? { Description: String(props.Description) } : {}),
    ...(pattern === undefined
      ? {}
      : { EventPattern: typeof pattern === "string" ? pattern : JSON.stringify(pattern) }),
    ...(retention === undefined ? {} : { RetentionDays: Number(retention) }),
  };
}

/** Ref is the archive name; GetAtt has Arn and ArchiveName. */
export function archivePhysical(name: string, arn: string): Physical {
  return { ref: name, attributes: { Arn: arn, ArchiveName: name } };
}

export const deployArchive: Deployer = async (input, ctx) => {
  const request = createArchiveRequest(input, ctx);
  const created = await ctx.clients.eventbridge.send(new CreateArchiveCommand(request));
  const arn = created.ArchiveArn ?? arnOf(ctx, "events", `archive/${request.ArchiveName}`);
  return { physical: archivePhysical(request.ArchiveName, arn) };
};
