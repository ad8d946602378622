import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  UpdateTimeToLiveCommand,
  type UpdateTimeToLiveCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { Physical } from "../template";
import type { Deployer, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/** `AWS::DynamoDB::Table` as a CreateTable request. */
export function createTableRequest(
  { logicalId, props }: ResourceInput,
  placement: Placement,
): CreateTableCommandInput {
  const stream = props.StreamSpecification as { StreamViewType: string } | undefined;
  return {
    TableName: (props.TableName as string | undefined) ?? generatedName(placement, logicalId, 255),
    KeySchema: props.KeySchema,
    AttributeDefinitions: props.AttributeDefinitions,
    // CloudFormation's default is PROVISIONED, which a table with ProvisionedThroughput is.
    BillingMode:
      (props.BillingMode as string | undefined) ??
      (props.ProvisionedThroughput ? "PROVISIONED" : "PAY_PER_REQUEST"),
    ProvisionedThroughput: props.ProvisionedThroughput,
    GlobalSecondaryIndexes: props.GlobalSecondaryIndexes,
    StreamSpecification: stream
      ? { StreamEnabled: true, StreamViewType: stream.StreamViewType }
      : undefined,
  } as CreateTableCommandInput;
}

/**
 * The table's TimeToLiveSpecification as an UpdateTimeToLive request (the emulator ignores TTL
 * given in CloudFormation); undefined when TTL is off.
 */
export function timeToLiveRequest(
  { props }: ResourceInput,
  tableName: string,
): UpdateTimeToLiveCommandInput | undefined {
  const ttl = props.TimeToLiveSpecification as
    | { AttributeName?: string; Enabled?: boolean }
    | undefined;
  if (!ttl?.Enabled || !ttl.AttributeName) return undefined;
  return {
    TableName: tableName,
    TimeToLiveSpecification: { AttributeName: ttl.AttributeName, Enabled: true },
  };
}

/** Ref is the table name; GetAtt has Arn and, with a stream, StreamArn. */
export function tablePhysical(name: string, arn: string, streamArn: string | undefined): Physical {
  return { ref: name, attributes: { Arn: arn, ...(streamArn ? { StreamArn: streamArn } : {}) } };
}

export const deployTable: Deployer = async (input, ctx) => {
  const { dynamodb } = ctx.clients;
  const request = createTableRequest(input, ctx);
  const name = request.TableName ?? "";
  const created = await dynamodb.send(new CreateTableCommand(request));
  const ttl = timeToLiveRequest(input, name);
  if (ttl) await dynamodb.send(new UpdateTimeToLiveCommand(ttl));
  const described = await dynamodb.send(new DescribeTableCommand({ TableName: name }));
  return {
    physical: tablePhysical(
      name,
      created.TableDescription?.TableArn ?? arnOf(ctx, "dynamodb", `table/${name}`),
      described.Table?.LatestStreamArn,
    ),
  };
};
