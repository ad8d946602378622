import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { Envelope } from "../../../schemas";
import { EventAttr } from "./tables";

/**
 * How an event item holds its envelope, and a compact role's state item its data. DynamoDB bills a
 * write 1 unit per KB of the whole item, twice in a transaction, and again in each index that
 * projects the item (the events table's trace indexes once did; they now keep keys only): an
 * envelope of 700-1,500 bytes of JSON next to the item's other attributes makes an item of
 * 1-2 KB, so every emitted event cost 2 units where 1 would do. Such JSON deflates to about half,
 * so an envelope over DEFLATE_OVER_BYTES is stored deflated (raw DEFLATE, node:zlib) in
 * `envelope_z` instead of as text in `envelope`; the JSON that comes out is the JSON that went
 * in, byte for byte, so the relay still publishes exactly what the producer validated. The state
 * of a role whose states only AgentBus reads (Role.compactState: the orchestrator's run, 3-4 KB
 * of JSON written on every event of its run) is kept the same way, in `data_z` instead of the
 * `data` map (./items); a view others read from the table stays a map. Items written either way
 * are read alike.
 */

/** JSON up to this many bytes stays readable: deflating it would not change the bill. */
export const DEFLATE_OVER_BYTES = 512;

/**
 * A state's gate records are deflated from this many bytes of JSON (./items storedGate): they are
 * stream keys that repeat their types and, four to a turn, their task ids, so a few of them
 * already deflate to about half, and only AgentBus reads them.
 */
export const GATE_DEFLATE_OVER_BYTES = 128;

/**
 * JSON deflated when it is over `overBytes` and that makes it smaller; undefined when it stays
 * as it is.
 */
export function deflatedJson(json: string, overBytes = DEFLATE_OVER_BYTES): Uint8Array | undefined {
  const bytes = Buffer.byteLength(json);
  if (bytes <= overBytes) return undefined;
  const deflated = deflateRawSync(json);
  return deflated.byteLength < bytes
    ? new Uint8Array(deflated.buffer, deflated.byteOffset, deflated.byteLength)
    : undefined;
}

/** The JSON of a deflated attribute: bytes from an AWS client, or base64 text from a Lambda event. */
export function inflatedJson(value: unknown): string | undefined {
  if (value instanceof Uint8Array) return inflateRawSync(value).toString("utf8");
  if (typeof value === "string")
    return inflateRawSync(Buffer.from(value, "base64")).toString("utf8");
  return undefined;
}

export type StoredEnvelope =
  | { readonly envelope: string; readonly envelope_z?: undefined }
  | { readonly envelope?: undefined; readonly envelope_z: Uint8Array };

/** The envelope's attribute: its JSON, deflated when that makes it smaller and it is large. */
export function storedEnvelope(envelope: Envelope): StoredEnvelope {
  const json = JSON.stringify(envelope);
  const deflated = deflatedJson(json);
  return deflated ? { envelope_z: deflated } : { envelope: json };
}

/**
 * The envelope JSON of an unmarshalled event item; undefined when it has neither attribute. A
 * binary value is bytes from an AWS client, or base64 text in a stream record as Lambda delivers it.
 */
export function envelopeJson(item: Readonly<Record<string, unknown>>): string | undefined {
  const text = item[EventAttr.envelope];
  return typeof text === "string" ? text : inflatedJson(item[EventAttr.envelopeDeflated]);
}

/** The envelope of an event item the store wrote (an item without one is a broken table). */
export function envelopeOfItem(item: Readonly<Record<string, unknown>>): Envelope {
  const json = envelopeJson(item);
  if (json === undefined)
    throw new Error(
      `event item ${String(item[EventAttr.pk])} v${String(item[EventAttr.version])} has no envelope`,
    );
  return JSON.parse(json) as Envelope;
}
