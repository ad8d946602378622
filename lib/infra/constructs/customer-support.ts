import { RemovalPolicy } from "aws-cdk-lib";
import { AttributeType, BillingMode, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { Grant, type IGrantable } from "aws-cdk-lib/aws-iam";
import { Alias } from "aws-cdk-lib/aws-kms";
import { Topic as SnsTopic } from "aws-cdk-lib/aws-sns";
import { Construct } from "constructs";
import { retentionDaysAt } from "../retention";

export interface SupportResourcesProps {
  /** Deployment stage, part of the reply topic's name (`agentbus-<stage>-replies.fifo`). */
  readonly stage: string;
  /**
   * What happens to the orders table when it leaves the stack.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /** Build the payment stand-in's table (a group pays refunds). @default false */
  readonly paymentsStandIn?: boolean;
}

/** Attribute names of the orders table (the rows are `OrderRecord`s of the conversation schema). */
export const ORDERS_KEY = "order_id";
/** The partition key of the payment stand-in's table (functions/adapters/dynamodb/payments-stand-in.ts). */
export const PAYMENTS_KEY = "pk";

/**
 * What the customer-support conversation needs besides the bus (seed 000 §10):
 *
 * - `orders`: the orders the order-lookup agent reads (partition key `order_id`); in a real
 *   deployment this is where the shop's order data is mirrored, locally it is seeded with sample
 *   orders. On demand, point-in-time recovery, AWS-managed encryption, RETAIN by default.
 * - `replies`: the channel the sender delivers replies through, an SNS FIFO topic: the sender
 *   publishes with the side-effect key as deduplication id, so a resend of the same key within
 *   SNS's five-minute window is dropped by SNS. Subscribe the customer-facing delivery (a chat
 *   backend's queue or endpoint) to it. Encrypted with the AWS-managed SNS key; TLS only.
 * - `payments` (when a group pays refunds): a stand-in for a payment provider, which applies each
 *   refund's idempotency key once; a team replaces it with an adapter for its provider.
 */
export class SupportResources extends Construct {
  readonly orders: Table;
  readonly replies: SnsTopic;
  /** The payment stand-in's table, when a group pays refunds. */
  readonly payments?: Table;

  constructor(scope: Construct, id: string, props: SupportResourcesProps) {
    super(scope, id);
    const backups = {
      pointInTimeRecoveryEnabled: true,
      recoveryPeriodInDays: retentionDaysAt(this, "backups"),
    };
    this.orders = new Table(this, "Orders", {
      partitionKey: { name: ORDERS_KEY, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: backups,
      encryption: TableEncryption.AWS_MANAGED,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    });
    if (props.paymentsStandIn)
      this.payments = new Table(this, "PaymentsStandIn", {
        partitionKey: { name: PAYMENTS_KEY, type: AttributeType.STRING },
        billingMode: BillingMode.PAY_PER_REQUEST,
        pointInTimeRecoverySpecification: backups,
        encryption: TableEncryption.AWS_MANAGED,
        removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
      });
    this.replies = new SnsTopic(this, "Replies", {
      topicName: `agentbus-${props.stage}-replies`,
      fifo: true,
      contentBasedDeduplication: false,
      enforceSSL: true,
      masterKey: Alias.fromAliasName(this, "SnsKey", "alias/aws/sns"),
    });
  }

  /** Cancel an order (a conditional UpdateItem on the orders table). */
  grantOrderCancel(grantee: IGrantable): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:UpdateItem"],
      resourceArns: [this.orders.tableArn],
    });
  }

  /**
   * Pay refunds through the payment stand-in: its table's name (`PAYMENTS_TABLE`), and read and
   * conditional put of its items (TransactWriteItems needs the put and read actions).
   */
  grantPayments(
    grantee: IGrantable & { addEnvironment(key: string, value: string): unknown },
  ): Grant {
    if (!this.payments)
      throw new Error("the support resources were built without the payment stand-in");
    grantee.addEnvironment("PAYMENTS_TABLE", this.payments.tableName);
    return Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:ConditionCheckItem"],
      resourceArns: [this.payments.tableArn],
    });
  }

  /** Read single orders (GetItem on the orders table, nothing else). */
  grantOrderLookup(grantee: IGrantable): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ["dynamodb:GetItem"],
      resourceArns: [this.orders.tableArn],
    });
  }

  /** Publish replies to the reply topic. */
  grantSend(grantee: IGrantable): Grant {
    return this.replies.grantPublish(grantee);
  }
}
