import { Grant } from "aws-cdk-lib/aws-iam";
import { defineInfra } from "../../../../../lib/cdk";
import { supportTable } from "../infra";
import { ORDERS_PARTITION_KEY } from "./dynamodb";
import { orders } from "./index";

/**
 * The orders table (partition key `order_id`): on demand, point-in-time recovery, AWS-managed
 * encryption, RETAIN unless the stack says otherwise. Each group that uses it gets `ORDERS_TABLE`
 * and GetItem on it; a use with `cancel` also the conditional UpdateItem that cancels an order.
 * Output `OrdersTableName`.
 */
export const ordersInfra = defineInfra(orders, (scope, users) => {
  const table = supportTable(scope, "Orders", ORDERS_PARTITION_KEY);
  for (const { group, options } of users) {
    group.consumer.addEnvironment("ORDERS_TABLE", table.tableName);
    const actions = options.cancel
      ? ["dynamodb:GetItem", "dynamodb:UpdateItem"]
      : ["dynamodb:GetItem"];
    Grant.addToPrincipal({ grantee: group.consumer, actions, resourceArns: [table.tableArn] });
  }
  scope.output("OrdersTableName", table.tableName, "DynamoDB table Orders");
});
