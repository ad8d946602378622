import type { Envelope, EventPayloads, EventType } from "../../schemas";
import type { EmitSpec } from "./emit";
import type { ErrorInfo } from "./errors";
import type { DiscardReason } from "./ports";
import type { DecideContext, Decision, Role, RoleDescriptor } from "./role";

/**
 * The authoring kit's typed face of the role contract (./role): a role written with `defineRole`
 * gets each event with its payload typed by the registry (`switch (event.event_type)` narrows
 * it), and may emit only registered types, each with its payload's type. What it returns is the
 * plain `Role` the pipeline runs; nothing changes at run time but one check: an emit of a type the
 * role did not declare in `emits` is a programming error and throws before anything commits.
 */

/** A delivered event of one of the types `T`, its payload typed (at its newest schema version). */
export type EventOf<T extends EventType> = {
  [K in T]: Omit<Envelope, "event_type" | "payload"> & {
    readonly event_type: K;
    readonly payload: EventPayloads[K];
  };
}[T];

/** An event or command to emit, of one of the types `T`, with its payload's type. */
export type EmitOf<T extends EventType> = {
  [K in T]: Omit<EmitSpec, "type" | "payload"> & {
    readonly type: K;
    readonly payload: EventPayloads[K];
  };
}[T];

/**
 * A role's descriptor with its subscriptions and emits typed: what a module declares and its
 * `defineRole` spreads, so that the topology and the built role see the same `stateOf` and emits.
 */
export type DescriptorOf<In extends EventType, Out extends EventType = never> = Omit<
  RoleDescriptor,
  "subscriptions" | "emits"
> & {
  readonly subscriptions: readonly In[];
  readonly emits?: readonly Out[];
};

/** A decision whose emits are of the types `Out`. */
export type TypedDecision<S, Out extends EventType> = Omit<Decision<S>, "emit"> & {
  readonly emit?: readonly EmitOf<Out>[];
};

type Awaitable<T> = T | Promise<T>;

/** A role as its author writes it: `Role`, with its events and emits typed. */
export interface RoleDefinition<S, In extends EventType, Out extends EventType>
  extends Omit<
    Role<S>,
    "subscriptions" | "decide" | "discard" | "unfinished" | "discarded" | "failed"
  > {
  /** The event types the role receives. */
  readonly subscriptions: readonly In[];
  /** The event types the role may emit; left out: none. */
  readonly emits?: readonly Out[];
  decide(
    state: S | undefined,
    event: EventOf<In>,
    context: DecideContext<S>,
  ): Awaitable<TypedDecision<S, Out>>;
  discard?(
    state: S | undefined,
    event: EventOf<In>,
    now: Date,
  ): Awaitable<DiscardReason | undefined>;
  unfinished?(state: S | undefined, event: EventOf<In>): Awaitable<boolean>;
  discarded?(
    state: S | undefined,
    event: EventOf<In>,
    reason: DiscardReason,
    context: DecideContext<S>,
  ): Awaitable<TypedDecision<S, Out> | undefined>;
  failed?(
    state: S | undefined,
    event: EventOf<In>,
    failure: ErrorInfo,
    context: DecideContext<S>,
  ): TypedDecision<S, Out> | undefined;
}

/** A role from its typed definition (see the module comment). */
export function defineRole<S, In extends EventType, Out extends EventType = never>(
  definition: RoleDefinition<S, In, Out>,
): Role<S> {
  const { emits = [], decide, discard, unfinished, discarded, failed, ...rest } = definition;
  const declared: ReadonlySet<string> = new Set(emits);
  const checked = <D extends TypedDecision<S, Out> | undefined>(decision: D): D => {
    for (const spec of decision?.emit ?? []) {
      if (!declared.has(spec.type)) {
        throw new Error(
          `role ${definition.group} emitted ${spec.type}, which is not among its emits (${[...declared].join(", ") || "none"})`,
        );
      }
    }
    return decision;
  };
  const typed = (event: Envelope) => event as EventOf<In>;
  return {
    ...rest,
    subscriptions: definition.subscriptions,
    ...(definition.emits && { emits: definition.emits }),
    // A role that decides synchronously still does (a fold run outside the pipeline reads it so).
    decide: (state, event, context) => {
      const decision = decide(state, typed(event), context);
      return decision instanceof Promise ? decision.then(checked) : checked(decision);
    },
    ...(discard && { discard: (state, event, now) => discard(state, typed(event), now) }),
    ...(unfinished && { unfinished: (state, event) => unfinished(state, typed(event)) }),
    ...(discarded && {
      discarded: async (state, event, reason, context) =>
        checked(await discarded(state, typed(event), reason, context)),
    }),
    ...(failed && {
      failed: (state, event, failure, context) =>
        checked(failed(state, typed(event), failure, context)),
    }),
  };
}
