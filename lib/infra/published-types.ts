import { Annotations } from "aws-cdk-lib";
import type { Construct } from "constructs";
import { packJson } from "../../functions/core/packed-json";
import { UNPUBLISHED_TYPES_ENV } from "../../functions/core/relay";
import { DEFINITIONS, registry } from "../../schemas";
import type { AgentBusFunction } from "./constructs/function";
import type { Topology } from "./topology";

/**
 * Which stored events the relay puts on the buses. Each entry of a PutEvents call is billed
 * whether a rule matches it or not, so by default the relay publishes the types a rule of the
 * stack takes and leaves out the rest: they stay in the event store, its stream (what the stream
 * groups, the trace and a run's stream read) and `agentbus republish`. A team whose own rules on a
 * topic's bus take other types names them in `publish`, or publishes everything (`"all"`).
 */
export type Publish = "all" | readonly string[];

/** Context key of `publish` when the stack is given none: `all`, or a comma list of types. */
export const PUBLISH_CONTEXT_KEY = "agentbus:publish";

/**
 * The most bytes `UNPUBLISHED_TYPES` may take of the relay's 4 KB of environment (JSON, compressed
 * past 1 KB: functions/core/packed-json.ts); a stack with more publishes everything (with a
 * warning), as it did before types were left out.
 */
export const MAX_UNPUBLISHED_TYPES_BYTES = 1_024;

/** Warning id of a stack whose unpublished types are too many for the relay's environment. */
export const UNPUBLISHED_TYPES_WARNING = "agentbus:relay:unpublished-types";

/** `publish` as the context gives it (`all` or a comma list), undefined when it is not set. */
export function parsePublish(value: unknown): Publish | undefined {
  if (value === undefined || value === null) return undefined;
  if (Array.isArray(value)) return value.map(String);
  const text = String(value).trim();
  if (text === "all") return "all";
  return text
    .split(",")
    .map((type) => type.trim())
    .filter((type) => type.length > 0);
}

/**
 * The stored (sequenced) types of the stack that no bus rule of its groups takes and `publish`
 * does not name, sorted. A stream-delivered group reads the stream, not the bus; the relay sends a
 * relay-delivered group's stored events to its queue itself, and its rule leaves the relay's out;
 * the group that keeps messages (audit) takes only unsequenced ones, which the relay never publishes. Throws,
 * naming them, on types in `publish` that are not registered.
 */
export function unpublishedTypes(topology: Topology, publish: Publish = []): string[] {
  if (publish === "all") return [];
  const unknown = publish.filter((type) => !registry.has(type));
  if (unknown.length > 0)
    throw new Error(
      `publish names event types that are not registered: ${unknown.join(", ")} (give the registered types the relay must put on the buses for your own rules, or "all")`,
    );
  const taken = new Set<string>(publish);
  for (const group of topology.groups) {
    // The relay sends a "relay" group's stored events to its queue itself, bus or not.
    if (group.delivery === "stream" || group.delivery === "relay" || group.role.keepsMessages)
      continue;
    for (const subscription of group.subscriptions)
      for (const type of subscription.eventTypes) taken.add(type);
  }
  const stackTypes = topology.groups.flatMap((g) => [
    ...g.role.subscriptions,
    ...(g.role.emits ?? []),
  ]);
  const types = new Set<string>([...DEFINITIONS.map((d) => d.type), ...stackTypes]);
  return [...types]
    .filter((type) => registry.find(type)?.sequenced === true && !taken.has(type))
    .sort();
}

/**
 * Tell the relay which types it leaves unpublished (`UNPUBLISHED_TYPES`), given `publish` or else
 * the context's; a list too long for its environment gets a warning instead, and the relay
 * publishes every type.
 */
export function leaveUnpublished(
  relay: AgentBusFunction,
  topology: Topology,
  publish: Publish | undefined,
): readonly string[] {
  const given = publish ?? parsePublish(relay.node.tryGetContext(PUBLISH_CONTEXT_KEY));
  const types = unpublishedTypes(topology, given);
  if (types.length === 0) return [];
  const value = packJson(types);
  if (Buffer.byteLength(value) > MAX_UNPUBLISHED_TYPES_BYTES) {
    warn(
      relay,
      `the event types no rule of the stack takes are ${Buffer.byteLength(value)} bytes of JSON (compressed), more than the relay's environment holds for them (${MAX_UNPUBLISHED_TYPES_BYTES}): the relay publishes every type`,
    );
    return [];
  }
  relay.addEnvironment(UNPUBLISHED_TYPES_ENV, value);
  return types;
}

function warn(scope: Construct, message: string): void {
  Annotations.of(scope).addWarningV2(UNPUBLISHED_TYPES_WARNING, message);
}
