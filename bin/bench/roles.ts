import { InboxAttr, isFailureKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import type { Step } from "../../functions/core/role";
import { hasConversation, runConversationScenario } from "../../lib/dev/local/conversation";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import { runScenario } from "../../lib/dev/local/scenario";
import { type IndexProbe, indexProbe, type ProbedLayout } from "../../lib/dev/metering/index-probe";
import {
  catalogPerIndex,
  indexCatalog,
  legacyItem,
  legacyTraceCatalog,
} from "../../lib/dev/metering/index-writes";
import { type MeterSnapshot, meter } from "../../lib/dev/metering/metering";
import { dollarsFor, PRICE_REGION, PRICES, PRICES_AS_OF } from "../../lib/dev/metering/prices";
import { printCeilings, type ScenarioCounts } from "./ceilings";
import type { DynamoResult, Measured } from "./dynamo";
import { fmt, fmtInt, renderTable } from "./stats";

/**
 * `npm run bench` section 5: DynamoDB calls and capacity units per consumed event of every
 * consumer group, metered while the local stack plays the reference scenario as `npm start`
 * plays it (tasks, content-production workflows, customer-support conversations, with their
 * duplicates, gap repairs and poison message). Beside each group: the least its commits could
 * cost (one write of one item when nothing is emitted, one transaction of 1 + N items when N
 * events are, one read per delivery) and the Powertools baseline of section 2 applied to the same
 * steps.
 */

export interface RoleCost {
  readonly group: string;
  /** Deliveries the group handled (consumed or failed). */
  readonly deliveries: number;
  /** Events applied, discarded, rejected or found duplicate, gap repairs included. */
  readonly steps: number;
  readonly emitted: number;
  readonly metered: MeterSnapshot;
  readonly minimum: { readonly writeUnits: number; readonly readUnits: number };
  readonly baseline: {
    readonly calls: number;
    readonly writeUnits: number;
    readonly readUnits: number;
  };
}

export interface RolesResult {
  readonly roles: readonly RoleCost[];
  readonly seconds: number;
}

interface GroupTally {
  deliveries: number;
  steps: Step[];
}

type Out = (line?: string) => void;

/**
 * US$ per million deliveries for these write and read units per delivery, at DynamoDB's on-demand
 * prices (lib/dev/metering/prices.ts): the same at any load because on-demand bills per request.
 */
const dollarsPerMillion = (writeUnits: number, readUnits: number) =>
  dollarsFor(PRICES.dynamoWrite, writeUnits * 1e6) + dollarsFor(PRICES.dynamoRead, readUnits * 1e6);

let running: LocalEnvironment | undefined;

/** Stops the stack this section started (on Ctrl-C or a failure). */
export async function stopRolesSection(): Promise<void> {
  const env = running;
  running = undefined;
  await env?.stop();
}

export async function runRolesSection(out: Out, dynamo: DynamoResult): Promise<RolesResult> {
  const tallies = new Map<string, GroupTally>();
  const tally = (group: string) => {
    const known = tallies.get(group);
    if (known) return known;
    const fresh: GroupTally = { deliveries: 0, steps: [] };
    tallies.set(group, fresh);
    return fresh;
  };
  const onEvent = (event: RuntimeEvent) => {
    if (event.kind === "consumed") {
      const t = tally(event.group);
      t.deliveries++;
      t.steps.push(...event.result.steps);
    } else if (event.kind === "consume-failed") tally(event.group).deliveries++;
  };
  const started = performance.now();
  running = await startLocal({ onEvent });
  const env = running;
  try {
    // With the tables' layouts, so the units include what each write costs in the indexes.
    const dynamoMeter = meter(env.clients.dynamodb, { indexes: indexCatalog(env.names.tables) });
    // The same writes under the layout before task roots, as that version wrote its items.
    const probe = indexProbe(
      env.clients.dynamodb,
      {
        now: { catalog: indexCatalog(env.names.tables) },
        before: { catalog: legacyTraceCatalog(env.names.tables), asWritten: legacyItem },
        ...perIndexLayouts(env.names.tables),
      },
      (item) => (isFailureKey(item[InboxAttr.pk]?.S ?? "") ? FAILURE_RECORDS : undefined),
    );
    dynamoMeter.reset();
    probe.reset();
    out(`local stack on ${env.endpoint}: playing the reference scenario, metered per group`);
    const playStarted = performance.now();
    await runScenario(env);
    if (hasConversation(env)) await runConversationScenario(env);
    await env.runtime.idle();
    const played = (performance.now() - playStarted) / 1000;
    const byScope = dynamoMeter.byScope();
    const baseline = perStepBaseline(dynamo);
    const roles = [...tallies]
      .filter(([group]) => byScope[group])
      .map(([group, t]) => roleCost(group, t, byScope[group] as MeterSnapshot, baseline))
      .sort((a, b) => a.group.localeCompare(b.group));
    printRoles(out, roles);
    out();
    printIndexWrites(out, probe, env.names.tables);
    out();
    printCeilings(out, scenarioCounts(roles, played));
    return { roles, seconds: (performance.now() - started) / 1000 };
  } finally {
    await stopRolesSection();
  }
}

interface StepCost {
  readonly calls: number;
  readonly writeUnits: number;
  readonly readUnits: number;
}

/** Section 2's baseline per event: sequenced, unsequenced, and the cost of one emitted event. */
interface BaselineModel {
  readonly sequenced: StepCost;
  readonly unsequenced: StepCost;
  readonly perEmitted: StepCost;
  readonly duplicate: StepCost;
}

function perEvent(m: Measured): StepCost {
  const calls = Object.values(m.calls).reduce((a, b) => a + b, 0);
  return {
    calls: calls / m.events,
    writeUnits: m.writeUnits / m.events,
    readUnits: m.readUnits / m.events,
  };
}

function perStepBaseline(dynamo: DynamoResult): BaselineModel {
  const find = (prefix: string) => {
    const found = dynamo.cases.find((c) => c.name.startsWith(prefix));
    if (!found) throw new Error(`section 2 has no case "${prefix}"`);
    return perEvent(found.baseline);
  };
  const sequenced = find("sequenced lifecycle event");
  const emitting = find("event emitting 1 follow-up");
  return {
    sequenced,
    unsequenced: find("unsequenced feedback event"),
    duplicate: find("redelivered feedback, duplicate"),
    perEmitted: {
      calls: emitting.calls - sequenced.calls,
      writeUnits: emitting.writeUnits - sequenced.writeUnits,
      readUnits: emitting.readUnits - sequenced.readUnits,
    },
  };
}

const sumOf = (roles: readonly RoleCost[], f: (r: RoleCost) => number) =>
  roles.reduce((n, r) => n + f(r), 0);

/** What the whole scenario took, for the ceilings of each hop (./ceilings). */
function scenarioCounts(roles: readonly RoleCost[], seconds: number): ScenarioCounts {
  const total = (f: (r: RoleCost) => number) => sumOf(roles, f);
  const deliveries = total((r) => r.deliveries);
  const writeUnits = total((r) => r.metered.writeUnits);
  const readUnits = total((r) => r.metered.readUnits);
  const perDelivery = (r: RoleCost) => r.metered.writeUnits / Math.max(1, r.deliveries);
  const hottest = [...roles].sort((a, b) => perDelivery(b) - perDelivery(a))[0];
  return {
    published: total((r) => r.emitted),
    deliveries,
    writeUnits,
    readUnits,
    hottestWritesPerDelivery: {
      group: hottest?.group ?? "-",
      writeUnits: hottest ? perDelivery(hottest) : 0,
    },
    seconds,
    dollarsPerMillion: dollarsPerMillion(
      writeUnits / Math.max(1, deliveries),
      readUnits / Math.max(1, deliveries),
    ),
  };
}

function roleCost(
  group: string,
  t: GroupTally,
  metered: MeterSnapshot,
  model: BaselineModel,
): RoleCost {
  let minWrites = 0;
  let minReads = t.deliveries;
  let calls = 0;
  let writeUnits = 0;
  let readUnits = 0;
  let emitted = 0;
  for (const step of t.steps) {
    const n = step.emitted.length;
    emitted += n;
    // A gap repair reads the stream once more; the delivered event's read is counted per delivery.
    if (step.repaired) minReads++;
    if (step.status !== "duplicate") minWrites += n === 0 ? 1 : 2 * (1 + n);
    const base =
      step.status === "duplicate"
        ? model.duplicate
        : step.version > 0
          ? model.sequenced
          : model.unsequenced;
    calls += base.calls + n * model.perEmitted.calls;
    writeUnits += base.writeUnits + n * model.perEmitted.writeUnits;
    readUnits += base.readUnits + n * model.perEmitted.readUnits;
  }
  return {
    group,
    deliveries: t.deliveries,
    steps: t.steps.length,
    emitted,
    metered,
    minimum: { writeUnits: minWrites, readUnits: minReads },
    baseline: { calls, writeUnits, readUnits },
  };
}

function printRoles(out: Out, roles: readonly RoleCost[]): void {
  const per = (value: number, r: RoleCost) => fmt(value / Math.max(1, r.deliveries), 2);
  const callsOf = (m: MeterSnapshot) => Object.values(m.calls).reduce((a, b) => a + b, 0);
  const lines = renderTable(
    [
      "group",
      "deliveries",
      "steps",
      "emitted",
      "calls/ev",
      "base calls/ev",
      "WU/ev",
      "idx WU/ev",
      "min WU/ev",
      "base WU/ev",
      "RU/ev",
      "min RU/ev",
      "base RU/ev",
      "$/M ev",
      "min $/M",
      "base $/M",
      "calls by operation",
    ],
    roles.map((r) => [
      r.group,
      fmtInt(r.deliveries),
      fmtInt(r.steps),
      fmtInt(r.emitted),
      per(callsOf(r.metered), r),
      per(r.baseline.calls, r),
      per(r.metered.writeUnits, r),
      per(r.metered.indexWriteUnits, r),
      per(r.minimum.writeUnits, r),
      per(r.baseline.writeUnits, r),
      per(r.metered.readUnits, r),
      per(r.minimum.readUnits, r),
      per(r.baseline.readUnits, r),
      ...[r.metered, r.minimum, r.baseline].map((u) =>
        fmt(dollarsPerMillion(u.writeUnits, u.readUnits) / Math.max(1, r.deliveries), 2),
      ),
      Object.entries(r.metered.calls)
        .sort((a, b) => b[1] - a[1])
        .map(([op, n]) => `${op} ${n}`)
        .join(", "),
    ]),
    ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r", "l"],
  );
  for (const line of lines) out(line);
  out();
  out(
    `Per delivery (a message the group's queue handed out, failures included). steps: events the deliveries applied, discarded, rejected or found duplicate, gap repairs included. WU: the tables' write units and their indexes' (idx: the part of WU that is index entries: a stored event that starts a run of its stream's events in one correlation, or is a task root, enters the events table's trace index (a task root also task-roots, a stream's first event by-stream-type), each inbox row the inbox table's trace index (a task root also task-roots), each summarized state the operator's lists; 1 WU per KB of an entry, not doubled in a transaction). min: the least a commit can cost for the same steps with items up to 1 KB: one write of one item (1 WU) when a step emits nothing, one transaction of 1 + N items (2 WU each) when it emits N, no index entries, one strongly consistent read per delivery and per gap repair, a duplicate no write. base: section 2's Powertools baseline per event (sequenced, unsequenced, duplicate, plus its measured cost per emitted event) applied to the same steps. Calls and units the groups make besides their commits (the sender's side-effect keys, an agent's lookups) are in the metered figures, not in min or base. $/M ev: US$ per million deliveries for these DynamoDB units at on-demand prices in ${PRICE_REGION} ($${PRICES.dynamoWrite.dollars} per million write units, $${PRICES.dynamoRead.dollars} per million read units, ${PRICES_AS_OF}; section 6 prices every other service); on-demand bills per unit, so these units per delivery hold at any load up to the ceilings in lib/infra/README.md's Scale and limits (section 6's loaded column measures the lines that bill per batch).`,
  );
}

/** The tables whose index writes the probe also splits by index (the layout `<table>:<index>`). */
const SPLIT_TABLES = ["events", "inbox"] as const;

/** A probed layout per index of each split table: that table with that index alone. */
function perIndexLayouts(names: TableNames): Record<string, ProbedLayout> {
  return Object.fromEntries(
    SPLIT_TABLES.flatMap((table) =>
      Object.entries(catalogPerIndex(names, table)).map(([index, catalog]) => [
        `${table}:${index}`,
        { catalog },
      ]),
    ),
  );
}

/** The index probe's part of the inbox table that holds the failure records. */
const FAILURE_RECORDS = "failure records";

/**
 * The index write units per stored event, per inbox row and per failure record over the scenario:
 * with the deployed layout, and beside it with the layout before task roots (the same writes,
 * estimated in both).
 */
function printIndexWrites(out: Out, probe: IndexProbe, tables: { events: string; inbox: string }) {
  const byTable = probe.byTable();
  const line = (what: string, table: string, split: (typeof SPLIT_TABLES)[number]) => {
    const tally = byTable[table];
    const per = (layout: string) =>
      fmt((tally?.units[layout] ?? 0) / Math.max(1, tally?.traced ?? 0), 2);
    const shares = Object.keys(tally?.units ?? {})
      .filter((layout) => layout.startsWith(`${split}:`))
      .map((layout) => `${layout.slice(split.length + 1)} ${per(layout)}`);
    out(
      `index write units per ${what}: ${per("now")} (${shares.join(", ")}; before task roots: ${per("before")}; ${fmtInt(tally?.traced ?? 0)} written)`,
    );
  };
  line("stored event", tables.events, "events");
  line("inbox row", tables.inbox, "inbox");
  line("failure record", `${tables.inbox}|${FAILURE_RECORDS}`, "inbox");
  out(
    "Index write units over the reference scenario, per stored event (events table), per inbox row and per failure record (inbox table), as lib/dev/metering/index-writes.ts estimates them, in all and index by index: now, a stored event's id carries its correlation's digest (functions/core/event-ids.ts), so an event that starts a run (the first of a stream's consecutive events in one correlation) or is a task root enters trace-by-digest (keys, its correlation and task: a trace by correlation or by the id reads the digest's partition), a task root also digest-task-roots, a stream's first event by-stream-type, and no event an index by its id; trace-by-correlation, task-roots and by-event-id (keyed by event_id) hold only events whose ids carry no digest (stored before, or minted elsewhere). Each inbox row enters the trace index only (a row is never a task root: a trace by task finds it through its task's stored events or failure records), each failure record the trace index and task-roots. Each lookup the events table serves (a correlation's runs and an event by id, a task's correlations, a type's streams) is keyed by what it is asked for, so an event enters one entry of each lookup it is in; keyed by the event's own id, the lookup by id was an entry for every event (1.00 of 1.96 per stored event). Before task roots, each event and row entered by-correlation and by-task (the whole item, 1 WU per KB each), each event by-hour too.",
  );
}

export function rolesSummary(result: RolesResult): string {
  const worst = [...result.roles].sort(
    (a, b) =>
      b.metered.writeUnits / Math.max(1, b.minimum.writeUnits) -
      a.metered.writeUnits / Math.max(1, a.minimum.writeUnits),
  )[0];
  const total = (f: (r: RoleCost) => number) => sumOf(result.roles, f);
  const deliveries = total((r) => r.deliveries);
  const wu = total((r) => r.metered.writeUnits);
  const min = total((r) => r.minimum.writeUnits);
  const base = total((r) => r.baseline.writeUnits);
  return `5. Over the reference scenario's ${fmtInt(deliveries)} deliveries to ${result.roles.length} groups: ${fmt(wu / deliveries, 2)} WU per delivery metered, ${fmt(min / deliveries, 2)} the commit minimum, ${fmt(base / deliveries, 2)} the Powertools baseline; furthest above its minimum: ${worst?.group ?? "-"} (${fmt((worst?.metered.writeUnits ?? 0) / Math.max(1, worst?.minimum.writeUnits ?? 1), 1)}×).`;
}
