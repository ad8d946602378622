import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { startLocal } from "../../lib/dev/local/environment";
import { indexCatalog } from "../../lib/dev/metering/index-writes";
import { type MeteredWrite, meter } from "../../lib/dev/metering/metering";
import { CONVERSATION_TURNS, conversationTurns, type TurnWrites } from "./conversation-turns";
import { PLAYED_FLOWS, playAlone } from "./cost-flows";
import { fmtInt, renderTable } from "./stats";

/**
 * `npm run bench -- writes`: where each reference flow's DynamoDB write units go, write by write.
 * Each flow is played alone on the local stack once to warm up, then once metered; its writes
 * are grouped by the group that made them and by what they wrote (the tables and the kinds of
 * items, ids left out), with how many such writes the flow made and their units, the indexes'
 * among them. The cost section (`npm run bench -- cost`) prices the same flows; this one says
 * which writes to cut. Then one conversation of many turns (./conversation-turns): what a turn
 * costs as the conversation grows, and that it stops growing once the conversation and its view
 * keep as many turns as they may.
 */

export interface WritesResult {
  /** Write units per flow played alone. */
  readonly flows: readonly { readonly flow: string; readonly writeUnits: number }[];
  /** One long conversation's turns (./conversation-turns). */
  readonly turns: readonly TurnWrites[];
}

type Out = (line?: string) => void;

/** One kind of write of a flow: who made it, what it wrote, how often, and its units. */
export interface WriteShape {
  readonly scope: string;
  readonly operation: string;
  readonly items: string;
  readonly writes: number;
  readonly writeUnits: number;
  readonly indexWriteUnits: number;
  /** The largest item such a write wrote, in bytes. */
  readonly largestBytes: number;
}

/**
 * What an item's key says of its kind: its first part (`dag_run`, `agent_run`, `model_spend`),
 * with the group of an inbox-table row (`checkpoint#<group>#<stream type>`, `inbox#<group>`).
 */
export function keyKind(key: string): string {
  const parts = key.split("#");
  const [first, second, third] = parts;
  if (first === "checkpoint") return `checkpoint#${second}#${third}`;
  if (first === "inbox") return `inbox#${second}`;
  return first ?? key;
}

/** A write's items as one phrase: `state:dag_run + events:dag_run ×5`, in the order written. */
export function itemsPhrase(write: MeteredWrite, tableOf: (physical: string) => string): string {
  const counted: [string, number][] = [];
  for (const item of write.items) {
    const name = `${tableOf(item.table)}:${keyKind(item.key)}`;
    const last = counted.at(-1);
    if (last && last[0] === name) last[1]++;
    else counted.push([name, 1]);
  }
  return counted.map(([name, n]) => (n > 1 ? `${name} ×${n}` : name)).join(" + ");
}

/** The writes grouped by scope, operation and items; the dearest first within each scope. */
export function writeShapes(
  writes: readonly MeteredWrite[],
  tableOf: (physical: string) => string,
): WriteShape[] {
  const shapes = new Map<string, WriteShape>();
  for (const write of writes) {
    const scope = write.scope ?? "(none)";
    const operation = write.failed ? `${write.operation} (failed)` : write.operation;
    const items = itemsPhrase(write, tableOf);
    const key = `${scope}\u0000${operation}\u0000${items}`;
    const known = shapes.get(key);
    const largest = Math.max(0, ...write.items.map((i) => i.bytes));
    shapes.set(key, {
      scope,
      operation,
      items,
      writes: (known?.writes ?? 0) + 1,
      writeUnits: (known?.writeUnits ?? 0) + write.writeUnits,
      indexWriteUnits: (known?.indexWriteUnits ?? 0) + write.indexWriteUnits,
      largestBytes: Math.max(known?.largestBytes ?? 0, largest),
    });
  }
  return [...shapes.values()].sort(
    (a, b) => a.scope.localeCompare(b.scope) || b.writeUnits - a.writeUnits,
  );
}

/** The table's logical name (`state`, `events`, `inbox`, ...) for a table of the stack's four. */
function tableNamer(env: LocalEnvironment): (physical: string) => string {
  const logical = new Map(Object.entries(env.names.tables).map(([name, table]) => [table, name]));
  return (physical) => logical.get(physical) ?? physical;
}

let running: LocalEnvironment | undefined;

/** Stops the stack this section started (on Ctrl-C or a failure). */
export async function stopWritesSection(): Promise<void> {
  const env = running;
  running = undefined;
  await env?.stop();
}

export async function runWritesSection(out: Out): Promise<WritesResult> {
  running = await startLocal();
  const env = running;
  try {
    const dynamo = meter(env.clients.dynamodb, {
      indexes: indexCatalog(env.names.tables),
      recordWrites: true,
    });
    const flows: { flow: string; writeUnits: number }[] = [];
    for (const flow of PLAYED_FLOWS) {
      await playAlone(env, flow);
      dynamo.reset();
      await playAlone(env, flow);
      const writes = dynamo.writes();
      const writeUnits = writes.reduce((sum, w) => sum + w.writeUnits, 0);
      flows.push({ flow: flow.flow, writeUnits });
      out();
      out(`${flow.flow}: ${fmtInt(writeUnits)} write units in ${fmtInt(writes.length)} writes`);
      printShapes(out, writeShapes(writes, tableNamer(env)));
    }
    const turns = await conversationTurns(env, dynamo, out);
    return { flows, turns };
  } finally {
    await stopWritesSection();
  }
}

function printShapes(out: Out, shapes: readonly WriteShape[]): void {
  const rows = shapes.map((s) => [
    s.scope,
    s.operation,
    s.items,
    fmtInt(s.writes),
    fmtInt(s.writeUnits),
    fmtInt(s.indexWriteUnits),
    fmtInt(s.largestBytes),
  ]);
  const header = ["group", "operation", "items", "writes", "WU", "index WU", "largest item (B)"];
  for (const line of renderTable(header, rows, ["l", "l", "l", "r", "r", "r", "r"])) out(line);
}

export function writesSummary(result: WritesResult): string {
  const flows = result.flows.map((f) => `${f.flow} ${fmtInt(f.writeUnits)} WU`).join(", ");
  const turns = result.turns.map((t) => `${fmtInt(t.writeUnits)} WU at turn ${t.turn}`).join(", ");
  return `Write units per flow played alone, write by write: ${flows}. A conversation of ${CONVERSATION_TURNS} turns: ${turns}.`;
}
