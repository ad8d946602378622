import type { Role } from "../../functions/core/role";
import { type EventRegistry, registry } from "../../schemas";
import type { OperatorGroup } from "./groups";

/**
 * Which consumer groups the operator's rebuild and check can run, decided from what each group
 * declares (the integrations its role module uses, its role's flags, and which of its event types
 * the event store holds), never from a list of names: a group whose decision calls an integration
 * that does not fold (functions/core/integration.ts: a write, or an answer that changes from call
 * to call) is not a fold of its streams, and is refused with what it does. One that only reads
 * what it records (the orders) is answered from that record (Role.foldWith).
 */

/** How the operator's tools may run one group: the role they fold with, or why not. */
export interface FoldVerdict {
  readonly group: string;
  /** The role to fold the group's streams with; absent when refused. */
  readonly role?: Role<unknown>;
  /** Why neither rebuild nor check can run the group. */
  readonly refused?: string;
  /** Why check (and so `rebuild --reset`) cannot: the state is not the fold alone. */
  readonly checkRefused?: string;
  /** Why `rebuild --reset` cannot rewrite the group's states from the fold. */
  readonly resetRefused?: string;
  /** Event types the group applies that no stream holds: the fold leaves them out. */
  readonly outsideStreams: readonly string[];
}

/** The verdict on one consumer group. */
export function foldVerdict(group: OperatorGroup, types: EventRegistry = registry): FoldVerdict {
  const { name, role } = group;
  const outsideStreams = role.subscriptions.filter(
    (type) => types.definitions().find((d) => d.type === type)?.sequenced !== true,
  );
  const calls = (group.integrations ?? [])
    .filter((integration) => integration.folds !== true)
    .map((integration) => `${integration.does} while deciding`);
  const notFold = `its state is not a fold of its streams`;
  if (role.keepsMessages)
    return {
      group: name,
      refused: `${name} keeps only the messages no stream holds (the event store is the record of stored events): there is no stream to rebuild it from`,
      outsideStreams,
    };
  if (calls.length > 0)
    return { group: name, refused: `${name} ${calls.join(" and ")}: ${notFold}`, outsideStreams };
  if (outsideStreams.length === role.subscriptions.length)
    return {
      group: name,
      refused: `${name} applies only messages that enter from outside any stream (${outsideStreams.join(", ")}): ${notFold}`,
      outsideStreams,
    };
  const full = role as Role<unknown>;
  const built = typeof full.decide === "function" ? full : undefined;
  if (!built && !role.foldWith)
    return {
      group: name,
      refused: `${name}'s decision needs ports its role cannot answer from what it recorded (no foldWith)`,
      outsideStreams,
    };
  return {
    group: name,
    role: built ?? (role as Role<unknown>),
    outsideStreams,
    ...refusalsOf(full, outsideStreams),
  };
}

/** What check and `--reset` cannot do for a group that rebuild can run. */
function refusalsOf(role: Role<unknown>, outsideStreams: readonly string[]) {
  const name = role.group;
  const checkRefused = role.unordered
    ? `${name} keeps one record per event, stamped when it arrived, not a fold of a stream: rebuild adds the records it lacks; check and --reset do not apply`
    : undefined;
  const resetRefused =
    checkRefused ??
    (outsideStreams.length > 0
      ? `${name} also applies ${outsideStreams.join(", ")}, which no stream holds: a state rewritten from the fold would lose them`
      : role.sharedStreams && role.sharedStreams.length > 0
        ? `${name} keeps its checkpoints of ${role.sharedStreams.join(", ")} streams in rows that several of its states share: --reset cannot rewrite one state's`
        : undefined);
  return {
    ...(checkRefused ? { checkRefused } : {}),
    ...(resetRefused ? { resetRefused } : {}),
  };
}
