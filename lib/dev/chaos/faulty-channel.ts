import {
  LocalChannel,
  type LocalChannelFault,
} from "../../../functions/adapters/channel/local-channel";
import type {
  ChannelPort,
  ChannelQueryResult,
  ChannelSendRequest,
} from "../../../functions/core/side-effects";
import type { CallFault } from "../faults/kinds";
import { crash, currentInvocation, InvocationCrash } from "../local/runtime/faults";
import type { FaultDraws } from "./plan";

/** What each call fault is on the reply channel, in the LocalChannel's own fault kinds. */
const CHANNEL_FAULT: Readonly<
  Record<CallFault, Extract<LocalChannelFault["kind"], `timeout-${string}` | "unavailable">>
> = {
  throttle: "unavailable",
  "server-error": "unavailable",
  "timeout-after-apply": "timeout-after-apply",
  "connection-reset": "timeout-before-apply",
};

/**
 * The reply channel under the plan's call faults: locally it stands for the SNS Publish the
 * deployed sender makes, so it meets the same faults (armed through the LocalChannel's own fault
 * injection), and a dead invocation sends nothing. A send that applied may be the last thing a
 * process does before it dies.
 */
export class FaultyChannel implements ChannelPort {
  readonly name: string;

  private constructor(
    private readonly inner: LocalChannel,
    private readonly injector: FaultDraws,
  ) {
    this.name = inner.name;
  }

  /** The channel with faults, when it is the local stand-in (any other is left as it is). */
  static around(channel: ChannelPort, injector: FaultDraws): ChannelPort {
    return channel instanceof LocalChannel ? new FaultyChannel(channel, injector) : channel;
  }

  async send(request: ChannelSendRequest): Promise<{ deliveryId: string }> {
    const invocation = currentInvocation();
    if (invocation?.crashed) throw new InvocationCrash(`${invocation.function} is dead: not sent`);
    const fault = this.injector.callFault("channel", "Publish", invocation);
    if (fault) this.inner.inject({ kind: CHANNEL_FAULT[fault], key: request.key });
    const sent = await this.inner.send(request);
    if (invocation && this.injector.crashAfter("channel", "Publish", invocation))
      throw crash(invocation, "Publish");
    return sent;
  }

  query(key: string): Promise<ChannelQueryResult> {
    const invocation = currentInvocation();
    if (invocation?.crashed) throw new InvocationCrash(`${invocation.function} is dead: no query`);
    return this.inner.query(key);
  }
}
