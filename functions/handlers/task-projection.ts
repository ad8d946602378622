import { taskProjection } from "../roles/task-projection";
import { type ConsumerOptions, createConsumerHandler, lambdaConsumer } from "./consumer";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const create = (options?: ConsumerOptions) => createConsumerHandler(taskProjection, options);
export const handler = lambdaConsumer(taskProjection);
