import { isServerError, isThrottlingError, isTransientError } from "@smithy/core/retry";
import { AgentBusError, PermanentError, TransientError } from "../../core/errors";
import { snakeCase } from "../sdk-errors";

type SdkErrorLike = Parameters<typeof isThrottlingError>[0];

/** Map an AWS error from a whole call to the error classes the pipeline acts on. */
export function dynamoFailure(error: unknown, operation: string): AgentBusError {
  if (error instanceof AgentBusError) return error;
  const e = error as SdkErrorLike & { $fault?: string };
  const name = error instanceof Error ? error.name : "Error";
  const message = `DynamoDB ${operation} failed: ${error instanceof Error ? error.message : String(error)}`;
  if (name === "TransactionConflictException")
    return new TransientError("dynamodb.transaction_conflict", message, { cause: error });
  if (isThrottlingError(e))
    return new TransientError("dynamodb.throttled", message, { cause: error });
  if (name === "ValidationException")
    return new PermanentError("dynamodb.validation", message, { cause: error });
  if (isTransientError(e) || isServerError(e) || e.$fault !== "client")
    return new TransientError("dynamodb.unavailable", message, { cause: error });
  return new PermanentError(`dynamodb.${snakeCase(name)}`, message, { cause: error });
}
