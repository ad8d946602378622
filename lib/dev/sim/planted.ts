import type { PlantedA2aBug } from "./a2a-billing";
import type { PlantedStoreBug } from "./faulty-store";
import type { PlantedMcpBug } from "./mcp-desk";
import type { PlantedChannelBug } from "./planted-channel-bug";
import type { PlantedOrderBug } from "./planted-order-bug";
import { PLANTED_REFUND_BUGS, type PlantedRefundBug } from "./planted-refund-bugs";
import type { PlantedStepBug } from "./planted-step-bug";
import { PLANTED_WORKFLOW_BUGS, type PlantedWorkflowBug } from "./planted-workflow-bugs";

/** A defect planted in a simulated world, which an invariant of the chaos runs must catch. */
export type PlantedBug =
  | PlantedStoreBug
  | PlantedA2aBug
  | PlantedChannelBug
  | PlantedMcpBug
  | PlantedOrderBug
  | PlantedRefundBug
  | PlantedStepBug
  | PlantedWorkflowBug;

const OUTSIDE_THE_STORE: readonly string[] = [
  "new-key-per-retry",
  "refund-new-key-per-retry",
  "mcp-key-per-attempt",
  "a2a-message-id-per-attempt",
  "step-record-forgotten",
  "client-seq-ignored",
  ...PLANTED_REFUND_BUGS,
  ...PLANTED_WORKFLOW_BUGS,
];

/** Whether the defect is planted in the store (./faulty-store.ts). */
export function isStoreBug(bug: PlantedBug | undefined): bug is PlantedStoreBug {
  return bug !== undefined && !OUTSIDE_THE_STORE.includes(bug);
}
