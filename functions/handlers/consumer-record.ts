import type { Logger } from "@aws-lambda-powertools/logger";
import type { SQSRecord } from "aws-lambda";
import { ULID_PATTERN } from "../../schemas/ids";
import { PermanentError } from "../core/errors";
import { type Delivery, deliveryOf } from "../core/replay";
import { traceIdOf } from "../core/trace-context";
import type { MessageIds } from "./telemetry";

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
 * The ids of a delivered message (as far as they are there: the envelope is not validated yet):
 * the §15 diagnosis fields an operator follows a task by, on every log line while the record is
 * handled and on its span (./telemetry.ts). `attempt` is the delivery's receive count; a command
 * about one tool call (an approval's answer) names it as `tool_call_id`.
 */
export function messageIdsOf(raw: unknown, attempt: number): MessageIds & LogIds {
  const e = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const aggregate = (e.aggregate ?? {}) as Record<string, unknown>;
  const payload = (e.payload ?? {}) as Record<string, unknown>;
  const text = (value: unknown) => (typeof value === "string" ? value : undefined);
  const ids = {
    event_id: text(e.event_id),
    event_type: text(e.event_type),
    correlation_id: text(e.correlation_id),
    causation_id: text(e.causation_id),
    task_id: text(e.task_id),
    aggregate_id: text(aggregate.id),
    aggregate_version: Number.isInteger(aggregate.version)
      ? (aggregate.version as number)
      : undefined,
    tool_call_id: text(payload.tool_call_id),
    attempt,
  };
  return Object.fromEntries(
    Object.entries(ids).filter(([, value]) => value !== undefined),
  ) as unknown as MessageIds & LogIds;
}

/** Ids a log line carries beside the span's. */
interface LogIds {
  readonly tool_call_id?: string;
}

/**
 * Puts the record's ids (messageIdsOf) on every log line until `resetKeys`, with its lineage
 * (lineageOf); returns the ids.
 */
export function appendLogKeys(logger: Logger, raw: unknown, attempt: number): MessageIds {
  const ids = messageIdsOf(raw, attempt);
  logger.appendKeys({ ...ids, ...lineageOf(raw) });
  return ids;
}

/**
 * A record's lineage (user, agent run, parent run; as far as they are strings) and the id of the
 * trace it continues (`trace_id`: its traceparent's, else the one a message without a trace
 * context starts, from its event id).
 */
function lineageOf(raw: unknown): Record<string, string> {
  if (!raw || typeof raw !== "object") return {};
  const e = raw as Record<string, unknown>;
  const keys: Record<string, string> = {};
  for (const name of LINEAGE_IDS) if (typeof e[name] === "string") keys[name] = e[name] as string;
  if (typeof e.event_id === "string" && ULID_PATTERN.test(e.event_id))
    keys.trace_id = traceIdOf({
      event_id: e.event_id,
      ...(typeof e.traceparent === "string" ? { traceparent: e.traceparent } : {}),
    });
  return keys;
}

const LINEAGE_IDS = ["user_id", "run_id", "parent_run_id"] as const;
