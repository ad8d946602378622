import type {
  LocalChannel,
  LocalChannelFault,
} from "../../../functions/roles/customer-support/integrations/reply-channel/memory";
import type {
  ChannelPort,
  ChannelQueryResult,
  ChannelSendRequest,
} from "../../../functions/roles/customer-support/integrations/reply-channel/port";
import type { CallFault } from "./kinds";

/**
 * What each call fault is on the reply channel, in the LocalChannel's own fault kinds: refused
 * (unavailable, nothing sent), a timeout before it sent, or a timeout after it delivered (the
 * sender cannot know it did).
 */
const CHANNEL_FAULT: Readonly<
  Record<CallFault, Extract<LocalChannelFault["kind"], `timeout-${string}` | "unavailable">>
> = {
  throttle: "unavailable",
  "server-error": "unavailable",
  "timeout-after-apply": "timeout-after-apply",
  "connection-reset": "timeout-before-apply",
};

/**
 * Who decides each call's fate: the simulation's seeded draws, or the stack's fault injector
 * (which also refuses the calls of a process that died, and may kill one after a send).
 */
export interface ChannelFaults {
  /** The fault this send meets, if any; throws to refuse the send outright. */
  sendFault(request: ChannelSendRequest): CallFault | undefined;
  /** Once a send delivered; throws if the sender's process dies right after it. */
  delivered?(request: ChannelSendRequest): void;
  /** Before a query; throws to refuse it. */
  querying?(key: string): void;
}

/**
 * The reply channel under faults, as both chaos runs give it to the sender: the LocalChannel
 * (deliveries kept by key, as an idempotent channel keeps them) with each send's fault armed
 * through its own fault injection, so an injected failure is the error a real channel answers.
 */
export class FaultyChannel implements ChannelPort {
  readonly name: string;

  constructor(
    readonly inner: LocalChannel,
    private readonly faults: ChannelFaults,
  ) {
    this.name = inner.name;
  }

  async send(request: ChannelSendRequest): Promise<{ deliveryId: string }> {
    const fault = this.faults.sendFault(request);
    if (fault) this.inner.inject({ kind: CHANNEL_FAULT[fault], key: request.key });
    const sent = await this.inner.send(request);
    this.faults.delivered?.(request);
    return sent;
  }

  query(key: string): Promise<ChannelQueryResult> {
    this.faults.querying?.(key);
    return this.inner.query(key);
  }
}
