import type { ChannelPort } from "../../../functions/roles/customer-support/integrations/reply-channel/port";

/**
 * A defect planted in a side effect's path: every attempt of a reply's send (`new-key-per-retry`)
 * or of a refund (`refund-new-key-per-retry`, lib/dev/faults/payments.ts) goes out under a key of
 * its own.
 */
export type PlantedChannelBug = "new-key-per-retry" | "refund-new-key-per-retry";

/** The channel as a sender with the planted defect uses it: no two sends share a key. */
export function withNewKeyPerRetry(channel: ChannelPort): ChannelPort {
  let attempts = 0;
  return {
    name: channel.name,
    send: (request) => channel.send({ ...request, key: `${request.key}#${attempts++}` }),
    query: (key) => channel.query(key),
  };
}
