import { gunzipSync, gzipSync } from "node:zlib";
import * as z from "../../schemas/zod";

/**
 * JSON as an environment variable holds it: as is when it is short, else compressed, so that the
 * stack's facts fit Lambda's 4 KB of environment per function (keys and values together). A
 * compressed value is PACKED_JSON_MARKER then the JSON gzipped, in base64; the facts repeat
 * themselves (each version of a workflow much of the next, each step role's entry the others'),
 * so the reference stack's 6 KB of workflows take some 860 bytes. Every reader decodes it with
 * `packedJsonText`: the functions, the local runtime and the operator tools alike.
 */

/** What starts a compressed value. */
export const PACKED_JSON_MARKER = "gzip+base64:";

/** JSON longer than this is written compressed. */
export const PACK_ABOVE_BYTES = 1_024;

/** `value` as JSON, compressed when that is longer than PACK_ABOVE_BYTES. */
export function packJson(value: unknown): string {
  const json = JSON.stringify(value);
  if (Buffer.byteLength(json) <= PACK_ABOVE_BYTES) return json;
  return `${PACKED_JSON_MARKER}${gzipSync(json, { level: 9 }).toString("base64")}`;
}

/** The text of JSON, or of compressed JSON, parsed by `schema` (`expected` names it in an error). */
export function packedJsonText<T extends z.ZodMiniType>(schema: T, expected: string) {
  return z.pipe(
    z.pipe(
      z.string(),
      z.transform((text, ctx) => {
        if (!text.startsWith(PACKED_JSON_MARKER)) return text;
        try {
          const packed = Buffer.from(text.slice(PACKED_JSON_MARKER.length), "base64");
          return gunzipSync(packed).toString("utf8");
        } catch {
          ctx.issues.push({
            code: "custom",
            message: `must be ${expected}, or ${PACKED_JSON_MARKER} followed by its JSON gzipped in base64`,
            input: text,
          });
          return z.NEVER;
        }
      }),
    ),
    z.jsonText(schema, expected),
  );
}
