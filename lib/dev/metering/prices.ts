/**
 * Published on-demand prices in one Region, us-east-1, in US$, each with its unit and where it is
 * published: what the bench turns metered usage into dollars with (bin/bench/cost.ts). Free tiers
 * are left out everywhere (they are per account, not per flow). A price marked `assumed` was not
 * found published; its note says what it stands on.
 */
export interface Price {
  /** US$ per `per` units. */
  readonly dollars: number;
  readonly per: number;
  readonly unit: string;
  readonly source: string;
  /** Set when the figure is not a published price: why this figure. */
  readonly assumed?: string;
  readonly note?: string;
}

export const PRICE_REGION = "us-east-1";
/** The day the prices below were read from their sources. */
export const PRICES_AS_OF = "2026-12-02";

const AWS = (service: string) => `https://aws.amazon.com/${service}/pricing/`;

export const PRICES = {
  dynamoWrite: {
    dollars: 0.625,
    per: 1e6,
    unit: "write request units (on-demand)",
    source: `${AWS("dynamodb")}on-demand/`,
  },
  dynamoRead: {
    dollars: 0.125,
    per: 1e6,
    unit: "read request units (on-demand)",
    source: `${AWS("dynamodb")}on-demand/`,
  },
  dynamoWriteCapacity: {
    dollars: 0.00065,
    per: 1,
    unit: "write capacity unit-hours (provisioned)",
    source: `${AWS("dynamodb")}provisioned/`,
  },
  dynamoReadCapacity: {
    dollars: 0.00013,
    per: 1,
    unit: "read capacity unit-hours (provisioned)",
    source: `${AWS("dynamodb")}provisioned/`,
  },
  sqsStandard: {
    dollars: 0.4,
    per: 1e6,
    unit: "standard queue requests (per 64 KB chunk), first 100 billion a month",
    source: AWS("sqs"),
  },
  sqsFifo: {
    dollars: 0.5,
    per: 1e6,
    unit: "FIFO queue requests (per 64 KB chunk), first 100 billion a month",
    source: AWS("sqs"),
  },
  eventBridgeEvents: {
    dollars: 1,
    per: 1e6,
    unit: "custom events published (per 64 KB chunk)",
    source: AWS("eventbridge"),
  },
  pipesRequests: {
    dollars: 0.4,
    per: 1e6,
    unit: "Pipes requests after filtering (per 64 KB chunk)",
    source: AWS("eventbridge"),
  },
  lambdaRequests: {
    dollars: 0.2,
    per: 1e6,
    unit: "Lambda requests",
    source: AWS("lambda"),
  },
  lambdaArm64: {
    dollars: 0.0000133334,
    per: 1,
    unit: "Lambda GB-seconds on arm64, first 7.5 billion a month",
    source: AWS("lambda"),
  },
  lambdaX86: {
    dollars: 0.0000166667,
    per: 1,
    unit: "Lambda GB-seconds on x86_64, first 6 billion a month",
    source: AWS("lambda"),
  },
  kmsRequests: {
    dollars: 0.03,
    per: 10_000,
    unit: "KMS requests (symmetric keys)",
    source: AWS("kms"),
  },
  stepFunctionsTransitions: {
    dollars: 0.025,
    per: 1_000,
    unit: "Step Functions Standard state transitions",
    source: AWS("step-functions"),
  },
  stepFunctionsExpressRequests: {
    dollars: 1,
    per: 1e6,
    unit: "Step Functions Express requests (executions started)",
    source: AWS("step-functions"),
  },
  stepFunctionsExpressDuration: {
    dollars: 0.00001667,
    per: 1,
    unit: "Step Functions Express GB-seconds (64 MB chunks, 100 ms rounding), first 1,000 GB-hours a month",
    source: AWS("step-functions"),
    note: "the per-GB-second figure as third-party guides quote it from the page ($0.06 per GB-hour)",
  },
  durableOperations: {
    dollars: 8,
    per: 1e6,
    unit: "Lambda durable functions durable operations",
    source: AWS("lambda"),
    note: "the rate the Lambda pricing page's durable functions example uses; data written and retained by durable executions (billed per GB) is not counted",
  },
  temporalActions: {
    dollars: 50,
    per: 1e6,
    unit: "Temporal Cloud Actions, first 5 million a month (Pay-As-You-Go; tiers in TEMPORAL_ACTION_TIERS)",
    source: "https://docs.temporal.io/cloud/pricing",
  },
} as const satisfies Record<string, Price>;

/**
 * Idle ReceiveMessage long polls per SQS event source mapping and minute. Assumed: AWS does not
 * publish the idle poll rate of Lambda's SQS pollers (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html
 * says they long-poll); taken as 5 pollers, each a 20-second long poll, so 15 a minute.
 */
export const IDLE_POLLS_PER_MAPPING_MINUTE = 15;

/** What the figures stand on that is not a published price, printed with them. */
export const ASSUMPTIONS: readonly string[] = [
  `Lambda's SQS pollers: ${IDLE_POLLS_PER_MAPPING_MINUTE} empty ReceiveMessage long polls a minute per event source mapping while a queue is idle (5 pollers × one 20 s poll each; AWS does not publish the rate)`,
  "Temporal Cloud above 200 million Actions a month: the last published tier ($25 per million) is kept (the page says contact Sales)",
  "Lambda durable functions: each execution's start billed as one durable operation besides those AWS's testing SDK records (steps, the contexts of map, parallel and their items and branches, chained invokes); without the SDKs installed, one operation per step, per parallel block and for the start (how the pricing page counts operations beyond steps was not found); data written and retained is counted in bytes, not priced",
];

/** US$ for `quantity` units at a price. */
export const dollarsFor = (price: Price, quantity: number) =>
  (quantity * price.dollars) / price.per;

/** A tier of a volume price: units up to `upTo` (a month's total) at `dollarsPerMillion`. */
export interface Tier {
  readonly upTo: number;
  readonly dollarsPerMillion: number;
}

/**
 * Temporal Cloud's Pay-As-You-Go Actions tiers (Business plan and above, per month). Above 200
 * million the price is "contact Sales": the last published tier, $25, is kept (assumed).
 */
export const TEMPORAL_ACTION_TIERS: readonly Tier[] = [
  { upTo: 5e6, dollarsPerMillion: 50 },
  { upTo: 10e6, dollarsPerMillion: 45 },
  { upTo: 20e6, dollarsPerMillion: 40 },
  { upTo: 50e6, dollarsPerMillion: 35 },
  { upTo: 100e6, dollarsPerMillion: 30 },
  { upTo: Number.POSITIVE_INFINITY, dollarsPerMillion: 25 },
];

/** Temporal Cloud's Business plan: the greater of $500 a month and 10% of usage spend. */
export const TEMPORAL_BUSINESS_PLAN = { minimumDollars: 500, shareOfUsage: 0.1 } as const;

/** Lambda's arm64 duration tiers (GB-seconds a month), the page's three. */
export const LAMBDA_ARM64_TIERS: readonly Tier[] = [
  { upTo: 7.5e9, dollarsPerMillion: 13.3334 },
  { upTo: 18.75e9, dollarsPerMillion: 12.0001 },
  { upTo: Number.POSITIVE_INFINITY, dollarsPerMillion: 10.6667 },
];

/** SQS request tiers (a month's requests of one queue type): standard and FIFO. */
export const SQS_STANDARD_TIERS: readonly Tier[] = [
  { upTo: 100e9, dollarsPerMillion: 0.4 },
  { upTo: 200e9, dollarsPerMillion: 0.3 },
  { upTo: Number.POSITIVE_INFINITY, dollarsPerMillion: 0.24 },
];
export const SQS_FIFO_TIERS: readonly Tier[] = [
  { upTo: 100e9, dollarsPerMillion: 0.5 },
  { upTo: 200e9, dollarsPerMillion: 0.4 },
  { upTo: Number.POSITIVE_INFINITY, dollarsPerMillion: 0.35 },
];

/** US$ for a month's `quantity` under volume tiers, each unit at the tier it falls in. */
export function tieredDollars(tiers: readonly Tier[], quantity: number): number {
  if (!(quantity >= 0)) throw new Error(`a quantity to price must be 0 or more, not ${quantity}`);
  let dollars = 0;
  let from = 0;
  for (const tier of tiers) {
    if (quantity <= from) break;
    const units = Math.min(quantity, tier.upTo) - from;
    dollars += (units * tier.dollarsPerMillion) / 1e6;
    from = tier.upTo;
  }
  return dollars;
}

/** Temporal Cloud for a month of `actions`: tiered Actions plus the Business plan. */
export function temporalMonth(actions: number): number {
  const usage = tieredDollars(TEMPORAL_ACTION_TIERS, actions);
  const plan = Math.max(
    TEMPORAL_BUSINESS_PLAN.minimumDollars,
    TEMPORAL_BUSINESS_PLAN.shareOfUsage * usage,
  );
  return usage + plan;
}
