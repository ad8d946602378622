import { type Envelope, tenantOf } from "../../../kit";
import type { SendResolution } from "../events/conversation";

/**
 * The sender's state (`delivery/<task_id>`) and what it records, shared by the sender
 * (./sender.ts) and its commands (./cancel, ./resolve).
 */

/** The state of `delivery/<task_id>`: the fact emitted per idempotency key. */
export interface DeliveryState {
  /**
   * The tenant of the event that made the state (a send, or a cancel before any send), the default
   * one included: a person's resolve and a turn's cancel are obeyed in that tenant only
   * (Role.tenantOfState). Absent on a state stored before the sender recorded it, whose tenant is
   * unknown: commands to it are not checked.
   */
  readonly tenant_id?: string;
  readonly keys: Readonly<Record<string, DeliveryFact>>;
  /** Set once the turn was cancelled: sends not made yet are discarded as `cancelled`. */
  readonly cancelled?: TurnCancel;
}

export interface DeliveryFact {
  /** `discarded`: discarded (expired, superseded, ...) after a claim, never received. */
  readonly outcome: "delivered" | "failed" | "escalated" | "discarded";
  readonly at: string;
  readonly delivery_id?: string;
  readonly code?: string;
  /** What was to be sent, kept while the outcome is unknown (for a resend a person asks for). */
  readonly send?: EscalatedSend;
  /** A person's resolution of an unknown outcome (./resolve), and who gave it. */
  readonly resolution?: SendResolution;
  readonly resolved_by?: string;
}

/** The state to record into: the stored one, or a new one in the tenant of `event`, which makes it. */
export function deliveryOf(state: DeliveryState | undefined, event: Envelope): DeliveryState {
  return state ?? { tenant_id: tenantOf(event), keys: {} };
}

/** The send of an escalated key, as the command asked for it. */
export interface EscalatedSend {
  readonly conversation_id: string;
  readonly customer_id: string;
  readonly channel: string;
  readonly text: string;
}

/** Who cancelled the turn, why and when. */
export interface TurnCancel {
  readonly at: string;
  readonly requested_by: string;
  readonly reason?: string;
}
