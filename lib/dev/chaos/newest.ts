import { acceptedMessages } from "../faults/invariants";
import type { LocalEnvironment } from "../local/environment";
import { streamOf } from "../local/scenario/customer-support";
import type { Workload } from "./workload";

/**
 * The task id of the conversation's newest message: the one the conversation accepted last (the
 * highest version of its `conversation.message.accepted`), not the last one put on the bus (one
 * PutEvents call does not order its entries' delivery). Undefined until every message of the
 * workload has been accepted.
 */
export async function newestMessage(
  env: LocalEnvironment,
  workload: Workload,
): Promise<string | undefined> {
  const stream = await streamOf(env, { type: "conversation", id: workload.conversation.id });
  const accepted = acceptedMessages(stream);
  if (accepted.length < workload.conversation.messages.length) return undefined;
  return accepted.at(-1);
}
