import type { AwsClient } from "../adapters/aws/client";
import { DynamoContentStore } from "../adapters/dynamodb/content";
import { DynamoCustomerKeys } from "../adapters/dynamodb/customer-keys";
import { DynamoDueIndex } from "../adapters/dynamodb/due";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DynamoStateRewriter } from "../adapters/dynamodb/state-rewriter";
import { eraseCustomer } from "../core/personal-data/erase";
import type { CustomerErasure } from "../front-door/erasure";
import { CONVERSATION_AGGREGATE } from "../roles/customer-support/conversation/conversation";
import { PERSONAL_STATE_ROLES } from "../roles/personal-state";

export interface ErasureTables {
  readonly state: string;
  readonly events: string;
  readonly customerKeys: string;
}

/**
 * Erasing customers on DynamoDB (functions/core/personal-data/erase.ts), as the front door and
 * `agentbus erase` do it: the key from the customer-keys table, the conversations' streams from
 * the events table, their states and the agents' stored messages in the state table.
 */
export function customerErasure(client: AwsClient, tables: ErasureTables): CustomerErasure {
  const index = new DynamoDueIndex({ client, stateTable: tables.state });
  const rewriter = new DynamoStateRewriter({ client, stateTable: tables.state });
  const ports = {
    keys: new DynamoCustomerKeys({ client, tableName: tables.customerKeys }),
    store: new DynamoConsumerStore({
      client,
      tables: { state: tables.state, events: tables.events, inbox: "" },
    }),
    states: {
      loadStates: index.loadStates.bind(index),
      rewriteState: rewriter.rewriteState.bind(rewriter),
    },
    roles: PERSONAL_STATE_ROLES,
    conversationType: CONVERSATION_AGGREGATE,
    content: new DynamoContentStore({ client, tableName: tables.state }),
  };
  return { erase: (subject, erasure) => eraseCustomer(ports, subject, erasure) };
}
