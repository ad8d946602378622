/**
 * The kinds of event type definition: a fact or a command, appended to an aggregate's event
 * stream (sequenced: consumers gate it on the stream's order) or sent from outside any stream
 * (unsequenced: aggregate version 0, de-duplicated by event id). Each is spread into a definition
 * at schema version 1; a later version of a type overrides `schemaVersion`. `as const` keeps the
 * literals, which the payload types are read from.
 */

/** A fact an aggregate appends to its own stream. */
export const streamFact = {
  schemaVersion: 1,
  kind: "event",
  topic: "events",
  sequenced: true,
} as const;

/** A command an aggregate appends to its stream for the group that does the work. */
export const streamCommand = {
  schemaVersion: 1,
  kind: "command",
  topic: "commands",
  sequenced: true,
} as const;

/** A fact reported from outside any stream: by a client, the sweeper or a busy agent. */
export const outsideFact = {
  schemaVersion: 1,
  kind: "event",
  topic: "events",
  sequenced: false,
} as const;

/** A command sent from outside any stream: by an operator, a client or a scheduler. */
export const outsideCommand = {
  schemaVersion: 1,
  kind: "command",
  topic: "commands",
  sequenced: false,
} as const;

/**
 * An operator's action, put on the audit topic by the operator's tools (the CLI, the console, the
 * front door's erasure): who did what, when, to what. Kept by the audit group.
 */
export const operatorRecord = {
  schemaVersion: 1,
  kind: "event",
  topic: "audit",
  sequenced: false,
} as const;
