import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { KMSClient } from "@aws-sdk/client-kms";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";

/** The SDK v3 client of each service the lean AWS client speaks (functions/adapters/aws). */
export const SDK_CLIENTS = {
  dynamodb: DynamoDBClient,
  sqs: SQSClient,
  sns: SNSClient,
  events: EventBridgeClient,
  "bedrock-runtime": BedrockRuntimeClient,
  kms: KMSClient,
} as const;
