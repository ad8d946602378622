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

/** `key=version` pairs joined by `,`, then `/key:version:index` for the fact sent in part. */
export function encodePosition(position: Position): string {
  const sent = Object.entries(position.sent)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, version]) => `${key}=${version}`)
    .join(",");
  const partial = position.partial;
  return partial ? `${sent}/${partial.key}:${partial.version}:${partial.index}` : sent;
}

const KEY = /^[a-z0-9.]{1,16}$/;
const MAX_POSITION_LENGTH = 4096;

/** The position an SSE id names, or undefined when it is not one this encoding writes. */
export function parsePosition(id: string): Position | undefined {
  if (id.length > MAX_POSITION_LENGTH) return undefined;
  const [pairs = "", partialText, extra] = id.split("/");
  if (extra !== undefined) return undefined;
  const sent: Record<string, number> = {};
  for (const pair of pairs === "" ? [] : pairs.split(",")) {
    const [key, version] = pair.split("=");
    const parsed = wholeNumber(version);
    if (key === undefined || !KEY.test(key) || parsed === undefined || key in sent)
      return undefined;
    sent[key] = parsed;
  }
  if (partialText === undefined) return { sent };
  const [key, versionText, indexText, more] = partialText.split(":");
  const version = wholeNumber(versionText);
  const index = wholeNumber(indexText);
  if (key === undefined || !KEY.test(key) || version === undefined || index === undefined)
    return undefined;
  if (more !== undefined || version <= (sent[key] ?? 0)) return undefined;
  return { sent, partial: { key, version, index } };
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
