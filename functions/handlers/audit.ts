import { audit } from "../roles/audit";
import { type ConsumerOptions, createConsumerHandler, lambdaConsumer } from "./consumer";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const create = (options?: ConsumerOptions) => createConsumerHandler(audit, options);
export const handler = lambdaConsumer(audit);
