import type { HeartbeatTarget } from "../../functions/core/heartbeat-routes";
import { registry } from "../../schemas";
import type { ConsumerGroup } from "./constructs/consumer-group";
import { queueNameOf } from "./constructs/relay";

/**
 * Where the stack's heartbeats go (functions/core/heartbeat-routes.ts): straight to the queue of
 * each group whose events-topic pattern takes a heartbeat type and that can be sent to as its
 * rule would (a `delivery: "relay"` FIFO group, an unordered group); through the events bus for
 * any other group that takes one (a dispatch function, a pipe, a new bus's subscriber), so no
 * heartbeat is lost. A stream group never gets one: a heartbeat is stored nowhere.
 */
export interface HeartbeatRoutes {
  /** The groups heartbeats are sent to straight, each with its entry of `HEARTBEAT_TARGETS`. */
  readonly targets: readonly { readonly group: ConsumerGroup; readonly target: HeartbeatTarget }[];
  /** Some group fed by the bus takes a heartbeat type: heartbeats are published there too. */
  readonly viaBus: boolean;
}

/** The registered heartbeat types (EventTypeDefinition.heartbeat). */
export function heartbeatTypes(): ReadonlySet<string> {
  return new Set(
    registry
      .definitions()
      .filter((d) => d.heartbeat)
      .map((d) => d.type),
  );
}

/**
 * The routes of heartbeats of `types` among `groups`: a target's pattern keeps only the heartbeat
 * types it takes (its environment stays small; heartbeats are all it is matched against).
 */
export function heartbeatRoutesOf(
  groups: readonly ConsumerGroup[],
  types: ReadonlySet<string> = heartbeatTypes(),
): HeartbeatRoutes {
  const targets: { group: ConsumerGroup; target: HeartbeatTarget }[] = [];
  let viaBus = false;
  for (const group of groups) {
    const pattern = group.rulePatterns.events;
    const taken = (pattern?.["detail-type"] ?? []).filter((t) => types.has(t));
    if (!pattern || taken.length === 0) continue;
    const direct =
      group.ordering === "fifo" ? group.delivery === "relay" : group.delivery !== "subscriber";
    if (!direct) {
      viaBus = true;
      continue;
    }
    targets.push({
      group,
      target: {
        group: group.groupName,
        queue: queueNameOf(group.queue),
        ...(group.tenantConcurrency === undefined
          ? {}
          : { tenantConcurrency: group.tenantConcurrency }),
        rules: { events: { ...pattern, "detail-type": taken } },
        ...(group.ordering === "fifo" ? {} : { unordered: true as const }),
      },
    });
  }
  return { targets, viaBus };
}
