import {
  KEY_CACHE_ENTRIES,
  KEY_CACHE_MESSAGES,
  KEY_CACHE_MS,
} from "../../functions/core/personal-data/key-cache";
import type { FlowUsage, MixedFlow } from "../../lib/dev/metering/flow-cost";
import { dollarsFor, PRICES } from "../../lib/dev/metering/prices";
import { fmt, fmtInt } from "./stats";

type Out = (line?: string) => void;

/**
 * A flow's first play, before it is metered: in function instances that had not served its
 * customer yet, so every one that seals or opens the customer's fields reads its data key (KMS
 * GenerateDataKey or Decrypt). Kept apart from the per-flow figures, which are the warm plays'.
 */
export interface ColdPlay {
  readonly flow: string;
  readonly usage: FlowUsage;
}

/** Flows of one customer per function instance and key period the amortised lines assume. */
const FLOWS_PER_PERIOD = [1, 10, 100] as const;

const kmsPerMillion = (requests: number) => fmt(dollarsFor(PRICES.kmsRequests, requests * 1e6), 2);

/**
 * What the warm figures assume, said in the output: the customer's data key is cached in every
 * function the flow touches. Then what the first flow cost in KMS, and that cost amortised over
 * the flows one customer makes within the key cache's bounds
 * (functions/core/personal-data/key-cache.ts).
 */
export function printCold(out: Out, cold: readonly ColdPlay[], warm: readonly MixedFlow[]): void {
  const minutes = KEY_CACHE_MS / 60_000;
  out(
    `Warm functions assumed: each flow was played once, unmetered, before its metered plays, and every play is the same customer (cust_alice) in a new conversation, so the figures above are what a flow costs in function instances that already hold the customer's data key. The key cache's bounds (functions/core/personal-data/key-cache.ts): a key read is used for ${fmt(minutes, 0)} minutes and for ${fmtInt(KEY_CACHE_MESSAGES)} sealed or opened fields, and an instance keeps ${fmtInt(KEY_CACHE_ENTRIES)} customers' keys; past them the instance reads the key again (one KMS Decrypt).`,
  );
  out("A customer's first flow in instances that have not read its key (the unmetered play):");
  const none = cold.filter((c) => c.usage.kmsRequests === 0).map((c) => c.flow);
  for (const { flow, usage } of cold) {
    const kms = usage.kmsRequests;
    if (kms === 0) continue;
    const warmKms = warm.find((f) => f.shape.flow === flow)?.usage.kmsRequests ?? 0;
    const amortised = FLOWS_PER_PERIOD.map(
      (n) => `${n} flow${n === 1 ? "" : "s"} $${kmsPerMillion(warmKms + kms / n)}`,
    ).join(", ");
    out(
      `  ${flow}: ${fmt(kms, 0)} KMS requests ($${kmsPerMillion(kms)} per million such flows; warm ${fmt(warmKms, 1)}); KMS per million flows when one customer makes this many flows per instance per ${fmt(minutes, 0)} minutes: ${amortised}`,
    );
  }
  if (none.length) out(`  ${none.join(", ")}: no KMS request (no personal field sealed or opened)`);
  out(
    `  (A new customer pays the first flow's KMS once per function instance, a known one about as many Decrypts per instance every ${fmt(minutes, 0)} minutes; at ${fmtInt(KEY_CACHE_MESSAGES)} fields a read the field bound is reached only by a customer with thousands of flows in that time.)`,
  );
}
