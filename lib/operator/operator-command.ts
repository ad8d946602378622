import { ulid } from "ulid";
import { startTraceparent } from "../../functions/core/trace-context";
import { type Envelope, registry } from "../../schemas";
import { DEFAULT_TENANT } from "../../schemas/ids";
import { putEnvelope } from "./put-envelope";
import type { ClientConfig, OpsStack } from "./stack";

/**
 * An operator's command as the operator tools send it: an unsequenced envelope addressed to an
 * aggregate at version 0, under a correlation id of its own (an operator action starts a new
 * causal chain), in the tenant of the state it acts on, validated against the registry before
 * anything is sent.
 */

const PRODUCER = "agentbus-cli";

export interface OperatorCommand {
  readonly type: string;
  /** The aggregate the command addresses at version 0 (`dag_run/<run_id>`, `reply/<task_id>`). */
  readonly aggregate: { readonly type: string; readonly id: string };
  /** The task the command belongs to; default a new `task_<ulid>`. */
  readonly taskId?: string;
  /** The conversation, for a support command (it is the order key then). */
  readonly conversationId?: string;
  /** The FIFO order key; default the conversation, else the aggregate id. */
  readonly orderKey?: string;
  /**
   * The tenant of the state the command acts on, as that state records it (absent: the default
   * tenant's), so that what the command causes stays in that tenant.
   */
  readonly tenantId?: string;
  readonly payload: Record<string, unknown>;
}

/** The command in the tenant a state records (`undefined`: the default tenant, no field). */
export function inTenant<C extends OperatorCommand>(command: C, tenantId: string | undefined): C {
  if (tenantId === undefined) return command;
  return { ...command, tenantId };
}

/**
 * Why a command the operator meant for tenant `asked` (`--tenant`) may not act on `what`, whose
 * state records tenant `owner` (undefined: the default tenant); undefined when it may, or when
 * the operator named none. The command goes in `owner`'s tenant either way (`inTenant`).
 */
export function tenantProblem(
  asked: string | undefined,
  owner: string | undefined,
  what: string,
): string | undefined {
  const tenant = owner ?? DEFAULT_TENANT;
  if (asked === undefined || asked === tenant) return undefined;
  return `${what} belongs to tenant ${tenant}, not ${asked}`;
}

/** The command's envelope, validated; a problem is returned as a message, nothing is sent. */
export function operatorEnvelope(command: OperatorCommand): Record<string, unknown> | string {
  const id = ulid();
  const envelope = {
    event_id: id,
    event_type: command.type,
    // The newest version of the type: producers write what consumers read.
    schema_version: registry.find(command.type)?.schemaVersion ?? 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: command.taskId ?? `task_${id}`,
    ...(command.conversationId === undefined ? {} : { conversation_id: command.conversationId }),
    ...(command.tenantId === undefined ? {} : { tenant_id: command.tenantId }),
    aggregate: { ...command.aggregate, version: 0 },
    order_key: command.orderKey ?? command.conversationId ?? command.aggregate.id,
    // The operator's own trace when the shell carries one (OpenTelemetry's TRACEPARENT variable).
    traceparent: startTraceparent(id, process.env.TRACEPARENT),
    producer: PRODUCER,
    // Truly the first attempt: every command is a new message (a new event id), put once; an
    // operator who runs the command again sends another message, not this one again.
    attempt: 1,
    payload: command.payload,
  };
  const parsed = registry.parse(envelope);
  return parsed.ok ? envelope : `invalid ${command.type} (${parsed.code}): ${parsed.message}`;
}

/** Put a validated operator command on a commands bus. */
export async function putCommandOn(
  config: ClientConfig,
  bus: string,
  envelope: Record<string, unknown>,
): Promise<void> {
  await putEnvelope(config, bus, envelope as { event_type: unknown });
}

/** Put a validated operator command on the stack's commands bus; returns the bus name. */
export async function putCommand(
  stack: OpsStack,
  config: ClientConfig,
  envelope: Record<string, unknown>,
): Promise<string> {
  const bus = stack.names.buses.commands;
  if (!bus) throw new Error("the stack has no commands bus");
  // Its personal fields go on the bus sealed under the customer's key, as the relay's do.
  const sealed = stack.vault ? await stack.vault.seal(envelope as unknown as Envelope) : envelope;
  await putCommandOn(config, bus, sealed as Record<string, unknown>);
  return bus;
}
