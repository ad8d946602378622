import { defineIntegration } from "../../core/integration";
import { InMemorySideEffects, type SideEffectStore } from "../../core/side-effects";

/**
 * The side-effect ledger (functions/core/side-effects.ts): what is known about each outside write
 * by its idempotency key — `pending` before the call, `succeeded | failed | unknown` after — so
 * that a write runs at most once under its key, whoever retries it. The hub's side-effects table
 * on AWS; the ledger itself is a read and write of that table, not of the outside world, but a
 * role that keeps one calls out while deciding (the writes it records), so it is not a fold.
 */
export const sideEffects = /* @__PURE__ */ defineIntegration<SideEffectStore>({
  name: "sideEffects",
  access: "write",
  does: "records outside writes in the side-effect ledger",
  defaults: undefined,
  memory: () => new InMemorySideEffects(),
  notes:
    "Open records (pending, unknown) are listed by `agentbus status`; an unknown outcome waits for `agentbus send resolve` or `agentbus resolve`.",
});
