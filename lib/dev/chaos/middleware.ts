import type { ChannelFaults } from "../faults/channel";
import { crash, currentInvocation, InvocationCrash } from "../local/runtime/faults";
import type { FaultDraws } from "./plan";
import { connectionReset, type Service, serverFault, throttled, timedOut } from "./sdk-errors";

type Next = (args: { input: unknown }) => Promise<{ output: unknown }>;
type FaultMiddleware = (next: Next, context: { commandName?: string }) => Next;

/** Any SDK v3 client: only its middleware stack is used. */
export interface FaultableClient {
  readonly middlewareStack: {
    add(
      // biome-ignore lint/suspicious/noExplicitAny: the SDK's overloaded `add` takes every step's middleware type
      middleware: any,
      options: { step: "initialize"; name: string; priority: "high"; override: boolean },
    ): void;
  };
}

export const FAULT_MIDDLEWARE = "agentbusChaos";

/**
 * Fault injection as SDK middleware, first in the `initialize` step: above the SDK's own retry
 * middleware, so what it throws is what the code sees once the SDK has given up (a client whose
 * retries are spent), and a "timeout after apply" lets the request (with its retries) go through
 * before it throws. Only calls made inside a function invocation are touched: the runtime's
 * polling, deleting and stream reading stand for Lambda's event source mappings, whose failures
 * the runtime's crash points model, and the chaos driver's own producing and checking are no
 * function's calls. A dead invocation's calls are refused before they go out.
 */
export function injectFaults(
  client: FaultableClient,
  service: Service,
  injector: FaultDraws,
): void {
  const middleware: FaultMiddleware = (next, context) => async (args) => {
    const invocation = currentInvocation();
    if (!invocation) return next(args);
    const operation = (context.commandName ?? "Unknown").replace(/Command$/, "");
    if (invocation.crashed)
      throw new InvocationCrash(`${invocation.function} is dead: ${operation} not sent`);
    const fault = injector.callFault(service, operation, invocation);
    if (fault === "throttle") throw throttled(service, operation, args.input);
    if (fault === "server-error") throw serverFault(service, operation);
    if (fault === "connection-reset") throw connectionReset(operation);
    const result = await next(args);
    if (fault === "timeout-after-apply") throw timedOut(operation);
    if (injector.crashAfter(service, operation, invocation)) throw crash(invocation, operation);
    return result;
  };
  client.middlewareStack.add(middleware, {
    step: "initialize",
    name: FAULT_MIDDLEWARE,
    priority: "high",
    override: true,
  });
}

/**
 * The same decisions for the reply channel (lib/dev/faults/channel.ts), which stands for the SNS
 * Publish the deployed sender makes: a dead invocation sends and asks nothing, a send meets the
 * plan's call faults, and a send that applied may be the last thing a process does before it dies.
 */
export function channelFaults(injector: FaultDraws): ChannelFaults {
  return {
    sendFault: () => {
      const invocation = currentInvocation();
      if (invocation?.crashed)
        throw new InvocationCrash(`${invocation.function} is dead: not sent`);
      return injector.callFault("channel", "Publish", invocation);
    },
    delivered: () => {
      const invocation = currentInvocation();
      if (invocation && injector.crashAfter("channel", "Publish", invocation))
        throw crash(invocation, "Publish");
    },
    querying: () => {
      const invocation = currentInvocation();
      if (invocation?.crashed)
        throw new InvocationCrash(`${invocation.function} is dead: no query`);
    },
  };
}
