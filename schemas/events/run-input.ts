import * as z from "../zod";

/**
 * A workflow run's input: a JSON object, what `workflow.start.requested` carries as `request`
 * and every node of the run gets as `run_input`. Its fields are the workflow's: a definition may
 * declare them (`input` in functions/core/dag/definition.ts, checked at every start); here only
 * its bounds, since it is copied into the run's state and into every step's request, which must
 * stay well inside 256 KB and DynamoDB's 32 levels.
 */

export const RUN_INPUT_MAX_BYTES = 16 * 1024;
export const RUN_INPUT_MAX_DEPTH = 8;

/** The checks of a run input's size and nesting, for any object schema. */
export function runInputBounds<T extends object>() {
  return [
    z.refine<T>((input) => jsonDepth(input) <= RUN_INPUT_MAX_DEPTH, {
      message: `must nest at most ${RUN_INPUT_MAX_DEPTH} levels deep`,
    }),
    z.refine<T>(
      (input) => new TextEncoder().encode(JSON.stringify(input)).length <= RUN_INPUT_MAX_BYTES,
      { message: `must be at most ${RUN_INPUT_MAX_BYTES} bytes of JSON` },
    ),
  ] as const;
}

// A loose object, not a record: its JSON Schema then reads as an application's own run input (a
// loose object with fields of its own) does, less those fields: a compatible change from one to
// the other (schemas/compat.ts).
export const RunInput = z.looseObject({}).check(...runInputBounds<Record<string, unknown>>());
export type RunInput = z.infer<typeof RunInput>;

/** How deep a JSON value nests (a scalar is 0); stops counting past the limit. */
function jsonDepth(value: unknown, depth = 0): number {
  if (depth > RUN_INPUT_MAX_DEPTH || value === null || typeof value !== "object") return depth;
  let deepest = depth + 1;
  for (const child of Object.values(value))
    deepest = Math.max(deepest, jsonDepth(child, depth + 1));
  return deepest;
}
