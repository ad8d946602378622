import { Annotations } from "aws-cdk-lib";
import { EVENT_TOPICS_ENV } from "../../functions/core/relay";
import { DEFINITIONS, registry, type Topic } from "../../schemas";
import type { AgentBusFunction } from "./constructs/function";
import type { Topology } from "./topology";

/**
 * The relay places an event stored without a topic (by a producer older than topics on the
 * events table) by its type. The hub's types are in every function's registry; an application's
 * are registered by its role modules, which the relay does not load, so the stack gives the relay
 * the topic of each application type its roles take or emit (`EVENT_TOPICS`).
 */

/** The most bytes of JSON `EVENT_TOPICS` may take of the relay's 4 KB of environment. */
export const MAX_EVENT_TOPICS_BYTES = 2_048;

/** Warning id of a stack whose application types are too many for the relay's environment. */
export const EVENT_TOPICS_WARNING = "agentbus:relay:event-topics";

/** The topic of each event type the groups take or emit that is not the hub's, by topic. */
export function applicationTypeTopics(topology: Topology): Partial<Record<Topic, string[]>> {
  const hub = new Set<string>(DEFINITIONS.map((d) => d.type));
  const byTopic: Partial<Record<Topic, string[]>> = {};
  const types = topology.groups.flatMap((g) => [...g.role.subscriptions, ...(g.role.emits ?? [])]);
  for (const type of new Set<string>(types)) {
    const topic = hub.has(type) ? undefined : registry.find(type)?.topic;
    if (topic) byTopic[topic] = [...(byTopic[topic] ?? []), type];
  }
  return byTopic;
}

/**
 * Give the relay the topics of the stack's application types; a stack with too many for its
 * environment gets a warning instead (its old events of those types go to the failure queue).
 */
export function placeApplicationTypes(relay: AgentBusFunction, topology: Topology): void {
  const byTopic = applicationTypeTopics(topology);
  if (Object.keys(byTopic).length === 0) return;
  const value = JSON.stringify(byTopic);
  if (Buffer.byteLength(value) > MAX_EVENT_TOPICS_BYTES) {
    Annotations.of(relay).addWarningV2(
      EVENT_TOPICS_WARNING,
      `the application event types are ${Buffer.byteLength(value)} bytes of JSON, more than the relay's environment holds (${MAX_EVENT_TOPICS_BYTES}): an event of one stored without a topic goes to the relay's failure queue, for agentbus republish --failures --app`,
    );
    return;
  }
  relay.addEnvironment(EVENT_TOPICS_ENV, value);
}
