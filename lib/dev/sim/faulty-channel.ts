import type { LocalChannel } from "../../../functions/adapters/channel/local-channel";
import { TransientError } from "../../../functions/core/errors";
import {
  type ChannelPort,
  type ChannelQueryResult,
  type ChannelSendRequest,
  ChannelTimeoutError,
} from "../../../functions/core/side-effects";
import type { FaultKind } from "../faults/kinds";
import type { Random } from "../faults/random";

/** A defect planted in the send path: every attempt goes out under a key of its own. */
export type PlantedChannelBug = "new-key-per-retry";

/**
 * The reply channel behind faults as a real one produces them: unavailable before sending, a
 * timeout before the send applied, a timeout after it applied (delivered, but the sender cannot
 * know). Deliveries are the LocalChannel's, kept by key.
 */
export class FaultyChannel implements ChannelPort {
  readonly name = "sim-channel";
  private attempts = 0;

  constructor(
    readonly inner: LocalChannel,
    private readonly random: Random,
    private readonly rate: number,
    private readonly injected: (kind: FaultKind, where: "channel") => void,
    private readonly bug?: PlantedChannelBug,
  ) {}

  async send(request: ChannelSendRequest): Promise<{ deliveryId: string }> {
    const sent =
      this.bug === "new-key-per-retry"
        ? { ...request, key: `${request.key}#${this.attempts++}` }
        : request;
    const roll = this.random.next();
    if (roll < this.rate) {
      this.injected("throttle", "channel");
      throw new TransientError("channel.unavailable", "injected: the channel is unavailable");
    }
    if (roll < 2 * this.rate) {
      this.injected("connection-reset", "channel");
      throw new ChannelTimeoutError("injected: the send timed out before it applied");
    }
    const delivered = await this.inner.send(sent);
    if (roll < 3 * this.rate) {
      this.injected("timeout-after-apply", "channel");
      throw new ChannelTimeoutError("injected: the send applied, its answer was lost");
    }
    return delivered;
  }

  query(key: string): Promise<ChannelQueryResult> {
    return this.inner.query(key);
  }
}
