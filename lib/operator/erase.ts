import { DynamoContentStore } from "../../functions/adapters/dynamodb/content";
import { DynamoCustomerKeys } from "../../functions/adapters/dynamodb/customer-keys";
import { DynamoDueIndex } from "../../functions/adapters/dynamodb/due";
import { DynamoStateRewriter } from "../../functions/adapters/dynamodb/state-rewriter";
import type { DataSubject } from "../../functions/core/personal-data/customer-keys";
import {
  type ErasureReport,
  eraseCustomer,
  erasureRecordId,
} from "../../functions/core/personal-data/erase";
import { CONVERSATION_AGGREGATE } from "../../functions/roles/customer-support/conversation/conversation";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { operatorName, recordAction } from "./audit";
import { fromSdk } from "./from-sdk";
import { eventStoreOf, type OpsStack } from "./stack";

/**
 * `agentbus erase --customer <id>`: a customer's personal data made unreadable everywhere it is
 * stored (functions/core/personal-data/erase.ts), and the erasure recorded on the events bus as
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
  const client = fromSdk(stack.dynamodb);
  const index = new DynamoDueIndex({ client, stateTable: stack.names.tables.state });
  const rewriter = new DynamoStateRewriter({ client, stateTable: stack.names.tables.state });
  const report = await eraseCustomer(
    {
      keys: new DynamoCustomerKeys({ client, tableName: keysTable }),
      store: eventStoreOf(stack),
      states: {
        loadStates: (refs) => index.loadStates(refs),
        rewriteState: (state, data) => rewriter.rewriteState(state, data),
      },
      roles: ROLE_MODULES.map((module) => module.descriptor),
      content: new DynamoContentStore({ client, tableName: stack.names.tables.state }),
      conversationType: CONVERSATION_AGGREGATE,
    },
    subject,
    {
      at: new Date().toISOString(),
      by: operatorName(),
      ...(reason === undefined ? {} : { reason }),
    },
  );
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
