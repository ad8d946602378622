import {
  PutRuleCommand,
  type PutRuleCommandInput,
  PutTargetsCommand,
  type PutTargetsCommandInput,
} from "@aws-sdk/client-eventbridge";
import { bridgedBusOf, deployBridge } from "./bridges";
import type { Deployer, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";
import { isScheduleRule, scheduleOf } from "./schedules";

/** Target properties passed on as they are (when given). */
const TARGET_OBJECTS = ["SqsParameters", "DeadLetterConfig", "RetryPolicy"] as const;
const TARGET_STRINGS = ["Input", "InputPath"] as const;

/** An event-pattern rule as PutRule and (if it has targets) PutTargets requests. */
export function ruleRequests(
  { logicalId, props }: ResourceInput,
  placement: Placement,
): { rule: PutRuleCommandInput & { Name: string }; targets?: PutTargetsCommandInput } {
  const name = (props.Name as string | undefined) ?? generatedName(placement, logicalId, 64);
  // A bus given by ARN is named by its last part.
  const bus =
    String(props.EventBusName ?? "default")
      .split("/")
      .at(-1) ?? "default";
  const rule = {
    Name: name,
    EventBusName: bus,
    EventPattern: JSON.stringify(props.EventPattern),
    State: (props.State as "ENABLED" | undefined) ?? "ENABLED",
  };
  const targets = (props.Targets as Record<string, unknown>[] | undefined) ?? [];
  if (targets.length === 0) return { rule };
  return {
    rule,
    targets: { Rule: name, EventBusName: bus, Targets: targets.map(ruleTarget) },
  };
}

type Target = NonNullable<PutTargetsCommandInput["Targets"]>[number];

function ruleTarget(t: Record<string, unknown>): Target {
  const target: Record<string, unknown> = { Id: String(t.Id), Arn: String(t.Arn) };
  for (const key of TARGET_OBJECTS) if (t[key]) target[key] = t[key];
  for (const key of TARGET_STRINGS) if (t[key]) target[key] = String(t[key]);
  return target as unknown as Target;
}

/**
 * `AWS::Events::Rule`: a pattern rule is created with its targets; a schedule rule only invokes
 * functions, so it is recorded for the runtime (the emulator cannot invoke Lambda); a rule that
 * forwards to a new bus delivers to a queue the runtime forwards from (`bridges.ts`).
 */
export const deployRule: Deployer = async (input, ctx) => {
  if (isScheduleRule(input)) {
    return {
      physical: {
        ref: input.logicalId,
        attributes: { Arn: arnOf(ctx, "events", `rule/${input.logicalId}`) },
      },
      local: { kind: "schedule", value: scheduleOf(input, ctx.template) },
    };
  }
  if (bridgedBusOf(input)) return deployBridge(input, ctx);
  const { rule, targets } = ruleRequests(input, ctx);
  const created = await ctx.clients.eventbridge.send(new PutRuleCommand(rule));
  if (targets) await ctx.clients.eventbridge.send(new PutTargetsCommand(targets));
  const arn = created.RuleArn ?? arnOf(ctx, "events", `rule/${rule.EventBusName}/${rule.Name}`);
  return { physical: { ref: rule.Name, attributes: { Arn: arn } } };
};
