import * as z from "../../../schemas/zod";
import { sqsQueueDepth } from "../../adapters/sqs/queue-depth";
import { describe } from "../../core/errors";
import { parseEnv } from "../../core/parse-env";
import type { RolePorts } from "../../core/role-module";
import { containerAwsClient } from "../aws";
import type { PortWiring } from "../role-ports";

/** Agent group -> queue URL, as a JSON object (the orchestrator's queue-depth gate). */
const QueueUrls = z.pipe(
  z.pipe(
    z.string(),
    z.transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.issues.push({
          code: "custom",
          message: "must be a JSON object of group -> queue URL",
          input: text,
        });
        return z.NEVER;
      }
    }),
  ),
  z.record(z.string().check(z.minLength(1)), z.url()),
);
const QueueDepthEnv = z.object({ AGENT_QUEUE_URLS: z.optional(QueueUrls) });

/**
 * `needs.orchestrates`: `AGENT_QUEUE_URLS` (JSON, agent group -> queue URL) turns on the queue-depth
 * source (SQS GetQueueAttributes, cached a few seconds); without it there is none.
 */
export function queueDepthPort(wiring: PortWiring): RolePorts["queueDepth"] {
  const { AGENT_QUEUE_URLS } = parseEnv(QueueDepthEnv, wiring.env, wiring.group);
  if (!AGENT_QUEUE_URLS) return undefined;
  return sqsQueueDepth({
    client: wiring.sqs ?? containerAwsClient(),
    queueUrls: AGENT_QUEUE_URLS,
    onError: (group, error) =>
      wiring.observability.logger.warn("could not read a queue depth; counting it as 0", {
        group,
        error: describe(error),
      }),
  });
}
