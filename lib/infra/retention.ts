import { Duration } from "aws-cdk-lib";
import { RetentionDays } from "aws-cdk-lib/aws-logs";
import type { IConstruct } from "constructs";
import {
  RETENTION,
  type RetentionPlaceName,
  retentionProblem,
  type SettablePlaceName,
} from "../../functions/core/retention";

/**
 * The retentions the stack deploys, read from the one declaration (functions/core/retention.ts):
 * its default, or what the deployer set with `-c agentbus:retention:<place>=<days>` for a place
 * the declaration lets them set. A construct asks here; no construct writes a retention of its own.
 */

/** The CDK context key that sets a place's retention, in days. */
export function retentionContextKey(place: RetentionPlaceName): string {
  return `agentbus:retention:${place}`;
}

/** The days `place` is kept in the app `scope` belongs to (the context's, else the default). */
export function retentionDaysAt(scope: IConstruct, place: SettablePlaceName): number {
  const key = retentionContextKey(place);
  const given: unknown = scope.node.tryGetContext(key);
  if (given === undefined) return RETENTION[place].days;
  // `-c key=7` arrives as a string, cdk.json's `"key": 7` as a number.
  const days =
    typeof given === "string" && /^\s*\d+(\.\d+)?\s*$/.test(given) ? Number(given) : given;
  const problem =
    typeof days === "number"
      ? retentionProblem(place, days)
      : `${JSON.stringify(given)} is not a number of days`;
  if (problem) throw new Error(`context ${key}: ${problem}`);
  return days as number;
}

/** `retentionDaysAt` as a Duration (queues, archives). */
export function retentionAt(scope: IConstruct, place: SettablePlaceName): Duration {
  return Duration.days(retentionDaysAt(scope, place));
}

/** The retentions CloudWatch Logs offers, in days. */
const LOG_RETENTIONS = new Set<number>(
  Object.values(RetentionDays).filter((d): d is number => typeof d === "number" && d > 0),
);

/** A log group's retention for `place`: its days, which must be one CloudWatch Logs offers. */
export function logRetentionAt(
  scope: IConstruct,
  place: "functionLogs" | "accessLog",
): RetentionDays {
  const days = retentionDaysAt(scope, place);
  if (!LOG_RETENTIONS.has(days))
    throw new Error(
      `context ${retentionContextKey(place)}: CloudWatch Logs keeps ${[...LOG_RETENTIONS].sort((a, b) => a - b).join(", ")} days, not ${days}`,
    );
  return days as RetentionDays;
}
