import { Alias } from "aws-cdk-lib/aws-kms";
import { Topic } from "aws-cdk-lib/aws-sns";
import { defineInfra } from "../../../../../lib/cdk";
import { supportScope } from "../infra";
import { replyChannel } from "./index";

/**
 * The reply topic, an SNS FIFO topic `agentbus-<stage>-replies.fifo` (deduplication by the
 * sender's key, not by content; the AWS-managed SNS key; TLS only). Each group that sends gets
 * `CHANNEL_PROVIDER=sns`, `CHANNEL_TOPIC_ARN` and Publish on that topic only. Output
 * `RepliesTopicArn`.
 */
export const replyChannelInfra = defineInfra(replyChannel, (scope, users) => {
  const parent = supportScope(scope.stack);
  const topic = new Topic(parent, "Replies", {
    topicName: `agentbus-${scope.stage}-replies`,
    fifo: true,
    contentBasedDeduplication: false,
    enforceSSL: true,
    masterKey: Alias.fromAliasName(parent, "SnsKey", "alias/aws/sns"),
  });
  for (const { group } of users) {
    group.consumer.addEnvironment("CHANNEL_PROVIDER", "sns");
    group.consumer.addEnvironment("CHANNEL_TOPIC_ARN", topic.topicArn);
    topic.grantPublish(group.consumer);
  }
  scope.output("RepliesTopicArn", topic.topicArn, "SNS FIFO topic the sender delivers replies to");
});
