/**
 * Every fault the simulation (lib/dev/sim) and the full-stack runs (lib/dev/chaos) inject, under
 * the one name both plan, count and print it by, with what it models. The simulation plays each
 * on its in-memory stand-ins, the stack at its SDK clients' HTTP seam (or in their middleware),
 * the runtime and the reply channel.
 * The order is the order plans draw them in: it is part of what a seed means.
 */
export const FAULTS = {
  throttle:
    "the service refuses the call before it applies it: throttled (the reply channel: unavailable)",
  "server-error": "a 5xx answer, nothing applied (the reply channel: unavailable)",
  "timeout-after-apply": "the call applied, but its answer was lost: the caller sees a timeout",
  "connection-reset":
    "the connection is reset before the request goes out, nothing applied (the reply channel: a timeout before it sent)",
  "crash-after-write":
    "the process dies right after a write applied: a consumer after its commit, before its acknowledgement (the message comes back); the relay after publishing, before its checkpoint (it publishes the batch again)",
  "lost-ack": "a handled message's acknowledgement is lost: the message is delivered again",
  stall:
    "a consumer outlasts its message's visibility timeout (a slow model call): a second worker takes the message while the first has yet to commit",
  "clock-skew":
    "the service refuses a request as signed at the wrong time (the caller's clock is off by minutes): a 403 with the service's own Date, nothing applied; full-stack only, at the SDK clients' HTTP seam (an SDK client corrects its clock below its middleware)",
  erase:
    "not a fault of AWS: an operator erases a customer (agentbus erase) while their conversations go on, so what consumers read back of them is [erased]; simulated only",
} as const;

export type FaultKind = keyof typeof FAULTS;

export const FAULT_KINDS = Object.keys(FAULTS) as readonly FaultKind[];

/** The faults a call meets (to a service, or the reply channel): at most one per call. */
export const CALL_FAULTS = [
  "throttle",
  "server-error",
  "timeout-after-apply",
  "connection-reset",
] as const satisfies readonly FaultKind[];

export type CallFault = (typeof CALL_FAULTS)[number];

/**
 * The call fault a draw `u` in [0, 1) stands for, given each fault's chance in order: one draw
 * per call, so that a call meets one fault at most and each at its own chance.
 */
export function callFaultOf(
  u: number,
  chances: readonly (readonly [CallFault, number])[],
): CallFault | undefined {
  let left = u;
  for (const [fault, chance] of chances) {
    left -= chance;
    if (left < 0) return fault;
  }
  return undefined;
}
