import { Duration } from "aws-cdk-lib";
import { PolicyStatement } from "aws-cdk-lib/aws-iam";
import { FilterCriteria, FilterRule, StartingPosition } from "aws-cdk-lib/aws-lambda";
import { DynamoEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import { Construct } from "constructs";
import { HUB_HANDLERS } from "../hub-handlers";
import { AgentBusFunction } from "./function";
import type { AgentBusTables } from "./tables";

export interface A2aPushDeliveryProps {
  readonly tables: AgentBusTables;
}

/**
 * The A2A tasks' push notifications (functions/handlers/a2a-push.ts), for a stack that offers
 * agents over A2A: a function on the events table's stream (its inserts, in batches of 100 within
 * a second), that reads the runs of A2A tasks with push configs and each task's record on the state
 * table, and writes the record (what it delivered, what it gave up on). Its only grants: the
 * stream, and GetItem / PutItem on the state table's `dag_run#*` (read) and `a2a_push#*` items.
 * It is the stream's third reader (with the relay and a stream-delivered group, where the stack
 * has one): DynamoDB advises two a shard, and a throttled read is retried by Lambda, at some
 * latency. A batch fails only when a table does (a webhook's failure is recorded, not thrown), and
 * is retried then, at most 3 times within 6 hours.
 */
export class A2aPushDelivery extends Construct {
  readonly function: AgentBusFunction;

  constructor(scope: Construct, id: string, props: A2aPushDeliveryProps) {
    super(scope, id);
    const { tables } = props;
    this.function = new AgentBusFunction(this, "Function", {
      kind: "a2a-push",
      entry: HUB_HANDLERS["a2a-push"],
      serviceName: "a2a-push",
      description: "AgentBus A2A push notifications: events table stream -> task webhooks",
      // Three attempts of at most 5 s each, with 1 s and 2 s between them, for the slowest run.
      timeout: Duration.seconds(60),
      environment: { STATE_TABLE: tables.state.tableName },
      unscopedActions: {
        "dynamodb:ListStreams":
          "the DynamoDB stream event source needs it; it lists the streams of the account rather than acting on one stream, so it is granted on * (grantStreamRead)",
      },
    });
    this.function.addEventSource(
      new DynamoEventSource(tables.events, {
        startingPosition: StartingPosition.LATEST,
        batchSize: 100,
        maxBatchingWindow: Duration.seconds(1),
        bisectBatchOnError: true,
        retryAttempts: 3,
        maxRecordAge: Duration.hours(6),
        filters: [FilterCriteria.filter({ eventName: FilterRule.isEqual("INSERT") })],
      }),
    );
    tables.grantEventsStream(this.function);
    const items = (actions: string[], keys: string[]) =>
      new PolicyStatement({
        actions,
        resources: [tables.state.tableArn],
        conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": keys } },
      });
    this.function.addToRolePolicy(items(["dynamodb:GetItem"], ["dag_run#*", "a2a_push#*"]));
    this.function.addToRolePolicy(items(["dynamodb:PutItem"], ["a2a_push#*"]));
  }
}
