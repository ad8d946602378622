import { Duration, RemovalPolicy, Validations } from "aws-cdk-lib";
import { AttributeType, BillingMode, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { Grant, type IGrantable, PolicyStatement } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { Construct } from "constructs";
import { ENCRYPTION_CONTEXT_KEYS } from "../../../functions/adapters/aws/kms-key-wrapping";

/**
 * What a function does with the customers' data keys (derived from the topology: personalDataAccess
 * in ../topology.ts):
 * - `seal`: it writes events whose types declare personal fields, sealed under the customer's
 *   data key: it makes keys (kms:GenerateDataKey), unwraps them (kms:Decrypt), and reads, puts and
 *   updates their items (GetItem, PutItem, UpdateItem);
 * - `open`: it reads such events back from the event store, opened: it unwraps keys (kms:Decrypt)
 *   and reads their items (GetItem, BatchGetItem).
 */
export type PersonalDataAccess = "seal" | "open";

const ACCESS: Readonly<
  Record<PersonalDataAccess, { readonly kms: readonly string[]; readonly table: readonly string[] }>
> = {
  seal: {
    kms: ["kms:GenerateDataKey", "kms:Decrypt"],
    table: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
  },
  open: { kms: ["kms:Decrypt"], table: ["dynamodb:GetItem", "dynamodb:BatchGetItem"] },
};

/** The environment variables a function with access finds the keys by. */
export const CUSTOMER_KEYS_ENV = {
  table: "CUSTOMER_KEYS_TABLE",
  kmsKey: "CUSTOMER_KEYS_KMS_KEY",
} as const;

export interface CustomerKeysProps {
  /**
   * What happens to the table and the KMS key when they leave the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
}

/** A function the keys are wired to: its role is granted, its environment names table and key. */
export interface KeyUser extends IGrantable {
  addEnvironment(name: string, value: string): unknown;
}

/**
 * The customers' data keys: one item per tenant and customer (`pk`) in the customer-keys table,
 * holding the customer's 256-bit data key wrapped by a KMS key that never leaves KMS. The event
 * store keeps the personal fields of events sealed under it; erasing a customer deletes the item,
 * and every sealed copy is unreadable at once.
 *
 * The table has no point-in-time recovery, on purpose: a restore would bring erased keys back.
 * Losing it loses every sealed field, so it has deletion protection besides being retained.
 * The KMS key rotates yearly and has its own key policy (the account's, which lets IAM policies
 * grant it); each grant names its actions and requires the data keys' encryption context
 * (`tenant_id`, `customer_id`, nothing else).
 */
export class CustomerKeys extends Construct {
  readonly table: Table;
  readonly key: Key;

  constructor(scope: Construct, id: string, props: CustomerKeysProps = {}) {
    super(scope, id);
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    this.table = new Table(this, "Table", {
      partitionKey: { name: "pk", type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.AWS_MANAGED,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: false },
      deletionProtection: true,
      removalPolicy,
    });
    Validations.of(this.table).acknowledge({
      id: "AwsSolutions-DDB3",
      reason:
        "no point-in-time recovery on the customer-keys table: erasing a customer deletes their data key, and a restore would bring erased keys back (and with them every sealed copy of their words)",
    });
    this.key = new Key(this, "Key", {
      description: "AgentBus: wraps the customers' data keys (the customer-keys table)",
      enableKeyRotation: true,
      pendingWindow: Duration.days(30),
      removalPolicy,
    });
  }

  /** `CUSTOMER_KEYS_TABLE` and `CUSTOMER_KEYS_KMS_KEY` (the key's ARN) for a function's environment. */
  get environment(): Readonly<Record<string, string>> {
    return {
      [CUSTOMER_KEYS_ENV.table]: this.table.tableName,
      [CUSTOMER_KEYS_ENV.kmsKey]: this.key.keyArn,
    };
  }

  /**
   * What `access` needs (see PersonalDataAccess), granted to `user` with the table and key in its
   * environment; nothing for no access.
   */
  wire(user: KeyUser, access: readonly PersonalDataAccess[]): void {
    if (access.length === 0) return;
    for (const [name, value] of Object.entries(this.environment)) user.addEnvironment(name, value);
    const kms = [...new Set(access.flatMap((a) => ACCESS[a].kms))];
    const table = [...new Set(access.flatMap((a) => ACCESS[a].table))];
    this.grantKey(user, kms).combine(this.grantTable(user, table));
  }

  /** `actions` on the KMS key, for calls with the data keys' encryption context only. */
  grantKey(grantee: IGrantable, actions: readonly string[]): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: [...actions],
      resourceArns: [this.key.keyArn],
      conditions: ENCRYPTION_CONTEXT_CONDITION,
    });
  }

  /** `actions` on the customer-keys table (it has no index). */
  grantTable(grantee: IGrantable, actions: readonly string[]): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: [...actions],
      resourceArns: [this.table.tableArn],
    });
  }

  /**
   * The operator's statements: `read` opens what `agentbus trace` shows (kms:Decrypt, GetItem,
   * BatchGetItem); `erase` is what `agentbus erase` does to the keys (lib/operator/erase.ts,
   * functions/adapters/dynamodb/customer-keys.ts): it reads the customer's item and removes its
   * key with a conditional update (GetItem, UpdateItem). No KMS: erasing never unwraps. `seal` is
   * what sending a command with personal fields takes (lib/operator/operator-command.ts): a
   * function's `seal` access.
   */
  operatorStatements(part: "read" | "erase" | "seal"): PolicyStatement[] {
    if (part === "seal")
      return [
        new PolicyStatement({
          actions: [...ACCESS.seal.kms],
          resources: [this.key.keyArn],
          conditions: ENCRYPTION_CONTEXT_CONDITION,
        }),
        new PolicyStatement({ actions: [...ACCESS.seal.table], resources: [this.table.tableArn] }),
      ];
    if (part === "erase")
      return [
        new PolicyStatement({
          actions: ["dynamodb:GetItem", "dynamodb:UpdateItem"],
          resources: [this.table.tableArn],
        }),
      ];
    return [
      new PolicyStatement({
        actions: ACCESS.open.kms as string[],
        resources: [this.key.keyArn],
        conditions: ENCRYPTION_CONTEXT_CONDITION,
      }),
      new PolicyStatement({
        actions: ACCESS.open.table as string[],
        resources: [this.table.tableArn],
      }),
    ];
  }
}

/**
 * KMS calls with an encryption context of exactly the data keys' keys (`tenant_id`,
 * `customer_id`): `ForAllValues` allows no other key, `Null: false` requires a context at all
 * (`ForAllValues` alone would allow a call without one).
 */
const ENCRYPTION_CONTEXT_CONDITION = {
  "ForAllValues:StringEquals": { "kms:EncryptionContextKeys": [...ENCRYPTION_CONTEXT_KEYS] },
  Null: { "kms:EncryptionContextKeys": "false" },
};
