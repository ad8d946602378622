import { a2aPushQueueNames } from "./constructs/a2a-push";
import { groupQueuePrefix, queueNames } from "./constructs/consumer-group-settings";
import type { Topology } from "./topology";

/**
 * The queue names two of a stack's queues would share, each with what names it. An SQS queue's
 * name is its identity in the account and region: two queues of one name are one queue, so a
 * group whose name makes another queue's (a group `a2a-push` and the A2A push queue, a standard
 * group `x-buffer` and FIFO group `x`'s buffer queue) would take its messages, or the deployment
 * would fail on a construct id CDK reports without saying why. Found before anything is built.
 */
export function queueNameClashes(stage: string, groups: Topology["groups"]): string[] {
  const owners = new Map<string, string[]>();
  const own = (name: string | undefined, owner: string) => {
    if (name !== undefined) owners.set(name, [...(owners.get(name) ?? []), owner]);
  };
  for (const group of groups) {
    const prefix = groupQueuePrefix(stage, group.name);
    const names = queueNames(prefix, group.ordering, group.delivery);
    own(names.queue, `group ${group.name}'s queue`);
    own(names.deadLetterQueue, `group ${group.name}'s dead-letter queue`);
    own(names.bufferQueue, `group ${group.name}'s buffer queue`);
    own(names.bufferDeadLetterQueue, `group ${group.name}'s buffer dead-letter queue`);
  }
  // The A2A push queues, whether or not this stack offers agents: the name stays the hub's.
  const push = a2aPushQueueNames(stage);
  own(push.queue, "the A2A push queue");
  own(push.deadLetterQueue, "the A2A push dead-letter queue");
  return [...owners]
    .filter(([, named]) => named.length > 1)
    .map(([name, named]) => `queue name ${JSON.stringify(name)} is ${named.join(" and ")}`);
}
