import * as z from "../zod";
import { RUN_INPUT_MAX_BYTES, RUN_INPUT_MAX_DEPTH, runInputBounds } from "./run-input";

/**
 * The content-production workflows' run input (what the content agents read as `run_input`):
 * a topic hint, and what else the operator sends, within a run input's bounds (./run-input).
 */

export const WORKFLOW_KINDS = ["quick-news", "long-form"] as const;
export type WorkflowKind = (typeof WORKFLOW_KINDS)[number];

/** The most a content request may weigh and nest: a run input's (./run-input). */
export const CONTENT_REQUEST_MAX_BYTES = RUN_INPUT_MAX_BYTES;
export const CONTENT_REQUEST_MAX_DEPTH = RUN_INPUT_MAX_DEPTH;

/** The longest topic hint. */
export const TOPIC_HINT_MAX_LENGTH = 2000;

/** What the operator asks for; extra fields travel to the agents as the run's input. */
export const ContentRequest = z
  .looseObject({
    topic_hint: z.string().check(z.minLength(1), z.maxLength(TOPIC_HINT_MAX_LENGTH)),
  })
  .check(...runInputBounds<{ topic_hint: string }>());
export type ContentRequest = z.infer<typeof ContentRequest>;
