import type { ConverseCommandInput, ConverseCommandOutput } from "@aws-sdk/client-bedrock-runtime";
import type {
  BatchGetItemCommandInput,
  BatchGetItemCommandOutput,
  GetItemCommandInput,
  GetItemCommandOutput,
  PutItemCommandInput,
  PutItemCommandOutput,
  QueryCommandInput,
  QueryCommandOutput,
  TransactWriteItemsCommandInput,
  TransactWriteItemsCommandOutput,
  UpdateItemCommandInput,
  UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import type { PutEventsCommandInput, PutEventsCommandOutput } from "@aws-sdk/client-eventbridge";
import type {
  DecryptCommandInput,
  DecryptCommandOutput,
  GenerateDataKeyCommandInput,
  GenerateDataKeyCommandOutput,
} from "@aws-sdk/client-kms";
import type { PublishCommandInput, PublishCommandOutput } from "@aws-sdk/client-sns";
import type {
  ChangeMessageVisibilityBatchCommandInput,
  ChangeMessageVisibilityBatchCommandOutput,
  ChangeMessageVisibilityCommandInput,
  ChangeMessageVisibilityCommandOutput,
  GetQueueAttributesCommandInput,
  GetQueueAttributesCommandOutput,
  SendMessageBatchCommandInput,
  SendMessageBatchCommandOutput,
  SendMessageCommandInput,
  SendMessageCommandOutput,
} from "@aws-sdk/client-sqs";
import { operation } from "./client";

/**
 * Every AWS operation AgentBus functions call, typed with the SDK's own input and output types
 * (type-only imports: no SDK code enters a bundle through this module).
 */

export const GetItem = operation<GetItemCommandInput, GetItemCommandOutput>("dynamodb", "GetItem");
export const BatchGetItem = operation<BatchGetItemCommandInput, BatchGetItemCommandOutput>(
  "dynamodb",
  "BatchGetItem",
);
export const PutItem = operation<PutItemCommandInput, PutItemCommandOutput>("dynamodb", "PutItem");
export const UpdateItem = operation<UpdateItemCommandInput, UpdateItemCommandOutput>(
  "dynamodb",
  "UpdateItem",
);
export const Query = operation<QueryCommandInput, QueryCommandOutput>("dynamodb", "Query");
export const TransactWriteItems = operation<
  TransactWriteItemsCommandInput,
  TransactWriteItemsCommandOutput
>("dynamodb", "TransactWriteItems");

export const SendMessage = operation<SendMessageCommandInput, SendMessageCommandOutput>(
  "sqs",
  "SendMessage",
);
export const SendMessageBatch = operation<
  SendMessageBatchCommandInput,
  SendMessageBatchCommandOutput
>("sqs", "SendMessageBatch");
export const GetQueueAttributes = operation<
  GetQueueAttributesCommandInput,
  GetQueueAttributesCommandOutput
>("sqs", "GetQueueAttributes");
export const ChangeMessageVisibility = operation<
  ChangeMessageVisibilityCommandInput,
  ChangeMessageVisibilityCommandOutput
>("sqs", "ChangeMessageVisibility");
export const ChangeMessageVisibilityBatch = operation<
  ChangeMessageVisibilityBatchCommandInput,
  ChangeMessageVisibilityBatchCommandOutput
>("sqs", "ChangeMessageVisibilityBatch");

export const PutEvents = operation<PutEventsCommandInput, PutEventsCommandOutput>(
  "events",
  "PutEvents",
);

export const Publish = operation<PublishCommandInput, PublishCommandOutput>("sns", "Publish");

export const Converse = operation<ConverseCommandInput, ConverseCommandOutput>(
  "bedrock-runtime",
  "Converse",
);

export const GenerateDataKey = operation<GenerateDataKeyCommandInput, GenerateDataKeyCommandOutput>(
  "kms",
  "GenerateDataKey",
);
export const Decrypt = operation<DecryptCommandInput, DecryptCommandOutput>("kms", "Decrypt");

/** Every operation above, for the clients that map them to something else (./sdk-client). */
export const OPERATIONS = [
  GetItem,
  BatchGetItem,
  PutItem,
  UpdateItem,
  Query,
  TransactWriteItems,
  SendMessage,
  SendMessageBatch,
  GetQueueAttributes,
  ChangeMessageVisibility,
  ChangeMessageVisibilityBatch,
  PutEvents,
  Publish,
  Converse,
  GenerateDataKey,
  Decrypt,
] as const;
