import type { CallFault, FaultKind } from "../faults/kinds";
import { Random } from "../faults/random";
import {
  drawPlan,
  type FaultSwitches,
  type FaultPlan as Plan,
  quietPlan as quiet,
} from "../faults/schedule";
import type { Invocation } from "../local/runtime/faults";
import type { Service } from "./sdk-errors";

/**
 * A fault plan for one full-stack schedule, drawn from its seed (the schedule format of
 * lib/dev/faults/schedule.ts): one switch per fault kind (lib/dev/faults/kinds.ts), each striking
 * wherever the stack can meet it. At the AWS boundary (SDK middleware on the functions' clients,
 * and the reply channel that stands for SNS), the call faults: throttling and 5xx errors thrown
 * before the request is sent, a timeout after the request was applied, a connection reset before
 * sending. In the runtime: an invocation whose process dies right after a write was applied
 * (after a commit before its ack, mid-batch, or the relay after PutEvents before its stream
 * checkpoint), a lost acknowledgement, and a model call that outlasts its message's visibility
 * timeout (a stall). Per fault, the chance it strikes: each AWS call (call faults), each applied
 * write (crash-after-write), each handled message (lost-ack), each model call (stall).
 */
export type FaultPlan = Plan<FaultKind>;

/** Each fault kind everywhere the stack meets it: off, light or heavy. */
const SWITCHES: FaultSwitches<FaultKind> = {
  throttle: { kinds: ["throttle"], levels: [0, 0.01, 0.04] },
  "server-error": { kinds: ["server-error"], levels: [0, 0.01, 0.04] },
  "timeout-after-apply": { kinds: ["timeout-after-apply"], levels: [0, 0.01, 0.04] },
  "connection-reset": { kinds: ["connection-reset"], levels: [0, 0.01, 0.03] },
  "crash-after-write": { kinds: ["crash-after-write"], levels: [0, 0.01, 0.03] },
  "lost-ack": { kinds: ["lost-ack"], levels: [0, 0.03, 0.1] },
  stall: { kinds: ["stall"], levels: [0, 0.1, 0.3] },
  "clock-skew": { kinds: ["clock-skew"], levels: [0, 0.01, 0.04] },
  // The simulated runs erase customers (lib/dev/sim); the stack runs leave it to the e2e tests.
  erase: { kinds: ["erase"], levels: [0] },
};

/** The plan of a seed: the same seed gives the same plan on any machine. */
export function planOf(seed: number): FaultPlan {
  return drawPlan(seed, SWITCHES, new Random(seed ^ 0x0c4a05));
}

/** A plan with every fault off (the baseline). */
export function quietPlan(seed: number): FaultPlan {
  return quiet(seed, SWITCHES);
}

/**
 * What a faulty part (the SDK middleware, the channel, the model) asks the schedule's injector
 * (./injector) about one call of one invocation.
 */
export interface FaultDraws {
  /** The fault this call meets, if any. */
  callFault(
    where: Service | "channel",
    operation: string,
    invocation: Invocation | undefined,
  ): CallFault | undefined;
  /** Whether this request is refused as signed at the wrong time (at the HTTP seam). */
  skewed(where: Service, operation: string, invocation: Invocation | undefined): boolean;
  /** Whether the process dies right after this applied call. */
  crashAfter(
    where: Service | "channel",
    operation: string,
    invocation: Invocation | undefined,
  ): boolean;
  /** Whether this model call outlasts its message's visibility timeout. */
  stalls(invocation: Invocation | undefined): boolean;
  /** Resolves once one of these messages was received again. */
  receivedAgain(messageIds: readonly string[]): Promise<void>;
}
