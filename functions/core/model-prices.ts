/**
 * What a model call costs: Amazon Bedrock's on-demand list prices per million tokens, in US$, by
 * model family (read 2026-12-02 from https://aws.amazon.com/bedrock/pricing/, us-east-1; a
 * geographic inference profile may bill up to 10% more). A family matches every dated version and
 * inference profile of it (`global.anthropic.claude-haiku-4-5-20251001-v1:0` is
 * `anthropic.claude-haiku-4-5`). The budgets of runs and tenants (./model-guard.ts) spend by it.
 */
export interface TokenPrice {
  /** US$ per million input tokens. */
  readonly input: number;
  /** US$ per million output tokens. */
  readonly output: number;
}

export const MODEL_PRICES: Readonly<Record<string, TokenPrice>> = {
  "anthropic.claude-opus-4-5": { input: 5, output: 25 },
  "anthropic.claude-sonnet-4-5": { input: 3, output: 15 },
  "anthropic.claude-sonnet-4": { input: 3, output: 15 },
  "anthropic.claude-haiku-4-5": { input: 1, output: 5 },
  "anthropic.claude-3-5-haiku": { input: 0.8, output: 4 },
  "anthropic.claude-3-haiku": { input: 0.25, output: 1.25 },
  "amazon.nova-pro": { input: 0.8, output: 3.2 },
  "amazon.nova-lite": { input: 0.06, output: 0.24 },
  "amazon.nova-micro": { input: 0.035, output: 0.14 },
};

/**
 * A model the table does not list (the local stand-in, a model added later) is priced as the
 * dearest it lists, so that a dollar budget is never spent slower than the money is.
 */
export const UNLISTED_MODEL_PRICE: TokenPrice = Object.values(MODEL_PRICES).reduce((a, b) =>
  b.output > a.output || (b.output === a.output && b.input > a.input) ? b : a,
);

/** The price of `modelId`: its family's (the longest that matches), else UNLISTED_MODEL_PRICE. */
export function priceOf(modelId: string): TokenPrice {
  let found: string | undefined;
  for (const family of Object.keys(MODEL_PRICES))
    if (modelId.includes(family) && (found === undefined || family.length > found.length))
      found = family;
  return found === undefined ? UNLISTED_MODEL_PRICE : (MODEL_PRICES[found] as TokenPrice);
}

/**
 * What a call of `modelId` with this usage costs, in millionths of a US$ (an integer, rounded
 * up): a price per million tokens is a price in millionths of a dollar per token.
 */
export function costMicros(
  modelId: string,
  usage: { readonly inputTokens: number; readonly outputTokens: number },
): number {
  const price = priceOf(modelId);
  return Math.ceil(usage.inputTokens * price.input + usage.outputTokens * price.output);
}
