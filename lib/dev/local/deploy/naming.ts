import type { Placement } from "./model";

/** The name CloudFormation gives a resource without an explicit one: stack and logical id. */
export function generatedName(
  placement: Placement,
  logicalId: string,
  max: number,
  suffix = "",
): string {
  return `${placement.stackName}-${logicalId}`.slice(0, max - suffix.length) + suffix;
}

export function arnOf(placement: Placement, service: string, rest: string): string {
  return `arn:aws:${service}:${placement.region}:${placement.accountId}:${rest}`;
}
