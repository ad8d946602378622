import { PutRuleCommand, PutTargetsCommand } from "@aws-sdk/client-eventbridge";
import { CreateQueueCommand, GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import type { Deployer, LocalBridge, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/**
 * A classic rule whose target is one of EventBridge's new buses (Topic.subscriberBus's bridge):
 * the emulator cannot deliver to a bus it does not have, so the rule delivers to a queue of the
 * local runtime's instead, which forwards each event to its emulated bus.
 */

/** The new bus a rule forwards to, if one of its targets is one (`.../event-busv2/...`). */
export function bridgedBusOf({ resource, resolve }: ResourceInput): string | undefined {
  const targets = (resource.Properties?.Targets as { Arn: unknown }[] | undefined) ?? [];
  for (const target of targets) {
    const arn = resolve(target.Arn);
    if (typeof arn === "string" && arn.includes(":event-busv2/")) return arn;
  }
  return undefined;
}

export const deployBridge: Deployer = async (input, ctx) => {
  const busArn = bridgedBusOf(input) as string;
  const name = generatedName(ctx, input.logicalId, 64);
  const bus =
    String(input.props.EventBusName ?? "default")
      .split("/")
      .at(-1) ?? "default";
  const { QueueUrl } = await ctx.clients.sqs.send(
    new CreateQueueCommand({ QueueName: generatedName(ctx, input.logicalId, 80) }),
  );
  const queueUrl = QueueUrl as string;
  const { Attributes } = await ctx.clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  const created = await ctx.clients.eventbridge.send(
    new PutRuleCommand({
      Name: name,
      EventBusName: bus,
      EventPattern: JSON.stringify(input.props.EventPattern),
      State: "ENABLED",
    }),
  );
  await ctx.clients.eventbridge.send(
    new PutTargetsCommand({
      Rule: name,
      EventBusName: bus,
      Targets: [{ Id: "LocalBridge", Arn: Attributes?.QueueArn }],
    }),
  );
  const arn = created.RuleArn ?? arnOf(ctx, "events", `rule/${bus}/${name}`);
  const bridge: LocalBridge = { logicalId: input.logicalId, queueUrl, busArn };
  return {
    physical: { ref: name, attributes: { Arn: arn } },
    local: { kind: "bridge", value: bridge },
  };
};
