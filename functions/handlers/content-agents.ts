import type { ContentRole } from "../../schemas/events/workflow";
import * as z from "../../schemas/zod";
import type { AwsClient } from "../adapters/aws/client";
import { BedrockModel } from "../adapters/bedrock/model";
import { DynamoConsumerStore } from "../adapters/dynamodb/event-store";
import { DeterministicLocalModel } from "../adapters/local-model";
import type { ModelPort } from "../core/model";
import { createContentAgent } from "../roles/content-agents/content-agent";
import { containerAwsClient } from "./aws";
import { type ConsumerOptions, createConsumerHandler, type SqsBatchHandler } from "./consumer";
import { ConsumerEnv, parseEnv } from "./env";
import { lambdaEntry } from "./lambda-entry";

/**
 * The content agents' Lambda side (topic selection, fact check, writing, review): the shared
 * consumer with `createContentAgent({ role, model })`. The model comes from the environment:
 *
 * - `MODEL_PROVIDER=bedrock` (the default; what deployed stacks set): Bedrock Converse with
 *   `MODEL_ID` (required), through the container's AWS client.
 * - `MODEL_PROVIDER=local`: the DeterministicLocalModel, a scripted stand-in that is NOT a model
 *   (the local runtime sets it; no AWS, no network, same answers for the same request).
 *
 * Tests and the local runtime may inject `model` instead, which wins over the environment.
 *
 * `AGENT_CONFIRM_SECONDS` sets how long a BLOCKED agent run waits for its confirmation (15 minutes
 * by default).
 *
 * The agent reads the run's stream from the events table (`EVENTS_TABLE`, the consumer's) to find
 * a cancel committed behind a request it is about to work on.
 */

export const ModelEnv = z.discriminatedUnion("MODEL_PROVIDER", [
  z.object({
    MODEL_PROVIDER: z.literal("bedrock"),
    MODEL_ID: z.string().check(z.trim(), z.minLength(1)),
  }),
  z.object({ MODEL_PROVIDER: z.literal("local"), MODEL_ID: z.optional(z.string()) }),
]);
export type ModelEnv = z.output<typeof ModelEnv>;

/** `AGENT_CONFIRM_SECONDS`: how long a BLOCKED agent run waits for its confirmation. */
export const AgentEnv = z.object({
  AGENT_CONFIRM_SECONDS: z.optional(z.coerce.number().check(z.int(), z.positive())),
});

export interface AgentOptions extends ConsumerOptions {
  /** The model to use instead of the one the environment names. */
  readonly model?: ModelPort;
  /** Client for `MODEL_PROVIDER=bedrock` (default: one created for the container). */
  readonly bedrock?: AwsClient;
}

/** The model `MODEL_PROVIDER` / `MODEL_ID` name; errors name the bad variable. */
export function modelFromEnv(
  env: Record<string, string | undefined>,
  what: string,
  bedrock?: AwsClient,
): ModelPort {
  const parsed = parseEnv(
    ModelEnv,
    { ...env, MODEL_PROVIDER: env.MODEL_PROVIDER ?? "bedrock" },
    what,
  );
  if (parsed.MODEL_PROVIDER === "local") return new DeterministicLocalModel();
  if (bedrock) return new BedrockModel({ client: bedrock, modelId: parsed.MODEL_ID });
  return new BedrockModel({ client: containerAwsClient(), modelId: parsed.MODEL_ID });
}

/** The consumer handler of one content agent, its model from `options.model` or the environment. */
export function createAgentHandler(role: ContentRole, options: AgentOptions = {}): SqsBatchHandler {
  const env = options.env ?? process.env;
  const model = options.model ?? modelFromEnv(env, `agent ${role}`, options.bedrock);
  const dynamodb = options.dynamodb ?? containerAwsClient();
  const tables = parseEnv(ConsumerEnv, env, `agent ${role}`);
  const commandStream = new DynamoConsumerStore({
    client: dynamodb,
    tables: { state: tables.STATE_TABLE, events: tables.EVENTS_TABLE, inbox: tables.INBOX_TABLE },
  });
  const { AGENT_CONFIRM_SECONDS: confirmSeconds } = parseEnv(AgentEnv, env, `agent ${role}`);
  return createConsumerHandler(createContentAgent({ role, model, commandStream, confirmSeconds }), {
    ...options,
    dynamodb,
  });
}

/** `create` and the Lambda `handler` of one content agent. */
export function agentEntry(role: ContentRole) {
  return lambdaEntry((options?: AgentOptions) => createAgentHandler(role, options));
}
