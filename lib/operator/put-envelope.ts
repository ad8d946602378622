import { EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import type { ClientConfig } from "./stack";

/** The EventBridge `source` of what the operator tools put on a bus. */
export const CLI_SOURCE = "agentbus.cli";

/**
 * Put one (already validated) envelope on a bus, as an operator tool does: detail = the envelope,
 * detail-type = its event type. A refused entry throws with EventBridge's code and message.
 */
export async function putEnvelope(
  config: ClientConfig,
  bus: string,
  envelope: { readonly event_type: unknown },
  source = CLI_SOURCE,
): Promise<void> {
  const client = new EventBridgeClient(config);
  try {
    const result = await client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: bus,
            Source: source,
            DetailType: String(envelope.event_type),
            Detail: JSON.stringify(envelope),
          },
        ],
      }),
    );
    const failed = result.Entries?.find((e) => e.ErrorCode);
    if (result.FailedEntryCount || failed)
      throw new Error(
        `PutEvents to ${bus} refused ${String(envelope.event_type)}: ${failed?.ErrorCode ?? "?"} ${failed?.ErrorMessage ?? ""}`.trim(),
      );
  } finally {
    client.destroy();
  }
}
