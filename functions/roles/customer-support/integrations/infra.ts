import { RemovalPolicy } from "aws-cdk-lib";
import { AttributeType, BillingMode, Table, TableEncryption } from "aws-cdk-lib/aws-dynamodb";
import { Construct } from "constructs";
import { type IntegrationScope, retentionDaysAt } from "../../../../lib/cdk";

/**
 * The construct the customer-support application's resources (orders, payment stand-in, reply
 * topic) live under, id `Support`: the same construct path as before they were integrations, so
 * that a deployed stack keeps its tables rather than replacing them.
 */
export function supportScope(stack: Construct): Construct {
  const found = stack.node.tryFindChild("Support");
  return found instanceof Construct ? found : new Construct(stack, "Support");
}

/**
 * A table of the application (the orders, the payment stand-in): keyed by one string attribute,
 * on demand, point-in-time recovery for the stack's backup retention, AWS-managed encryption,
 * RETAIN unless the stack says otherwise.
 */
export function supportTable(scope: IntegrationScope, id: string, partitionKey: string): Table {
  return new Table(supportScope(scope.stack), id, {
    partitionKey: { name: partitionKey, type: AttributeType.STRING },
    billingMode: BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: {
      pointInTimeRecoveryEnabled: true,
      recoveryPeriodInDays: retentionDaysAt(scope.stack, "backups"),
    },
    encryption: TableEncryption.AWS_MANAGED,
    removalPolicy: scope.removalPolicy ?? RemovalPolicy.RETAIN,
  });
}
