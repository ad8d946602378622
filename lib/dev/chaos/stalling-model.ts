import type { ModelPort, ModelRequest, ModelResponse } from "../../../functions/core/model";
import { currentInvocation, InvocationCrash } from "../local/runtime/faults";
import type { FaultDraws } from "./plan";

/**
 * The model port with one fault: a call that takes longer than its message's visibility timeout.
 * The message is made visible again at once (what the timeout passing does) and the call answers
 * only once another worker has received the message again, so two workers hold one message: the
 * version gate and the inbox must let only one of them apply it.
 */
export class StallingModel implements ModelPort {
  readonly name: string;

  constructor(
    private readonly inner: ModelPort,
    private readonly injector: FaultDraws,
  ) {
    this.name = inner.name;
  }

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const invocation = currentInvocation();
    if (invocation?.crashed)
      throw new InvocationCrash(`${invocation.function} is dead: no model call`);
    if (invocation?.release && this.injector.stalls(invocation)) {
      const again = this.injector.receivedAgain(invocation.messageIds);
      await invocation.release();
      await again;
    }
    return this.inner.converse(request);
  }
}
