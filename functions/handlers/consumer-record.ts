import type { Logger } from "@aws-lambda-powertools/logger";
import type { SQSRecord } from "aws-lambda";
import { ULID_PATTERN } from "../../schemas/ids";
import { PermanentError } from "../core/errors";
import { type Delivery, deliveryOf } from "../core/replay";
import { traceIdOf } from "../core/trace-context";

/**
 * What a record delivers: the envelope candidate (validated later by the pipeline) and, for an
 * archive replay, the replay's mark. A group without ordering has its rule deliver the whole
 * EventBridge event to its queue, and so does a pipe; through the dispatch hop the body is the bare
 * envelope, or for a replay an EventBridge event around it (functions/core/replay.ts).
 */
export function decodeDelivery(record: Pick<SQSRecord, "body">): Delivery {
  let body: unknown;
  try {
    body = JSON.parse(record.body);
  } catch {
    throw new PermanentError("envelope.not_json", "message body is not JSON");
  }
  return deliveryOf(body);
}

/** The envelope candidate a record carries (see decodeDelivery). */
export function decodeRecord(record: Pick<SQSRecord, "body">): unknown {
  return decodeDelivery(record).envelope;
}

/**
 * Put the record's ids on every log line while it is handled (as far as they are strings), its
 * lineage (user, agent run, parent run) and the id of the trace it continues (`trace_id`: its
 * traceparent's, else the one a message without a trace context starts, from its event id).
 */
export function appendLogKeys(logger: Logger, raw: unknown): void {
  if (!raw || typeof raw !== "object") return;
  const e = raw as Record<string, unknown>;
  const keys: Record<string, string> = {};
  for (const name of LOGGED_IDS) if (typeof e[name] === "string") keys[name] = e[name] as string;
  if (typeof e.event_id === "string" && ULID_PATTERN.test(e.event_id))
    keys.trace_id = traceIdOf({
      event_id: e.event_id,
      ...(typeof e.traceparent === "string" ? { traceparent: e.traceparent } : {}),
    });
  logger.appendKeys(keys);
}

const LOGGED_IDS = [
  "event_id",
  "event_type",
  "correlation_id",
  "causation_id",
  "task_id",
  "user_id",
  "run_id",
  "parent_run_id",
] as const;
