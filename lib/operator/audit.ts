import { userInfo } from "node:os";
import { ulid } from "ulid";
import { startTraceparent } from "../../functions/core/trace-context";
import { registry } from "../../schemas";
import type { OperatorAction } from "../../schemas/events/operator";
import { putEnvelope } from "./put-envelope";
import type { ClientConfig, OpsStack } from "./stack";

const SOURCE = "agentbus.operator";

/** Who runs the operator tool: $AGENTBUS_OPERATOR, else the OS user (spaces and @ replaced). */
export function operatorName(): string {
  const raw = process.env.AGENTBUS_OPERATOR || safeUser();
  return raw.replace(/[\s@]+/g, "_").slice(0, 128) || "unknown";
}

function safeUser(): string {
  try {
    return userInfo().username;
  } catch {
    return "unknown";
  }
}

/**
 * Put an operator's action on the events bus as `operator.action.recorded`, where the audit group
 * keeps it (who, when, why, and what changed). Validated against the registry before it is sent.
 */
export async function recordAction(
  stack: OpsStack,
  config: ClientConfig,
  action: Omit<OperatorAction, "requested_by">,
  record: { readonly eventId?: string; readonly requestedBy?: string; readonly at?: string } = {},
): Promise<string> {
  const id = record.eventId ?? ulid();
  const envelope = {
    event_id: id,
    event_type: "operator.action.recorded",
    schema_version: 1,
    occurred_at: record.at ?? new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: `task_${id}`,
    aggregate: { type: "operator_action", id: `opact_${id}`, version: 0 },
    order_key: `opact_${id}`,
    traceparent: startTraceparent(id, process.env.TRACEPARENT),
    producer: "agentbus-cli",
    payload: { ...action, requested_by: record.requestedBy ?? operatorName() },
  };
  const parsed = registry.parse(envelope);
  if (!parsed.ok) throw new Error(`invalid audit record (${parsed.code}): ${parsed.message}`);
  const bus = stack.names.buses.events;
  if (!bus) throw new Error("the stack has no events bus for the audit record");
  await putEnvelope(config, bus, envelope, SOURCE);
  return id;
}
