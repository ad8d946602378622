import { cbor, dateToTag, tagSymbol } from "@smithy/core/cbor";

/**
 * CBOR as Smithy RPC v2 CBOR carries a structure (smithy.io, "RPC v2 CBOR protocol"), with the AWS
 * SDK v3's own encoder and decoder (`@smithy/core/cbor`): a member left undefined is not sent (the
 * encoder refuses `undefined`), a timestamp travels as tag 1 over epoch seconds both ways, a blob
 * as a byte string (`Uint8Array`). The lean client is given it (`CBOR`) where a function calls such
 * a service: the other functions' bundles do not carry it.
 */

/** What ./wire needs to speak RPC v2 CBOR. */
export interface CborCodec {
  toCbor(input: object): Uint8Array;
  fromCbor(bytes: Uint8Array): Record<string, unknown>;
}

/** What a structure is on the wire. */
export function toCbor(input: object): Uint8Array {
  return cbor.serialize(encodable(input));
}

/** A structure from the wire: tag 1 back to a `Date`; an empty body is an empty structure. */
export function fromCbor(bytes: Uint8Array): Record<string, unknown> {
  if (bytes.byteLength === 0) return {};
  const value = decoded(cbor.deserialize(bytes));
  return value && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function encodable(value: unknown): unknown {
  if (value instanceof Date) return dateToTag(value);
  if (value instanceof Uint8Array || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(encodable);
  const members: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value))
    if (member !== undefined) members[key] = encodable(member);
  return members;
}

function decoded(value: unknown): unknown {
  if (value instanceof Uint8Array || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(decoded);
  if ((value as { [tagSymbol]?: boolean })[tagSymbol]) {
    const tagged = value as { tag: number | bigint; value: unknown };
    return Number(tagged.tag) === 1 ? new Date(Number(tagged.value) * 1000) : decoded(tagged.value);
  }
  return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, decoded(member)]));
}

export const CBOR: CborCodec = { toCbor, fromCbor };
