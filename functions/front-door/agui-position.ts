import { MAX_STREAM_VERSION } from "../../schemas/envelope";

/**
 * Where a client is in an AG-UI stream (./agui-stream.ts), as the SSE `id` of each message: a
 * position made of the event store's own coordinates, so it means the same after a redeploy.
 *
 * A stream is read from a few event-store streams (a conversation's stream and each of its turns'
 * streams; a run's stream). Each stored fact maps to a fixed list of AG-UI events
 * (./agui-events.ts). The position is, per stream read (its `key`), the highest version whose
 * AG-UI events were all sent, and at most one fact sent in part: its key (at the version the
 * position names) and the index of its last event sent.
 *
 * The contract:
 * - `pendingAfter(facts, position)` is what a client at `position` has not seen: the rest of the
 *   fact sent in part first, then every fact above its stream's version, in `sort` order (the
 *   order a fresh read sends). Nothing the position covers is sent again, and nothing it does not
 *   cover is left out, however the facts arrived: a fact appended to a stream later is above that
 *   stream's version, wherever it sorts. Within one stream, versions are sent in order.
 * - `encodePosition` / `parsePosition` round-trip; `parsePosition` refuses (undefined) anything
 *   else, so a bad `Last-Event-ID` is a clear 400, never a silent restart.
 * - The id stays short where a stream reads many sources: a run's assignments are keyed by
 *   number, and consecutive ones at one version encode as one range (`encodePosition`).
 */

/** A stored fact as a stream reads it: the key of its source, its version there, where it sorts. */
export interface PlacedFact<T> {
  /** The source stream's key in the position: `[a-z0-9.]`, 1-16 characters. */
  readonly key: string;
  readonly version: number;
  /** Compared element by element; a fresh read sends facts in this order. */
  readonly sort: readonly number[];
  readonly fact: T;
}

export interface Position {
  /** Per source key, the highest version whose events were all sent (absent: none). */
  readonly sent: Readonly<Record<string, number>>;
  /** The fact sent in part: its key and version, and the index of its last event sent. */
  readonly partial?: { readonly key: string; readonly version: number; readonly index: number };
}

export const START: Position = { sent: {} };

/** A fact still to send, from its event `from` on. */
export interface Pending<T> {
  readonly placed: PlacedFact<T>;
  readonly from: number;
}

/** What a client at `position` has not seen of `facts` (see the contract above). */
export function pendingAfter<T>(facts: readonly PlacedFact<T>[], position: Position): Pending<T>[] {
  const partial = position.partial;
  const isPartial = (f: PlacedFact<T>) =>
    partial !== undefined && f.key === partial.key && f.version === partial.version;
  const first = facts.find(isPartial);
  const rest = facts
    .filter((f) => f.version > sentOf(position, f.key) && !isPartial(f))
    .sort(bySortThenStream);
  return [
    ...(first && partial ? [{ placed: first, from: partial.index + 1 }] : []),
    ...rest.map((placed) => ({ placed, from: 0 })),
  ];
}

/** The position once event `index` of `count` events of `placed` is sent. */
export function advance<T>(
  position: Position,
  placed: PlacedFact<T>,
  index: number,
  count: number,
): Position {
  if (index < count - 1)
    return { sent: position.sent, partial: { key: placed.key, version: placed.version, index } };
  return { sent: { ...position.sent, [placed.key]: placed.version } };
}

/** The position with only the keys `keep` says to keep (a turn the conversation no longer has). */
export function keepKeys(position: Position, keep: (key: string) => boolean): Position {
  const sent = Object.fromEntries(Object.entries(position.sent).filter(([key]) => keep(key)));
  const partial = position.partial && keep(position.partial.key) ? position.partial : undefined;
  return partial ? { sent, partial } : { sent };
}

/**
 * `key=version` pairs joined by `,`, then `/key:version:index` for the fact sent in part. Keys that
 * are whole numbers (a run's assignments) come first, in number order, and consecutive ones at
 * the same version are one range, `first-last=version`: so a run's id grows with the assignments
 * still under way, not with the run's length (./agui-stream.ts marks an ended one FINAL_VERSION).
 */
export function encodePosition(position: Position): string {
  const entries = Object.entries(position.sent);
  const numbered = entries
    .filter(([key]) => NUMBER_KEY.test(key))
    .map(([key, version]) => [Number(key), version] as const)
    .sort(([a], [b]) => a - b);
  const named = entries
    .filter(([key]) => !NUMBER_KEY.test(key))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, version]) => `${key}=${versionText(version)}`);
  const sent = [...numberRanges(numbered), ...named].join(",");
  const partial = position.partial;
  return partial ? `${sent}/${partial.key}:${versionText(partial.version)}:${partial.index}` : sent;
}

/** Consecutive keys at the same version as `first-last=version`, the others as `key=version`. */
function numberRanges(numbered: readonly (readonly [number, number])[]): string[] {
  const out: string[] = [];
  let start = 0;
  for (let i = 1; i <= numbered.length; i++) {
    const [first, version] = numbered[start] as readonly [number, number];
    const next = numbered[i];
    const [last] = numbered[i - 1] as readonly [number, number];
    if (next && next[0] === last + 1 && next[1] === version) continue;
    const keys = first === last ? `${first}` : `${first}-${last}`;
    out.push(`${keys}=${versionText(version)}`);
    start = i;
  }
  return out;
}

const KEY = /^[a-z0-9.]{1,16}$/;
const NUMBER_KEY = /^(0|[1-9][0-9]{0,9})$/;
/** The longest id parsed: what a run's MAX_SHOWN_ASSIGNMENTS (./agui-run.ts) may need, each apart. */
export const MAX_POSITION_LENGTH = 8192;
/** The most keys an id may name, ranges counted key by key. */
export const MAX_POSITION_KEYS = 100_000;

/** The position an SSE id names, or undefined when it is not one this encoding writes. */
export function parsePosition(id: string): Position | undefined {
  const position = readPosition(id);
  // Only the id the encoding writes for it: one spelling per position.
  return position && encodePosition(position) === id ? position : undefined;
}

function readPosition(id: string): Position | undefined {
  if (id.length > MAX_POSITION_LENGTH) return undefined;
  const [pairs = "", partialText, extra] = id.split("/");
  if (extra !== undefined) return undefined;
  const sent = parseSent(pairs);
  if (!sent) return undefined;
  if (partialText === undefined) return { sent };
  const [key, partialVersion, indexText, more] = partialText.split(":");
  const version = versionOf(partialVersion);
  const index = wholeNumber(indexText);
  if (key === undefined || !KEY.test(key) || version === undefined || index === undefined)
    return undefined;
  if (more !== undefined || version <= (sent[key] ?? 0)) return undefined;
  return { sent, partial: { key, version, index } };
}

/** The `key=version` pairs and `first-last=version` ranges, or undefined for anything else. */
function parseSent(pairs: string): Record<string, number> | undefined {
  const sent: Record<string, number> = {};
  let count = 0;
  for (const pair of pairs === "" ? [] : pairs.split(",")) {
    const [keys = "", version, more] = pair.split("=");
    const parsed = versionOf(version);
    const range = /^(0|[1-9][0-9]{0,9})-(0|[1-9][0-9]{0,9})$/.exec(keys);
    const first = range ? Number(range[1]) : undefined;
    const last = range ? Number(range[2]) : undefined;
    const named = range ? [] : [keys];
    if (parsed === undefined || more !== undefined) return undefined;
    if (first !== undefined && last !== undefined && !(first < last)) return undefined;
    count += first !== undefined && last !== undefined ? last - first + 1 : 1;
    if (count > MAX_POSITION_KEYS) return undefined;
    for (let n = first ?? 0; last !== undefined && n <= last; n++) named.push(String(n));
    for (const key of named) {
      if (!KEY.test(key) || key in sent) return undefined;
      sent[key] = parsed;
    }
  }
  return sent;
}

/**
 * The version of a source that will send nothing more (an assignment's answer: ./agui-run.ts),
 * written `f`: every ended source has the same version, so consecutive ones are one range.
 */
export const FINAL_VERSION = MAX_STREAM_VERSION;

function versionText(version: number): string {
  return version === FINAL_VERSION ? "f" : String(version);
}

function versionOf(text: string | undefined): number | undefined {
  return text === "f" ? FINAL_VERSION : wholeNumber(text);
}

function wholeNumber(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0|[1-9][0-9]{0,9})$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

function sentOf(position: Position, key: string): number {
  return position.sent[key] ?? 0;
}

function bySortThenStream<T>(a: PlacedFact<T>, b: PlacedFact<T>): number {
  const length = Math.max(a.sort.length, b.sort.length);
  for (let i = 0; i < length; i++) {
    const d = (a.sort[i] ?? 0) - (b.sort[i] ?? 0);
    if (d !== 0) return d;
  }
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.version - b.version;
}
