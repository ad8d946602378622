import { orchestrator } from "../roles/orchestrator";
import { type ConsumerOptions, createConsumerHandler, lambdaConsumer } from "./consumer";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const create = (options?: ConsumerOptions) => createConsumerHandler(orchestrator, options);
export const handler = lambdaConsumer(orchestrator);
