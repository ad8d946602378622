/**
 * Bedrock foundation models that are no longer Active, as Amazon Bedrock's model lifecycle pages
 * and model cards list them (read 2026-12-02). A stack configured with one of them still
 * synthesizes, with a warning: a Legacy model works until its end-of-life date (new accounts may be
 * refused it), a model past end of life refuses every call.
 *
 * Keyed by foundation model id, without an inference profile's prefix (`us.`, `global.`, ...).
 * `eol` is the end-of-life date where Bedrock has published one.
 */
export interface ModelLifecycle {
  readonly state: "legacy" | "end-of-life";
  readonly eol?: string;
  readonly replacement: string;
}

const HAIKU = "anthropic.claude-haiku-4-5-20251001-v1:0";
const SONNET = "anthropic.claude-sonnet-4-5-20250929-v1:0";

export const RETIRING_MODELS: Readonly<Record<string, ModelLifecycle>> = {
  "anthropic.claude-3-5-haiku-20241022-v1:0": {
    state: "end-of-life",
    eol: "2026-06-19",
    replacement: HAIKU,
  },
  "anthropic.claude-3-7-sonnet-20250219-v1:0": {
    state: "end-of-life",
    eol: "2026-04-28",
    replacement: SONNET,
  },
  "anthropic.claude-3-haiku-20240307-v1:0": {
    state: "legacy",
    eol: "2026-09-10",
    replacement: HAIKU,
  },
  "anthropic.claude-3-5-sonnet-20240620-v1:0": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-3-5-sonnet-20241022-v2:0": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-3-sonnet-20240229-v1:0": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-3-opus-20240229-v1:0": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-v2": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-v2:1": { state: "end-of-life", replacement: SONNET },
  "anthropic.claude-instant-v1": { state: "end-of-life", replacement: HAIKU },
};

/** A warning for a configured model that Bedrock no longer lists as Active, if it is one. */
export function retiringModelWarning(foundationModelId: string): string | undefined {
  const found = RETIRING_MODELS[foundationModelId];
  if (!found) return undefined;
  const when = found.eol ? ` on ${found.eol}` : "";
  const what =
    found.state === "legacy"
      ? `is Legacy on Amazon Bedrock and reaches end of life${when}`
      : `reached end of life on Amazon Bedrock${when}: every call to it fails`;
  return `model ${foundationModelId} ${what}. Choose an Active model, e.g. -c agentbus:modelId=global.${found.replacement}`;
}

/**
 * Foundation model families that constrain an answer to a JSON schema on Converse
 * (`outputConfig.textFormat`), as Amazon Bedrock's structured-output pages list them (read
 * 2026-12-02). Matched on the foundation model id's start, so every dated version counts.
 */
export const STRUCTURED_OUTPUT_MODELS = [
  "anthropic.claude-haiku-4-5",
  "anthropic.claude-sonnet-4-5",
  "anthropic.claude-opus-4-5",
  "anthropic.claude-sonnet-4-6",
  "anthropic.claude-opus-4-6",
  "anthropic.claude-opus-4-7",
] as const;

/** Whether Bedrock enforces structured output for this foundation model. */
export function supportsStructuredOutput(foundationModelId: string): boolean {
  return STRUCTURED_OUTPUT_MODELS.some((family) => foundationModelId.startsWith(family));
}
