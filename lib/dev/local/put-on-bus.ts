import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import type { Envelope } from "../../../schemas";
import type { LocalEnvironment } from "./start";

/** Put envelopes on a topic's bus as a client would (`aws events put-events`). */
export async function putOnBus(
  env: Pick<LocalEnvironment, "buses" | "clients">,
  topic: string,
  envelopes: readonly Envelope[],
): Promise<void> {
  const bus = env.buses[topic];
  if (!bus) throw new Error(`the stack has no ${topic} bus`);
  const response = await env.clients.eventbridge.send(
    new PutEventsCommand({
      Entries: envelopes.map((e) => ({
        EventBusName: bus,
        Source: "agentbus.client",
        DetailType: e.event_type,
        Detail: JSON.stringify(e),
      })),
    }),
  );
  if (response.FailedEntryCount)
    throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
}
