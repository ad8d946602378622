import { isThrottlingError } from "@smithy/core/retry";
import { TransientError } from "../../core/errors";
import { snakeCase } from "../sdk-errors";

/** A failed SendMessage(Batch) call: transient (the caller retries), coded by the AWS error. */
export function sendFailure(error: unknown, what: string): TransientError {
  const name = error instanceof Error ? error.name : "Error";
  const code = isThrottlingError(error as Parameters<typeof isThrottlingError>[0])
    ? "sqs.throttled"
    : `sqs.${snakeCase(name)}`;
  return new TransientError(
    code,
    `${what} failed: ${error instanceof Error ? error.message : String(error)}`,
    {
      cause: error,
    },
  );
}
