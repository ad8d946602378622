import type { Logger } from "@aws-lambda-powertools/logger";
import type { SQSRecord } from "aws-lambda";
import { PermanentError } from "../core/errors";

/**
 * The envelope candidate a record carries (validated later by the pipeline). A group without
 * ordering has its rule deliver straight to its queue, so the body is the EventBridge event;
 * through the dispatch hop (or a pipe) it is the bare envelope. An envelope never has
 * `detail-type`, so the two cannot be mistaken for each other.
 */
export function decodeRecord(record: Pick<SQSRecord, "body">): unknown {
  let body: unknown;
  try {
    body = JSON.parse(record.body);
  } catch {
    throw new PermanentError("envelope.not_json", "message body is not JSON");
  }
  if (body && typeof body === "object" && "detail-type" in body && "detail" in body)
    return (body as { detail: unknown }).detail;
  return body;
}

/** Put the record's ids on every log line while it is handled (as far as they are strings). */
export function appendLogKeys(logger: Logger, raw: unknown): void {
  if (!raw || typeof raw !== "object") return;
  const e = raw as Record<string, unknown>;
  const keys: Record<string, string> = {};
  for (const name of ["event_id", "event_type", "correlation_id", "causation_id", "task_id"])
    if (typeof e[name] === "string") keys[name] = e[name] as string;
  logger.appendKeys(keys);
}
