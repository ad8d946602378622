import type { DataSubject } from "../../functions/core/personal-data/customer-keys";
import { type ErasureReport, erasureRecordId } from "../../functions/core/personal-data/erase";
import { customerErasure } from "../../functions/handlers/customer-erasure";
import { operatorName, recordAction } from "./audit";
import { fromSdk } from "./from-sdk";
import type { OpsStack } from "./stack";

/**
 * `agentbus erase --customer <id>`: a customer's personal data made unreadable everywhere it is
 * stored (functions/core/personal-data/erase.ts), and the erasure recorded on the audit topic as
 * `operator.action.recorded` (`customer.erase`: who, when, which customer, how many states were
 * overwritten; never what was erased), where the audit group keeps it.
 */
export async function eraseCustomerData(
  stack: OpsStack,
  subject: DataSubject,
  reason: string | undefined,
): Promise<ErasureReport> {
  const keysTable = stack.names.tables.customerKeys;
  if (!keysTable)
    throw new Error("the stack's outputs lack CustomerKeysTableName: deploy the stack again");
  const eraser = customerErasure(fromSdk(stack.dynamodb), {
    state: stack.names.tables.state,
    events: stack.names.tables.events,
    customerKeys: keysTable,
  });
  const report = await eraser.erase(subject, {
    at: new Date().toISOString(),
    by: operatorName(),
    ...(reason === undefined ? {} : { reason }),
  });
  // Under the erasure's own id: a second run sends the same record, which the audit keeps once.
  const { erasure } = report;
  if (erasure)
    await recordAction(
      stack,
      stack.config,
      {
        action: "customer.erase",
        target: `customer/${subject.tenant}/${subject.customer}`,
        ...(erasure.reason === undefined ? {} : { reason: erasure.reason }),
        outcome: { count: report.overwritten, event_ids: [], failed: 0 },
      },
      { eventId: erasureRecordId(subject, erasure), requestedBy: erasure.by, at: erasure.at },
    );
  return report;
}
