import {
  BedrockRuntimeClient,
  ConverseCommand,
  type ConverseCommandInput,
  type ConverseCommandOutput,
} from "@aws-sdk/client-bedrock-runtime";
import {
  BatchGetItemCommand,
  type BatchGetItemCommandInput,
  type BatchGetItemCommandOutput,
  DynamoDBClient,
  GetItemCommand,
  type GetItemCommandInput,
  type GetItemCommandOutput,
  PutItemCommand,
  type PutItemCommandInput,
  type PutItemCommandOutput,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
  type TransactWriteItemsCommandOutput,
  UpdateItemCommand,
  type UpdateItemCommandInput,
  type UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import {
  EventBridgeClient,
  PutEventsCommand,
  type PutEventsCommandInput,
  type PutEventsCommandOutput,
} from "@aws-sdk/client-eventbridge";
import {
  DecryptCommand,
  type DecryptCommandInput,
  type DecryptCommandOutput,
  GenerateDataKeyCommand,
  type GenerateDataKeyCommandInput,
  type GenerateDataKeyCommandOutput,
  KMSClient,
} from "@aws-sdk/client-kms";
import {
  PublishCommand,
  type PublishCommandInput,
  type PublishCommandOutput,
  SNSClient,
} from "@aws-sdk/client-sns";
import {
  ChangeMessageVisibilityBatchCommand,
  type ChangeMessageVisibilityBatchCommandInput,
  type ChangeMessageVisibilityBatchCommandOutput,
  ChangeMessageVisibilityCommand,
  type ChangeMessageVisibilityCommandInput,
  type ChangeMessageVisibilityCommandOutput,
  GetQueueAttributesCommand,
  type GetQueueAttributesCommandInput,
  type GetQueueAttributesCommandOutput,
  SendMessageBatchCommand,
  type SendMessageBatchCommandInput,
  type SendMessageBatchCommandOutput,
  SendMessageCommand,
  type SendMessageCommandInput,
  type SendMessageCommandOutput,
  SQSClient,
} from "@aws-sdk/client-sqs";
import {
  GetParameterCommand,
  type GetParameterCommandInput,
  type GetParameterCommandOutput,
  SSMClient,
} from "@aws-sdk/client-ssm";
import { operation } from "./client";

/**
 * Every AWS operation AgentBus functions call, typed with the SDK's own input and output types and
 * sent by its client and command classes (./sdk-client). Each is marked pure: a function's bundle
 * holds the SDK clients and commands of the operations its code sends, and no others.
 */

export const GetItem = /* @__PURE__ */ operation<GetItemCommandInput, GetItemCommandOutput>(
  "dynamodb",
  "GetItem",
  { Client: DynamoDBClient, Command: GetItemCommand },
);
export const BatchGetItem = /* @__PURE__ */ operation<
  BatchGetItemCommandInput,
  BatchGetItemCommandOutput
>("dynamodb", "BatchGetItem", { Client: DynamoDBClient, Command: BatchGetItemCommand });
export const PutItem = /* @__PURE__ */ operation<PutItemCommandInput, PutItemCommandOutput>(
  "dynamodb",
  "PutItem",
  { Client: DynamoDBClient, Command: PutItemCommand },
);
export const UpdateItem = /* @__PURE__ */ operation<
  UpdateItemCommandInput,
  UpdateItemCommandOutput
>("dynamodb", "UpdateItem", { Client: DynamoDBClient, Command: UpdateItemCommand });
export const Query = /* @__PURE__ */ operation<QueryCommandInput, QueryCommandOutput>(
  "dynamodb",
  "Query",
  { Client: DynamoDBClient, Command: QueryCommand },
);
export const TransactWriteItems = /* @__PURE__ */ operation<
  TransactWriteItemsCommandInput,
  TransactWriteItemsCommandOutput
>("dynamodb", "TransactWriteItems", { Client: DynamoDBClient, Command: TransactWriteItemsCommand });

export const SendMessage = /* @__PURE__ */ operation<
  SendMessageCommandInput,
  SendMessageCommandOutput
>("sqs", "SendMessage", { Client: SQSClient, Command: SendMessageCommand });
export const SendMessageBatch = /* @__PURE__ */ operation<
  SendMessageBatchCommandInput,
  SendMessageBatchCommandOutput
>("sqs", "SendMessageBatch", { Client: SQSClient, Command: SendMessageBatchCommand });
export const GetQueueAttributes = /* @__PURE__ */ operation<
  GetQueueAttributesCommandInput,
  GetQueueAttributesCommandOutput
>("sqs", "GetQueueAttributes", { Client: SQSClient, Command: GetQueueAttributesCommand });
export const ChangeMessageVisibility = /* @__PURE__ */ operation<
  ChangeMessageVisibilityCommandInput,
  ChangeMessageVisibilityCommandOutput
>("sqs", "ChangeMessageVisibility", { Client: SQSClient, Command: ChangeMessageVisibilityCommand });
export const ChangeMessageVisibilityBatch = /* @__PURE__ */ operation<
  ChangeMessageVisibilityBatchCommandInput,
  ChangeMessageVisibilityBatchCommandOutput
>("sqs", "ChangeMessageVisibilityBatch", {
  Client: SQSClient,
  Command: ChangeMessageVisibilityBatchCommand,
});

export const PutEvents = /* @__PURE__ */ operation<PutEventsCommandInput, PutEventsCommandOutput>(
  "events",
  "PutEvents",
  { Client: EventBridgeClient, Command: PutEventsCommand },
);

export const Publish = /* @__PURE__ */ operation<PublishCommandInput, PublishCommandOutput>(
  "sns",
  "Publish",
  { Client: SNSClient, Command: PublishCommand },
);

export const Converse = /* @__PURE__ */ operation<ConverseCommandInput, ConverseCommandOutput>(
  "bedrock-runtime",
  "Converse",
  { Client: BedrockRuntimeClient, Command: ConverseCommand },
);

export const GenerateDataKey = /* @__PURE__ */ operation<
  GenerateDataKeyCommandInput,
  GenerateDataKeyCommandOutput
>("kms", "GenerateDataKey", { Client: KMSClient, Command: GenerateDataKeyCommand });
export const Decrypt = /* @__PURE__ */ operation<DecryptCommandInput, DecryptCommandOutput>(
  "kms",
  "Decrypt",
  { Client: KMSClient, Command: DecryptCommand },
);

export const GetParameter = /* @__PURE__ */ operation<
  GetParameterCommandInput,
  GetParameterCommandOutput
>("ssm", "GetParameter", { Client: SSMClient, Command: GetParameterCommand });
