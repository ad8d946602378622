import { SendMessageBatchCommand } from "@aws-sdk/client-sqs";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { replayedBody } from "../../functions/core/replay";
import type { Envelope } from "../../schemas";
import { outputId } from "../infra/output-ids";
import { replayName } from "../infra/replay-names";
import { operatorModules } from "./groups";
import { ReplayRefused, type ReplayWindow } from "./replay-plan";
import type { OpsStack } from "./stack";
import {
  keysInStreamWindow,
  STREAM_RETENTION_HOURS,
  type StreamEventKey,
  storedEventItems,
} from "./stream-reads";

/**
 * `agentbus replay` to a group that reads the events table's stream (`delivery: "stream"`), which
 * no bus feeds and so no archive replays: the window's stored events of the group's types, read
 * from the stream (what it keeps: 24 hours), are sent to the group's queue, each as a replayed
 * event (its `replay-name`, as an archive replay's), in stream order. The consumer de-duplicates
 * what it already applied (the version gate), as after any replay. Older windows: `agentbus
 * rebuild <group>` feeds it every stored event of its streams.
 */

/** One stream group's replay: its queue and the types it folds. */
export interface StreamReplayPlan {
  readonly group: string;
  readonly name: string;
  readonly queueUrl: string;
  readonly eventTypes: readonly string[];
}

/** The subscribed types of each group the operator's role modules deliver from the stream. */
export function streamGroupTypes(): Map<string, readonly string[]> {
  return new Map(
    operatorModules()
      .filter((m) => m.deployment.delivery === "stream")
      .map((m) => [m.descriptor.group, m.descriptor.subscriptions]),
  );
}

/** A replay per chosen stream group; refused when the window is older than the stream keeps. */
export function planStreamReplays(
  stage: string,
  outputs: Readonly<Record<string, string>>,
  groups: readonly string[],
  window: ReplayWindow,
  now: Date,
): StreamReplayPlan[] {
  const types = streamGroupTypes();
  const chosen = [...groups].filter((g) => types.has(g)).sort();
  if (chosen.length === 0) return [];
  const kept = new Date(now.getTime() - STREAM_RETENTION_HOURS * 3_600_000);
  if (window.from < kept)
    throw new ReplayRefused(
      `${chosen.join(", ")} read the events table's stream, which keeps ${STREAM_RETENTION_HOURS} hours: --from ${window.from.toISOString()} is before ${kept.toISOString()}; \`agentbus rebuild ${chosen[0]}\` feeds every stored event again`,
    );
  return chosen.map((group) => {
    const queueUrl = outputs[`${outputId(group)}QueueUrl`];
    if (!queueUrl)
      throw new ReplayRefused(
        `no queue of ${group} among the stack's outputs (${outputId(group)}QueueUrl): deploy the current version of the stack`,
      );
    const name = replayName({ stage, topic: "stream", ...window, groups: [group] });
    return { group, name, queueUrl, eventTypes: types.get(group) ?? [] };
  });
}

/** Send the window's events of the plan's types to its group's queue; how many were sent. */
export async function replayFromStream(
  stack: OpsStack,
  plan: StreamReplayPlan,
  window: ReplayWindow,
): Promise<number> {
  const keys = await keysInStreamWindow(stack, window.from, window.to);
  const wanted = new Set(plan.eventTypes);
  const events = (await storedEvents(stack, keys)).filter((e) => wanted.has(e.event_type));
  for (let i = 0; i < events.length; i += 10) {
    const entries = events.slice(i, i + 10).map((event, n) => ({
      Id: String(n),
      MessageBody: replayedBody(event, { name: plan.name, time: event.occurred_at }),
    }));
    const out = await stack.sqs.send(
      new SendMessageBatchCommand({ QueueUrl: plan.queueUrl, Entries: entries }),
    );
    if (out.Failed?.length)
      throw new Error(
        `replay ${plan.name}: ${out.Failed.length} of ${entries.length} events not sent to ${plan.group}'s queue (${out.Failed[0]?.Message ?? out.Failed[0]?.Code}); run it again, what was applied is recognized`,
      );
  }
  return events.length;
}

/** The stored events of the keys, in the keys' order. */
async function storedEvents(stack: OpsStack, keys: readonly StreamEventKey[]): Promise<Envelope[]> {
  const items = await storedEventItems(stack, keys);
  const byKey = new Map(items.map((item) => [`${item.pk}#${item.version}`, envelopeOfItem(item)]));
  return keys.flatMap((k) => byKey.get(`${k.pk}#${k.version}`) ?? []);
}
