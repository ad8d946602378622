import { Random } from "../faults/random";
import type { Invocation } from "../local/runtime/faults";
import type { Service } from "./sdk-errors";

/**
 * A fault plan for one full-stack schedule, drawn from its seed: how often each fault strikes.
 * At the AWS boundary (SDK middleware on the functions' clients, and the reply channel that stands
 * for SNS): throttling and 5xx errors thrown before the request is sent, a timeout after the
 * request was applied, a connection reset before sending. In the runtime: an invocation whose
 * process dies right after a write was applied (after a commit before its ack, mid-batch, or the
 * relay after PutEvents before its stream checkpoint), a lost acknowledgement, and a model call
 * that outlasts its message's visibility timeout.
 */
export const CALL_FAULTS = [
  "throttle",
  "server-error",
  "timeout-after-apply",
  "connection-reset",
] as const;
export const RUNTIME_FAULTS = ["crash-after-write", "lost-ack", "stalled-model-call"] as const;
export const FAULT_KINDS = [...CALL_FAULTS, ...RUNTIME_FAULTS] as const;

export type CallFault = (typeof CALL_FAULTS)[number];
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultPlan {
  readonly seed: number;
  /**
   * Per fault, the chance it strikes: each AWS call (call faults), each applied write
   * (crash-after-write), each handled message (lost-ack), each model call (stalled-model-call).
   */
  readonly rates: Readonly<Record<FaultKind, number>>;
}

/** Off, light or heavy for each fault. */
const LEVELS: Readonly<Record<FaultKind, readonly number[]>> = {
  throttle: [0, 0.01, 0.04],
  "server-error": [0, 0.01, 0.04],
  "timeout-after-apply": [0, 0.01, 0.04],
  "connection-reset": [0, 0.01, 0.03],
  "crash-after-write": [0, 0.01, 0.03],
  "lost-ack": [0, 0.03, 0.1],
  "stalled-model-call": [0, 0.1, 0.3],
};

/** The plan of a seed: the same seed gives the same plan on any machine. */
export function planOf(seed: number): FaultPlan {
  const random = new Random(seed ^ 0x0c4a05);
  const rates = Object.fromEntries(
    FAULT_KINDS.map((kind) => [kind, random.pick(LEVELS[kind])]),
  ) as Record<FaultKind, number>;
  return { seed, rates };
}

/** A plan with every fault off (the baseline). */
export function quietPlan(seed: number): FaultPlan {
  return {
    seed,
    rates: Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>,
  };
}

/** One line: each fault that is on, with its rate. */
export function describePlan(plan: FaultPlan): string {
  const on = FAULT_KINDS.filter((k) => plan.rates[k] > 0).map((k) => `${k} ${plan.rates[k]}`);
  return `seed ${plan.seed}: ${on.join(", ") || "no faults"}`;
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
