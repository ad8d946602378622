/**
 * The state of a turn's reply (`reply/<task_id>`), shared by reply generation
 * (./reply-generation) and a person's review of a held reply (./review).
 */

export interface ReplyState {
  readonly task_id: string;
  readonly conversation_id: string;
  /**
   * The tenant of the request that made the reply, the default one included: a person's decision
   * is obeyed in that tenant only (Role.tenantOfState). Absent on a reply stored before replies
   * recorded it, whose tenant is unknown: decisions on it are not checked.
   */
  readonly tenant_id?: string;
  /** Where the reply goes (kept for a send after a person's approval). */
  readonly customer_id?: string;
  readonly channel?: string;
  readonly input_version?: number;
  readonly status: "sent_for_delivery" | "held_for_review" | "approved" | "rejected";
  readonly reply_text: string;
  readonly confidence?: number;
  readonly source_refs?: readonly string[];
  /** Why it was held, when it was. */
  readonly reason?: string;
  readonly model_attempts: number;
  readonly generated_at: string;
  /** A person's decision on the held reply (./review). */
  readonly review?: ReplyReview;
}

export interface ReplyReview {
  readonly decision: "approved" | "rejected";
  readonly requested_by: string;
  readonly reason?: string;
  readonly at: string;
  readonly edited?: boolean;
  readonly logical_attempt?: number;
}
