import * as z from "../zod";

/** The request a content-production run starts from (workflow.start.requested), and its bounds. */

export const WORKFLOW_KINDS = ["quick-news", "long-form"] as const;
export type WorkflowKind = (typeof WORKFLOW_KINDS)[number];

/** The most a content request may weigh (JSON bytes) and nest: it is copied into the run's state
 * and into every agent's request, which must stay well inside 256 KB and DynamoDB's 32 levels. */
export const CONTENT_REQUEST_MAX_BYTES = 16 * 1024;
export const CONTENT_REQUEST_MAX_DEPTH = 8;

/** What the operator asks for; extra fields travel to the agents as the run's input. */
export const ContentRequest = z
  .looseObject({
    topic_hint: z.string().check(z.minLength(1), z.maxLength(2000)),
  })
  .check(
    z.refine((request) => jsonDepth(request) <= CONTENT_REQUEST_MAX_DEPTH, {
      message: `must nest at most ${CONTENT_REQUEST_MAX_DEPTH} levels deep`,
    }),
    z.refine(
      (request) =>
        new TextEncoder().encode(JSON.stringify(request)).length <= CONTENT_REQUEST_MAX_BYTES,
      { message: `must be at most ${CONTENT_REQUEST_MAX_BYTES} bytes of JSON` },
    ),
  );

/** How deep a JSON value nests (a scalar is 0); stops counting past the limit. */
function jsonDepth(value: unknown, depth = 0): number {
  if (depth > CONTENT_REQUEST_MAX_DEPTH || value === null || typeof value !== "object")
    return depth;
  let deepest = depth + 1;
  for (const child of Object.values(value))
    deepest = Math.max(deepest, jsonDepth(child, depth + 1));
  return deepest;
}
export type ContentRequest = z.infer<typeof ContentRequest>;
