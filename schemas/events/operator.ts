import { TenantId } from "../ids";
import type { EventRegistry } from "../registry";
import * as z from "../zod";
import { operatorRecord } from "./kinds";

/** Who asked: an operator's name or role (from AGENTBUS_OPERATOR or the user running the CLI). */
export const OperatorName = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(128),
    z.regex(/^[^\s@]+$/, { message: "an operator name without spaces or @" }),
  );

/** Through what an operator acted: the CLI, the console page, the front door (a service's call). */
export const OperatorVia = z.enum(["cli", "console", "front-door"]);

/**
 * The AWS principal that acted, as IAM names it (an ARN): STS GetCallerIdentity's for the
 * credentials the CLI or the console acted with, the signer's for a front door request. Absent on
 * records made before it was kept, and when the caller's identity could not be read.
 */
export const PrincipalArn = z
  .string()
  .check(
    z.maxLength(2048),
    z.regex(/^arn:[a-z-]+:[a-z0-9-]+:[^\s]*$/, { message: "an ARN (arn:<partition>:...)" }),
  );
const Principal = z.optional(PrincipalArn);

export const OperatorActionPayload = z.object({
  /** What was done, e.g. `dlq.redrive`. */
  action: z.string().check(z.regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/)),
  /** What it was done to: a consumer group, a run, a side-effect key, ... */
  target: z.string().check(z.minLength(1), z.maxLength(256)),
  requested_by: OperatorName,
  principal: Principal,
  /** Through what: absent on records made before it was kept. */
  via: z.optional(OperatorVia),
  reason: z.optional(z.string().check(z.maxLength(1000))),
  /** What changed, in numbers and ids (no message bodies: they may carry personal data). */
  outcome: z.object({
    count: z.int().check(z.nonnegative()),
    event_ids: z.array(z.string().check(z.maxLength(64))).check(z.maxLength(100)),
    failed: z.int().check(z.nonnegative()),
  }),
});
export type OperatorAction = z.output<typeof OperatorActionPayload>;

const Reason = z.optional(z.string().check(z.maxLength(1000)));
const RunRef = z.string().check(z.minLength(1), z.maxLength(256));

/** What an operator stops or resumes: a tenant, or one run (an agent run or a workflow run). */
export const StopScope = z.enum(["tenant", "run"]);

export const OperatorStopPayload = z.object({
  scope: StopScope,
  /** The tenant's id, or the run's. */
  target: RunRef,
  /** The tenant the target is in (the target itself for a tenant). */
  tenant_id: z.optional(TenantId),
  requested_by: OperatorName,
  principal: Principal,
  via: OperatorVia,
  reason: Reason,
  /** False when a stop already stood (its own record says who made it, and when). */
  recorded: z.boolean(),
  /** The workflow runs in flight whose cancel the stop sent (at most 100 ids). */
  runs_cancelled: z.array(RunRef).check(z.maxLength(100)),
});

export const OperatorResumePayload = z.object({
  scope: StopScope,
  target: RunRef,
  requested_by: OperatorName,
  principal: Principal,
  via: OperatorVia,
  reason: Reason,
  /** Who had stopped it, and when; absent when nothing stood (the resume changed nothing). */
  stopped_by: z.optional(OperatorName),
  stopped_at: z.optional(z.string().check(z.maxLength(64))),
});

export const ApprovalAnsweredPayload = z.object({
  /** What waited: an agent run, a workflow run, a held reply's task. */
  target: RunRef,
  /** The call or node answered, when the target waits on more than one. */
  step: z.optional(z.string().check(z.maxLength(256))),
  decision: z.enum(["approve", "reject"]),
  requested_by: OperatorName,
  principal: Principal,
  via: OperatorVia,
  /**
   * Why, as the command said it; absent where the command declares it personal (a held reply's
   * reason may quote the customer: the command keeps it sealed, and `command_id` names it).
   */
  reason: Reason,
  /** The command the answer was sent as. */
  command_id: z.string().check(z.maxLength(64)),
});

/**
 * The audit trail of what operators did by hand, on the audit topic (the audit group keeps every
 * one): stops and resumes, approvals answered, and every repair (`operator.action.recorded`:
 * erasures, redrives, replays, republishes, workflow registrations).
 */
export function defineOperatorEvents(registry: EventRegistry) {
  return [
    registry.define({
      ...operatorRecord,
      type: "operator.action.recorded",
      description:
        "An operator's repair action and what it changed (who, when, why): an erasure, a redrive, a replay, a republish (aggregate operator_action/<id>, version 0).",
      payload: OperatorActionPayload,
    }),
    registry.define({
      ...operatorRecord,
      type: "operator.stopped",
      description:
        "An operator stopped a tenant or a run: no model or tool call starts for it, its workflow runs in flight are cancelled, the front door refuses its new work (aggregate operator_action/<id>, version 0).",
      payload: OperatorStopPayload,
    }),
    registry.define({
      ...operatorRecord,
      type: "operator.resumed",
      description:
        "An operator lifted the stop of a tenant or a run: new work runs again (aggregate operator_action/<id>, version 0).",
      payload: OperatorResumePayload,
    }),
    registry.define({
      ...operatorRecord,
      type: "operator.approval.answered",
      description:
        "An operator approved or rejected what waited for a person: an agent run's tool call, a workflow node, a held reply (aggregate operator_action/<id>, version 0).",
      payload: ApprovalAnsweredPayload,
    }),
  ] as const;
}
