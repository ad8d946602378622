import { OpaqueId } from "../ids";
import * as z from "../zod";

/** Fields that the payloads of several event types carry, each declared here once. */

/** A node id of a workflow definition (the DAG's identifier rule). */
export const NodeId = z.string().check(
  z.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {
    message: "must be 1-64 characters of A-Z a-z 0-9 _ . - starting with a letter or digit",
  }),
);
export const Generation = z.int().check(z.minimum(0));

/**
 * Which assignment of a node an event is about: the run, the node, and the generation the node
 * was assigned under. Spread first into a payload's fields: the exported schemas list them first.
 */
export const NodeRefShape = { run_id: OpaqueId, node_id: NodeId, generation: Generation };
export const NodeRef = z.object(NodeRefShape);
export type NodeRef = z.infer<typeof NodeRef>;

/** A map item's place in its list (0 for the first). */
export const ItemIndex = z.int().check(z.nonnegative());
/**
 * The map item an assignment is for (a map node runs its role once per item of a list): its
 * index, the list's length, and its value from the list.
 */
export const MapItemRef = z.object({
  index: ItemIndex,
  count: z.int().check(z.positive()),
  value: z.unknown(),
});
export type MapItemRef = z.infer<typeof MapItemRef>;

/**
 * Where an assignment inside a loop's body stands (from the loop's second round on): the loop's
 * last node (the loop's id), the round (2 for the first repeat), and the body's outputs of the
 * round before, by node id.
 */
export const LoopRef = z.object({
  exit: NodeId,
  round: z.int().check(z.positive()),
  previous: z.record(z.string(), z.unknown()),
});
export type LoopRef = z.infer<typeof LoopRef>;

/** How many times a node was assigned over all generations (1 on the first assignment). */
export const Attempt = z.int().check(z.minimum(1));

/**
 * Who asked for a command sent from outside: an operator's name as the CLI gives it
 * (AGENTBUS_OPERATOR or the OS user), or a client's name for itself.
 */
export const Requester = z.string().check(z.minLength(1), z.maxLength(128));
/** Why, in the operator's words. */
export const OperatorReason = z.string().check(z.maxLength(1000));
/** Who asked for a command and why, spread last into its payload's fields. */
export const RequestedByShape = { reason: z.optional(OperatorReason), requested_by: Requester };
