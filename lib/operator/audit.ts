import { userInfo } from "node:os";
import { ulid } from "ulid";
import { approvalAnswered } from "../../functions/core/approval-audit";
import { startTraceparent } from "../../functions/core/trace-context";
import { registry } from "../../schemas";
import type {
  ApprovalAnsweredPayload,
  OperatorAction,
  OperatorResumePayload,
  OperatorStopPayload,
  OperatorVia,
} from "../../schemas/events/operator";
import type * as z from "../../schemas/zod";
import { callerPrincipal } from "./caller";
import { putEnvelope } from "./put-envelope";
import type { ClientConfig, OpsStack } from "./stack";

export { approvalAnswered };

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

/** The operator records the audit topic carries, by type (schemas/events/operator.ts). */
export interface OperatorRecords {
  readonly "operator.action.recorded": OperatorAction;
  readonly "operator.stopped": z.input<typeof OperatorStopPayload>;
  readonly "operator.resumed": z.input<typeof OperatorResumePayload>;
  readonly "operator.approval.answered": z.input<typeof ApprovalAnsweredPayload>;
}

export interface RecordFields {
  readonly eventId?: string;
  readonly requestedBy?: string;
  readonly at?: string;
  /** The tenant the record is about, when it is about one tenant's. */
  readonly tenantId?: string;
  /** Through what the operator acted. @default "cli" */
  readonly via?: z.output<typeof OperatorVia>;
  /** The AWS principal that acted (an ARN). @default STS's answer for `config` (./caller.ts) */
  readonly principal?: string;
}

/**
 * Put an operator's record on the bus of its topic (the audit topic's; the events bus of a stack
 * deployed before it had one), where the audit group keeps it: who (the operator's name, and the
 * AWS principal the tools act as: ./caller.ts), when, what, to what. Validated against the
 * registry before it is sent. Answers its event id.
 */
export async function recordOnAudit<T extends keyof OperatorRecords>(
  stack: OpsStack,
  config: ClientConfig,
  type: T,
  payload: Omit<OperatorRecords[T], "requested_by" | "via" | "principal">,
  record: RecordFields = {},
): Promise<string> {
  const id = record.eventId ?? ulid();
  const principal = record.principal ?? (await callerPrincipal(config));
  const envelope = {
    event_id: id,
    event_type: type,
    schema_version: 1,
    occurred_at: record.at ?? new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: `task_${id}`,
    ...(record.tenantId === undefined ? {} : { tenant_id: record.tenantId }),
    aggregate: { type: "operator_action", id: `opact_${id}`, version: 0 },
    order_key: `opact_${id}`,
    traceparent: startTraceparent(id, process.env.TRACEPARENT),
    producer: "agentbus-cli",
    payload: {
      ...payload,
      requested_by: record.requestedBy ?? operatorName(),
      ...(principal === undefined ? {} : { principal }),
      via: record.via ?? "cli",
    },
  };
  const parsed = registry.parse(envelope);
  if (!parsed.ok) throw new Error(`invalid audit record (${parsed.code}): ${parsed.message}`);
  const topic = parsed.definition.topic;
  const bus = stack.names.buses[topic] ?? stack.names.buses.events;
  if (!bus) throw new Error(`the stack has no ${topic} bus for the audit record`);
  await putEnvelope(config, bus, envelope, SOURCE);
  return id;
}

/** An operator's repair action as `operator.action.recorded` on the audit topic (recordOnAudit). */
export function recordAction(
  stack: OpsStack,
  config: ClientConfig,
  action: Omit<OperatorAction, "requested_by" | "via" | "principal">,
  record: RecordFields = {},
): Promise<string> {
  return recordOnAudit(stack, config, "operator.action.recorded", action, record);
}

/** The approval a command sent answered, on the audit topic; its event id, or undefined. */
export async function recordApproval(
  stack: OpsStack,
  envelope: Record<string, unknown>,
  via: RecordFields["via"],
): Promise<string | undefined> {
  const answered = approvalAnswered(envelope);
  if (!answered) return undefined;
  const payload = (envelope.payload ?? {}) as { requested_by?: unknown };
  const tenant = typeof envelope.tenant_id === "string" ? { tenantId: envelope.tenant_id } : {};
  return recordOnAudit(stack, stack.config, "operator.approval.answered", answered, {
    ...(typeof payload.requested_by === "string" ? { requestedBy: payload.requested_by } : {}),
    ...(via ? { via } : {}),
    ...tenant,
  });
}
