import type { FailureRecord, OutcomeRecord, TraceReader } from "../../functions/core/ports";
import { DAG_RUN_AGGREGATE } from "../../functions/core/sweeper";
import { traceIdOf } from "../../functions/core/trace-context";
import { type Envelope, registry } from "../../schemas";
import { ULID_PATTERN } from "../../schemas/ids";
import type { RecordedOutcomes } from "./recorded-outcomes";
import type { GroupOutcome, SideEffectView, TraceEvent, TraceNode, TraceView } from "./views";

/** What building a trace reads. */
export interface TraceSources {
  readonly reader: TraceReader;
  /** The consumer groups of the stack (an event id is looked up in each group's records). */
  readonly groups: readonly string[];
  /** Side-effect records by key (unknown keys left out). */
  readonly sideEffects: (keys: readonly string[]) => Promise<SideEffectView[]>;
  /** Events of one stream (to find what a shared aggregate's newer message superseded). */
  readonly stream?: (aggregate: { type: string; id: string }) => Promise<Envelope[]>;
  /**
   * The outcomes recorded by the groups' own writes instead of inbox rows (stream checkpoints,
   * audit records: ./recorded-outcomes) of these event ids and stored events; unknown ones left
   * out.
   */
  readonly recorded?: RecordedOutcomes;
}

/**
 * The causal trace of an event, task, correlation or conversation id: stored stream events and every group's
 * recorded outcomes (which also place the unsequenced messages no stream holds), as a tree of
 * causation edges, each event with its groups' outcomes, side-effect records and dead letters.
 * Undefined when nothing is recorded under the id.
 */
export async function buildTrace(
  sources: TraceSources,
  id: string,
): Promise<TraceView | undefined> {
  const found = await collect(sources, id);
  if (!found) return undefined;
  const { events, outcomes } = found;
  const keys = new Map<string, string[]>();
  for (const e of events.values())
    keys.set(e.eventId, sideEffectKeysOf(found.envelopes.get(e.eventId)));
  const effects = await sources.sideEffects([...new Set([...keys.values()].flat())]);
  const effectByKey = new Map(effects.map((s) => [s.key, s]));
  const node = (e: TraceEvent, children: TraceNode[]): TraceNode => {
    const own = outcomes.filter((o) => o.eventId === e.eventId);
    return {
      event: e,
      outcomes: groupOutcomes(own),
      sideEffects: (keys.get(e.eventId) ?? []).flatMap((k) => effectByKey.get(k) ?? []),
      deadLetters: own
        .filter((o) => o.outcome === "dead-lettered")
        .map((o) => ({ group: o.group, queue: "queue" })),
      children,
    };
  };
  return {
    query: id,
    correlationIds: [...new Set([...events.values()].map((e) => e.correlationId))].sort(),
    taskIds: [...new Set([...events.values()].map((e) => e.taskId))].sort(),
    ...lineageOf([...found.envelopes.values()]),
    roots: tree([...events.values()], node),
    ...(await relatedOf(sources, found)),
  };
}

interface Found {
  readonly events: Map<string, TraceEvent>;
  readonly envelopes: Map<string, Envelope>;
  readonly outcomes: OutcomeRecord[];
}

/** The events and outcomes under the id: an event id's correlation, a task, or a correlation. */
async function collect(sources: TraceSources, id: string): Promise<Found | undefined> {
  const { reader } = sources;
  let stored: Envelope[];
  let outcomes: OutcomeRecord[];
  if (ULID_PATTERN.test(id)) {
    const correlation = await correlationOfId(sources, id);
    if (!correlation) return undefined;
    [stored, outcomes] = await Promise.all([
      reader.eventsByCorrelation(correlation),
      reader.outcomesByCorrelation(correlation),
    ]);
  } else if (id.startsWith("task_")) {
    [stored, outcomes] = await Promise.all([reader.eventsByTask(id), reader.outcomesByTask(id)]);
  } else if ((id.startsWith("conv_") || id.startsWith("run_")) && sources.stream) {
    // A conversation or a workflow run: the traces of its newest messages (their correlations,
    // from its stream; a child run's are its parent's).
    const type = id.startsWith("run_") ? DAG_RUN_AGGREGATE : "conversation";
    const stream = await sources.stream({ type, id });
    const correlations = [...new Set(stream.map((e) => e.correlation_id))].slice(0, 10);
    const parts = await Promise.all(
      correlations.map((c) =>
        Promise.all([reader.eventsByCorrelation(c), reader.outcomesByCorrelation(c)]),
      ),
    );
    stored = parts.flatMap(([events]) => events);
    outcomes = parts.flatMap(([, records]) => records);
  } else {
    [stored, outcomes] = await Promise.all([
      reader.eventsByCorrelation(id),
      reader.outcomesByCorrelation(id),
    ]);
  }
  if (stored.length === 0 && outcomes.length === 0) return undefined;
  stored = withKeptMessages(stored, outcomes);
  if (sources.recorded) {
    const ids = [...new Set([...stored.map((e) => e.event_id), ...outcomes.map((o) => o.eventId)])];
    // A row, when there is one (a repair, a discard), says more than the state: it wins.
    const rows = new Set(
      outcomes.filter((o) => !isFailure(o)).map((o) => `${o.group} ${o.eventId}`),
    );
    const derived = await sources.recorded(ids, stored);
    outcomes = [...outcomes, ...derived.filter((o) => !rows.has(`${o.group} ${o.eventId}`))];
  }
  const events = new Map<string, TraceEvent>();
  const envelopes = new Map<string, Envelope>();
  for (const written of stored) {
    // Read like every other path reads them: at the type's newest schema version.
    const e = registry.upcast(written);
    events.set(e.event_id, {
      ...eventOfEnvelope(e),
      ...(e === written ? {} : { storedSchemaVersion: written.schema_version }),
    });
    envelopes.set(e.event_id, e);
  }
  for (const o of outcomes) if (!events.has(o.eventId)) events.set(o.eventId, eventOfRecord(o));
  return { events, envelopes, outcomes };
}

/**
 * The correlation of an event id: a stored event's, from the event store (its trace-by-digest
 * index, from the correlation digest the id carries; its by-event-id index for an older id);
 * else a message's that stored no event, from the groups' records of it (inbox rows, failure
 * records); else from an audit record (the audit group recorded every stored event before it kept
 * only the messages no stream holds).
 */
async function correlationOfId(sources: TraceSources, id: string): Promise<string | undefined> {
  const stored = await sources.reader.correlationOfEvent(id);
  if (stored) return stored;
  const ofEvent = await sources.reader.outcomesOfEvent(sources.groups, id);
  if (ofEvent[0]) return ofEvent[0].correlationId;
  return (await sources.recorded?.([id], []))?.[0]?.correlationId;
}

/**
 * The stored events and the unsequenced messages the group that keeps messages has kept whole
 * (Role.keepsMessages: its rows carry their envelopes), each once, in event id order.
 */
function withKeptMessages(stored: Envelope[], outcomes: readonly OutcomeRecord[]): Envelope[] {
  const ids = new Set(stored.map((e) => e.event_id));
  const kept: Envelope[] = [];
  for (const o of outcomes) {
    const envelope = isFailure(o) ? undefined : o.envelope;
    if (!envelope || ids.has(envelope.event_id)) continue;
    ids.add(envelope.event_id);
    kept.push(envelope);
  }
  if (kept.length === 0) return stored;
  return [...stored, ...kept].sort((a, b) => a.event_id.localeCompare(b.event_id));
}

function eventOfEnvelope(e: Envelope): TraceEvent {
  return {
    eventId: e.event_id,
    eventType: e.event_type,
    aggregate: { type: e.aggregate.type, id: e.aggregate.id },
    version: e.aggregate.version,
    producer: e.producer,
    occurredAt: e.occurred_at,
    correlationId: e.correlation_id,
    taskId: e.task_id,
    ...(e.causation_id ? { causationId: e.causation_id } : {}),
    ...(e.tenant_id ? { tenantId: e.tenant_id } : {}),
    ...(e.run_id ? { runId: e.run_id } : {}),
    ...(e.resumed_from ? { resumedFrom: e.resumed_from } : {}),
    ...agentStepOf(e),
  };
}

/**
 * The trace ids the events continue, and the workflow runs they belong to with their lineage: a
 * child run's events name its parent (`parent_run_id`), so a parent's children are the runs whose
 * events name it.
 */
function lineageOf(envelopes: readonly Envelope[]): Pick<TraceView, "traceIds" | "runs"> {
  const traceIds = [...new Set(envelopes.map(traceIdOf))].sort();
  const parents = new Map<string, string | undefined>();
  const runOf = (e: Envelope): string | undefined =>
    e.aggregate.type === DAG_RUN_AGGREGATE ? e.aggregate.id : undefined;
  for (const e of envelopes) {
    const run = runOf(e);
    if (run && !parents.get(run)) parents.set(run, e.parent_run_id);
    if (e.parent_run_id && !parents.has(e.parent_run_id)) parents.set(e.parent_run_id, undefined);
  }
  const runs = [...parents.keys()].sort().map((runId) => {
    const parentRunId = parents.get(runId);
    const childRunIds = [...parents.entries()].filter(([, p]) => p === runId).map(([c]) => c);
    return { runId, ...(parentRunId ? { parentRunId } : {}), childRunIds: childRunIds.sort() };
  });
  return { traceIds, ...(runs.length > 0 ? { runs } : {}) };
}

/** What the step before an agent's step command did, in a line (TraceEvent.agentStep). */
function agentStepOf(e: Envelope): { agentStep?: string } {
  if (e.aggregate.type !== "agent_run" || !e.event_type.endsWith(".step.requested")) return {};
  const done = (e.payload as { done?: Record<string, unknown> }).done ?? {};
  const asked =
    Array.isArray(done.asked) && done.asked.length > 0 ? ` asked ${done.asked.join(", ")}` : "";
  const text =
    done.kind === "model"
      ? `model turn ${String(done.model_run_id)}${asked || " answered"}`
      : done.kind === "tool" || done.kind === "person"
        ? `${done.kind === "person" ? "person on" : "tool call"} ${String(done.tool_call_id)} ${String(done.tool)}: ${String(done.outcome)}${done.key ? ` (key ${String(done.key)})` : ""}`
        : "run started";
  return { agentStep: text };
}

function eventOfRecord(o: OutcomeRecord): TraceEvent {
  return {
    eventId: o.eventId,
    eventType: o.eventType,
    aggregate: o.aggregate,
    version: o.version,
    producer: o.producer,
    occurredAt: o.occurredAt,
    correlationId: o.correlationId,
    taskId: o.taskId,
    ...(o.causationId ? { causationId: o.causationId } : {}),
  };
}

const isFailure = (o: OutcomeRecord): o is FailureRecord =>
  o.outcome === "retrying" || o.outcome === "dead-lettered";

/**
 * One outcome per group: the inbox row when there is one (with the failures before it, if any),
 * else the failure record (retrying or dead-lettered).
 */
export function groupOutcomes(records: readonly OutcomeRecord[]): GroupOutcome[] {
  const byGroup = new Map<string, OutcomeRecord[]>();
  for (const r of records) byGroup.set(r.group, [...(byGroup.get(r.group) ?? []), r]);
  return [...byGroup.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([group, rows]) => {
      const failure = rows.find(isFailure);
      const done = rows.find((r) => !isFailure(r));
      const row = done ?? failure;
      if (!row) throw new Error("no outcome");
      return {
        group,
        outcome: row.outcome,
        ...(!isFailure(row) && row.reason ? { reason: row.reason } : {}),
        ...(!isFailure(row) && row.repaired ? { repaired: true } : {}),
        ...(failure ? { error: failure.error, attempts: failure.attempts } : {}),
        ...(failure && row === failure && failure.outcome === "dead-lettered"
          ? { reason: failure.error.code }
          : {}),
        at: row.recordedAt,
      };
    });
}

/** Events as a forest of causation edges, children in event id (time) order. */
function tree(
  events: TraceEvent[],
  node: (e: TraceEvent, children: TraceNode[]) => TraceNode,
): TraceNode[] {
  const ids = new Set(events.map((e) => e.eventId));
  const children = new Map<string, TraceEvent[]>();
  const roots: TraceEvent[] = [];
  for (const e of [...events].sort((a, b) => a.eventId.localeCompare(b.eventId))) {
    if (e.causationId && ids.has(e.causationId) && e.causationId !== e.eventId)
      children.set(e.causationId, [...(children.get(e.causationId) ?? []), e]);
    else roots.push(e);
  }
  const build = (e: TraceEvent, depth: number): TraceNode =>
    node(e, depth > 200 ? [] : (children.get(e.eventId) ?? []).map((c) => build(c, depth + 1)));
  return roots.map((r) => build(r, 0));
}

/** The side-effect keys an event names: a delivery's key, or a send request's reply key. */
function sideEffectKeysOf(envelope: Envelope | undefined): string[] {
  const payload = envelope?.payload as Record<string, unknown> | undefined;
  if (!envelope || !payload) return [];
  if (typeof payload.idempotency_key === "string") return [payload.idempotency_key];
  if (typeof payload.logical_attempt === "number" && typeof payload.channel === "string")
    return [`${envelope.task_id}:reply:${payload.logical_attempt}`];
  return [];
}

/**
 * What this trace's messages superseded or invalidated elsewhere: events of other correlations on
 * the streams this trace wrote to, which a group discarded as superseded or invalidated after the
 * trace began (a newer customer message makes the older reply moot).
 */
async function relatedOf(sources: TraceSources, found: Found): Promise<{ related?: TraceNode[] }> {
  if (!sources.stream) return {};
  const own = new Set([...found.events.values()].map((e) => e.correlationId));
  const start = [...found.events.values()].map((e) => e.occurredAt).sort()[0] ?? "";
  const streams = new Map<string, { type: string; id: string }>();
  for (const e of found.envelopes.values())
    if (e.aggregate.version > 0) streams.set(`${e.aggregate.type}#${e.aggregate.id}`, e.aggregate);
  const others = new Set<string>();
  for (const ref of [...streams.values()].slice(0, 10))
    for (const e of (await sources.stream(ref)).slice(-50))
      if (!own.has(e.correlation_id)) others.add(e.correlation_id);
  const related: TraceNode[] = [];
  for (const correlation of [...others].slice(0, 10)) {
    const outcomes = await sources.reader.outcomesByCorrelation(correlation);
    for (const o of outcomes) {
      if (o.outcome !== "discarded" || o.recordedAt < start) continue;
      if (o.reason !== "superseded" && o.reason !== "invalidated_by_state_change") continue;
      related.push({
        event: eventOfRecord(o),
        outcomes: groupOutcomes([o]),
        sideEffects: [],
        deadLetters: [],
        children: [],
      });
    }
  }
  return related.length > 0 ? { related } : {};
}
