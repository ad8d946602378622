import type { RoleIdentity } from "../core/role";
import { AUDIT_GROUP } from "./audit/audit";
import { ALL_FEATURES, FEATURES, type Feature } from "./features";

/**
 * The features (./features.ts) of a stack of `roles`: those whose starting event type one of them
 * takes. The audit group takes every event type and does the work of none. (Apart from
 * ./features.ts, which the front door's functions carry, so that their bundles hold no role.)
 */
export function featuresOf(
  roles: readonly Pick<RoleIdentity, "group" | "subscriptions">[],
): Feature[] {
  return ALL_FEATURES.filter((feature) => groupsDoing(feature, roles).length > 0);
}

/**
 * The groups of `roles` that do `feature`'s work: those that take its starting event type, not
 * the audit group (which takes every type). A new piece of that work enters their queues.
 */
export function groupsDoing(
  feature: Feature,
  roles: readonly Pick<RoleIdentity, "group" | "subscriptions">[],
): string[] {
  return roles
    .filter((role) => role.group !== AUDIT_GROUP)
    .filter((role) => role.subscriptions.includes(FEATURES[feature].takes))
    .map((role) => role.group);
}
