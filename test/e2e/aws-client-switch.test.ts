import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { customerMessage } from "../../lib/dev/local/scenario/customer-support";
import { AWS_CLIENT_CONTEXT } from "../../lib/infra/constructs/bundling";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * The deploy switch `-c agentbus:awsClient=sdk` on the local stack: the stack synthesized with it
 * records the SDK client on every function (`agentbus:awsClient` metadata, which a deployed
 * stack's bundles follow), the local runtime gives the functions the SDK clients accordingly, and
 * a customer's message is answered through them as through the lean client.
 */
describe("the stack built with -c agentbus:awsClient=sdk, on the local stack", () => {
  const local = localSupportStack("sdk", { context: { [AWS_CLIENT_CONTEXT]: "sdk" } });

  it(
    "runs its functions with the SDK clients, and a message is answered",
    async () => {
      expect(local.env.deployment.functions.map((f) => f.awsClient)).toEqual(
        local.env.deployment.functions.map(() => "sdk"),
      );
      expect(local.env.functionClient).toBe("sdk");
      const conversation = `conv_${ulid()}`;
      const message = customerMessage(conversation, "cust_sdk", "Where is my order 123?");
      await local.putMessages(message);
      const view = await local.delivered(conversation, message.task_id);
      expect(view.turns[message.task_id]?.reply_text).toContain("123");
    },
    TIMEOUT * 2,
  );
});
