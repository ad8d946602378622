import * as z from "../../../schemas/zod";
import { sqsQueueDepth } from "../../adapters/sqs/queue-depth";
import { describe } from "../../core/errors";
import { parseEnv } from "../../core/parse-env";
import { defineAdapter } from "../../handlers/integration-adapter";
import { queueDepth } from "./index";

/** Agent group -> queue URL, as a JSON object (the orchestrator's queue-depth gate). */
const QueueUrls = z.jsonText(
  z.record(z.string().check(z.minLength(1)), z.url()),
  "a JSON object of group -> queue URL",
);
const QueueDepthEnv = z.object({ AGENT_QUEUE_URLS: z.optional(QueueUrls) });

/**
 * `AGENT_QUEUE_URLS` (JSON, agent group -> queue URL) turns on the queue-depth source (SQS
 * GetQueueAttributes, cached a few seconds); without it there is none.
 */
export const queueDepthAdapter = /* @__PURE__ */ defineAdapter(
  queueDepth,
  ({ env, group, client, warn }) => {
    const { AGENT_QUEUE_URLS } = parseEnv(QueueDepthEnv, env, group);
    if (!AGENT_QUEUE_URLS) return undefined;
    return sqsQueueDepth({
      client: client("sqs"),
      queueUrls: AGENT_QUEUE_URLS,
      onError: (agent, error) =>
        warn("could not read a queue depth; counting it as 0", {
          group: agent,
          error: describe(error),
        }),
    });
  },
);
