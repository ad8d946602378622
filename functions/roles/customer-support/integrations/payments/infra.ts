import { Grant } from "aws-cdk-lib/aws-iam";
import { defineInfra } from "../../../../../lib/cdk";
import { supportTable } from "../infra";
import { PAYMENTS_STAND_IN_KEY } from "./dynamodb-stand-in";
import { payments } from "./index";

/**
 * The payment stand-in's table (partition key `pk`): on demand, point-in-time recovery,
 * AWS-managed encryption, RETAIN unless the stack says otherwise. Each group that pays gets
 * `PAYMENTS_TABLE` and read and conditional put of its items (TransactWriteItems needs the put
 * and read actions). Output `PaymentsTableName`.
 */
export const paymentsInfra = defineInfra(payments, (scope, users) => {
  const table = supportTable(scope, "PaymentsStandIn", PAYMENTS_STAND_IN_KEY);
  for (const { group } of users) {
    group.consumer.addEnvironment("PAYMENTS_TABLE", table.tableName);
    Grant.addToPrincipal({
      grantee: group.consumer,
      actions: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:ConditionCheckItem"],
      resourceArns: [table.tableArn],
    });
  }
  scope.output(
    "PaymentsTableName",
    table.tableName,
    "DynamoDB table of the payment stand-in (refunds by idempotency key)",
  );
});
