import { defineInfra } from "../../../lib/infra/integration-infra";
import { sideEffects } from "./index";

/**
 * Nothing to wire: the ledger is the hub's side-effects table, which every consumer already has
 * in its environment and may read and write (lib/infra/constructs/tables.ts).
 */
export const sideEffectsInfra = defineInfra(sideEffects, () => {});
