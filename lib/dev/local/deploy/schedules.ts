import type { Template } from "../template";
import type { LocalSchedule, ResourceInput } from "./model";

/** Seconds of an EventBridge `rate(...)` expression; undefined for cron or anything else. */
export function rateSeconds(expression: string): number | undefined {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!match) return undefined;
  const unit = { minute: 60, hour: 3600, day: 86_400 }[
    match[2]?.replace(/s$/, "") as "minute" | "hour" | "day"
  ];
  return Number(match[1]) * unit;
}

/** A rule with a `ScheduleExpression`: the local runtime invokes its targets itself. */
export function isScheduleRule({ resource }: ResourceInput): boolean {
  return resource.Properties?.ScheduleExpression !== undefined;
}

/**
 * A schedule rule as the runtime runs it. Its targets must be functions of the stack
 * (`Fn::GetAtt <function> Arn`), read from the template as written.
 */
export function scheduleOf(input: ResourceInput, template: Template): LocalSchedule {
  const { logicalId, resource, props } = input;
  const expression = String(props.ScheduleExpression);
  const targets = (resource.Properties?.Targets as { Arn?: unknown }[] | undefined) ?? [];
  const functionLogicalIds = targets.map((t) => {
    const att = (t.Arn as { "Fn::GetAtt"?: unknown[] } | undefined)?.["Fn::GetAtt"];
    const id = Array.isArray(att) ? att[0] : undefined;
    if (typeof id !== "string" || template.Resources[id]?.Type !== "AWS::Lambda::Function")
      throw new Error(
        `schedule rule ${logicalId}: the local runtime runs only function targets of the stack (Fn::GetAtt <function> Arn)`,
      );
    return id;
  });
  return { logicalId, expression, rateSeconds: rateSeconds(expression), functionLogicalIds };
}
