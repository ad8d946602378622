import type { EventStore, InboxRecord, TraceReader } from "../../functions/core/ports";
import { AUDIT_GROUP } from "../../functions/roles/audit/audit";
import { topology } from "../../lib/infra/project";
import { recordedOutcomes } from "../../lib/operator/recorded-outcomes";
import type { Envelope } from "../../schemas";

type OutcomeStore = Pick<EventStore, "load"> &
  Pick<TraceReader, "inboxRecords" | "groupCheckpoints" | "spilled">;

/**
 * A group's outcome of an event as a trace sees it: its inbox row, or else what the group's own
 * writes record (the stream's checkpoint on its state or in its row: lib/operator/recorded-outcomes);
 * undefined until the group has handled the event.
 */
export async function groupOutcome(
  store: OutcomeStore,
  group: string,
  event: Envelope,
): Promise<InboxRecord | undefined> {
  const [row] = await store.inboxRecords(group, [event.event_id]);
  if (row) return row;
  const role = topology.groups.find((g) => g.name === group)?.role;
  if (!role) throw new Error(`no group ${group} in the topology`);
  const states = {
    loadStates: async (refs: Parameters<EventStore["load"]>[0]["state"][]) =>
      (await Promise.all(refs.map((state) => store.load({ state })))).flatMap((l) =>
        l.state ? [l.state] : [],
      ),
  };
  const derive = recordedOutcomes([role], { states, checkpoints: store });
  const [recorded] = (await derive?.([event.event_id], [event])) ?? [];
  return recorded as InboxRecord | undefined;
}

/**
 * A group's outcome of an unsequenced message known by its id alone: the message as the audit
 * group keeps it whole (Role.keepsMessages), then its outcome as a trace sees it.
 */
export async function messageOutcome(
  store: OutcomeStore,
  group: string,
  eventId: string,
): Promise<InboxRecord | undefined> {
  const [kept] = await store.inboxRecords(AUDIT_GROUP, [eventId]);
  if (!kept?.envelope) throw new Error(`the audit group keeps no message ${eventId}`);
  return groupOutcome(store, group, kept.envelope);
}
