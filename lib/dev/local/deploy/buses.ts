import {
  CreateEventBusCommand,
  type CreateEventBusCommandInput,
} from "@aws-sdk/client-eventbridge";
import type { Physical } from "../template";
import type { Deployer, ResourceInput } from "./model";
import { arnOf } from "./naming";

/** `AWS::Events::EventBus` as a CreateEventBus request (custom buses are always named). */
export function createEventBusRequest({ props }: ResourceInput): CreateEventBusCommandInput & {
  Name: string;
} {
  return { Name: String(props.Name) };
}

/** Ref is the bus name; GetAtt has Arn and Name. */
export function eventBusPhysical(name: string, arn: string): Physical {
  return { ref: name, attributes: { Arn: arn, Name: name } };
}

export const deployEventBus: Deployer = async (input, ctx) => {
  const request = createEventBusRequest(input);
  const created = await ctx.clients.eventbridge.send(new CreateEventBusCommand(request));
  const arn = created.EventBusArn ?? arnOf(ctx, "events", `event-bus/${request.Name}`);
  return { physical: eventBusPhysical(request.Name, arn) };
};
