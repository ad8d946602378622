import { Random } from "../faults/random";
import { drawPlan, type FaultPlan, type FaultSwitches } from "../faults/schedule";
import { A2A_FAULTS } from "./a2a-billing";
import { JUDGE_FAULTS } from "./headline-scoring";
import { MCP_FAULTS } from "./mcp-desk";

/** The reply channel's faults, in the order one draw per send picks them. */
export const CHANNEL_FAULTS = ["throttle", "connection-reset", "timeout-after-apply"] as const;
/** The payment stand-in's faults, in the order one draw per refund picks them. */
export const PAYMENT_FAULTS = ["throttle", "connection-reset", "timeout-after-apply"] as const;

/**
 * What a simulated schedule can turn on (fault kinds of lib/dev/faults/kinds.ts, by where they
 * strike, the store's calls being told apart), in the order its plan draws them.
 */
const SWITCHES = {
  /** Per load: throttled, nothing read. */
  "throttle load": { kinds: ["throttle"], levels: [0, 0.02, 0.1] },
  /** Per commit: throttled before it applied, nothing written. */
  "throttle commit": { kinds: ["throttle"], levels: [0, 0.02, 0.1] },
  /** Per commit: applied, its answer lost. */
  "timeout-after-apply commit": { kinds: ["timeout-after-apply"], levels: [0, 0.02, 0.1] },
  /** Per relayed batch: the relay dies after publishing it, so it publishes it again. */
  "crash-after-write relay": { kinds: ["crash-after-write"], levels: [0, 0.2, 0.5] },
  /** Per handled message: the consumer dies after its commit, before deleting the message. */
  "crash-after-write consumer": { kinds: ["crash-after-write"], levels: [0, 0.02, 0.1] },
  /** Per delivery: the consumer stalls before its commit until its message was received again. */
  stall: { kinds: ["stall"], levels: [0, 0.02, 0.1] },
  /** Per send: each of the reply channel's faults at this rate. */
  channel: { kinds: CHANNEL_FAULTS, levels: [0, 0.05, 0.15] },
  /** Per refund: each of the payment stand-in's faults at this rate. */
  payment: { kinds: PAYMENT_FAULTS, levels: [0, 0.05, 0.15] },
  /** Per step: an operator erases a customer (`agentbus erase`), mid-conversation or after. */
  erase: { kinds: ["erase"], levels: [0, 0.005, 0.02] },
  /** Per call of the headline judge: each of its faults at this rate (a transient failure). */
  judge: { kinds: JUDGE_FAULTS, levels: [0, 0.05, 0.15] },
  /** Per call of an MCP write tool: each of its faults at this rate (./mcp-desk.ts). */
  mcp: { kinds: MCP_FAULTS, levels: [0, 0.05, 0.15] },
  /** Per message to another system's A2A agent: each of its faults at this rate (./a2a-billing.ts). */
  a2a: { kinds: A2A_FAULTS, levels: [0, 0.05, 0.15] },
} as const satisfies FaultSwitches<string>;

export type SimSwitch = keyof typeof SWITCHES;
export type SimPlan = FaultPlan<SimSwitch>;

/**
 * The plan of a seed: each switch off, light or heavy, drawn from its own generator (`random`
 * only where a test wants another draw for the same seed).
 */
export function simulatedPlan(seed: number, random = new Random(seed ^ 0x5eed)): SimPlan {
  return drawPlan(seed, SWITCHES, random);
}
