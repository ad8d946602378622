import { DynamoModelControls } from "../../functions/adapters/dynamodb/model-controls";
import { type OperatorStop, stopMessage } from "../../functions/core/model-guard";
import type { OperatorVia } from "../../schemas/events/operator";
import { TenantId } from "../../schemas/ids";
import type * as z from "../../schemas/zod";
import { operatorName, recordOnAudit } from "./audit";
import { fromSdk } from "./from-sdk";
import { summaries } from "./lists";
import { operatorEnvelope, putCommand } from "./operator-command";
import { loadRunState } from "./source";
import type { OpsStack } from "./stack";
import { runRequestCommand, runRequestProblem } from "./workflow-actions";

/**
 * `agentbus stop --tenant T | --run R` and `agentbus resume` (the console's buttons too): the kill
 * switch of functions/core/model-guard.ts.
 *
 * A stop is first recorded (one conditional PutItem on the state table: a stop that already
 * stands is reported, not replaced); from then on no model call and no tool call starts for the
 * tenant or run, and an agent run that asks for one ends CANCELLED. Then the workflow runs in
 * flight are cancelled through the orchestrator's own cancel (`workflow.cancel.requested`, as
 * `agentbus workflow cancel` sends it): a tenant's RUNNING runs (its list, at most
 * MAX_RUNS_CANCELLED a stop), or the run named when it is a workflow run. Last, the stop is put
 * on the audit topic (`operator.stopped`: who, through what, why, the runs cancelled).
 *
 * A resume lifts the stop (the item marked lifted, by whom and when) and is recorded
 * (`operator.resumed`); new work runs again. Runs cancelled stay cancelled.
 */

export type StopTarget = { readonly scope: "tenant" | "run"; readonly id: string };

/** The most workflow runs one stop cancels (a stop sent again cancels the next ones). */
export const MAX_RUNS_CANCELLED = 100;

export interface StopReport {
  readonly stop: OperatorStop;
  /** False: a stop already stood (`stop` is that one). */
  readonly recorded: boolean;
  readonly runsCancelled: readonly string[];
  /** Runs whose cancel could not be sent, with why. */
  readonly runsNotCancelled: readonly { readonly runId: string; readonly problem: string }[];
  /** The audit record's event id. */
  readonly auditId: string;
}

export interface ResumeReport {
  /** The stop lifted; undefined when none stood. */
  readonly lifted?: OperatorStop;
  readonly auditId: string;
}

export interface ActBy {
  readonly reason?: string;
  readonly via: z.output<typeof OperatorVia>;
  /** @default operatorName() */
  readonly by?: string;
}

/** Why a target cannot be stopped or resumed (a bad tenant id, an empty run id), if it cannot. */
export function stopTargetProblem(target: StopTarget): string | undefined {
  if (target.scope === "tenant") {
    const parsed = TenantId.safeParse(target.id);
    return parsed.success
      ? undefined
      : `--tenant ${JSON.stringify(target.id)}: ${parsed.error.issues[0]?.message ?? "not a tenant id"}`;
  }
  if (!/^[A-Za-z0-9_:.#-]{1,256}$/.test(target.id))
    return `--run ${JSON.stringify(target.id)}: a run id is 1-256 of letters, digits and _ : . # -`;
  return undefined;
}

function controlsOf(stack: OpsStack): DynamoModelControls {
  return new DynamoModelControls({
    client: fromSdk(stack.dynamodb),
    tableName: stack.names.tables.state,
  });
}

/** Stop a tenant or a run (see top). */
export async function stopWork(
  stack: OpsStack,
  target: StopTarget,
  act: ActBy,
  now = new Date(),
): Promise<StopReport> {
  const problem = stopTargetProblem(target);
  if (problem) throw new Error(problem);
  const by = act.by ?? operatorName();
  const asked: OperatorStop = {
    ...target,
    by,
    at: now.toISOString(),
    ...(act.reason === undefined ? {} : { reason: act.reason }),
  };
  const { standing, recorded } = await controlsOf(stack).stop(asked);
  const runs = await runsToCancel(stack, target);
  const cancelled: string[] = [];
  const notCancelled: { runId: string; problem: string }[] = [];
  for (const runId of runs) {
    const refused = await cancelRun(stack, runId, by, `stopped: ${stopMessage(standing)}`);
    if (refused === undefined) cancelled.push(runId);
    else notCancelled.push({ runId, problem: refused });
  }
  const auditId = await recordOnAudit(
    stack,
    stack.config,
    "operator.stopped",
    {
      scope: target.scope,
      target: target.id,
      ...(target.scope === "tenant" ? { tenant_id: target.id } : {}),
      ...(act.reason === undefined ? {} : { reason: act.reason }),
      recorded,
      runs_cancelled: cancelled,
    },
    { requestedBy: by, via: act.via, at: asked.at, ...tenantOfTarget(target) },
  );
  return {
    stop: standing,
    recorded,
    runsCancelled: cancelled,
    runsNotCancelled: notCancelled,
    auditId,
  };
}

/** Lift the stop of a tenant or a run (see top). */
export async function resumeWork(
  stack: OpsStack,
  target: StopTarget,
  act: ActBy,
  now = new Date(),
): Promise<ResumeReport> {
  const problem = stopTargetProblem(target);
  if (problem) throw new Error(problem);
  const by = act.by ?? operatorName();
  const lifted = await controlsOf(stack).resume(target.scope, target.id, by, now);
  const auditId = await recordOnAudit(
    stack,
    stack.config,
    "operator.resumed",
    {
      scope: target.scope,
      target: target.id,
      ...(act.reason === undefined ? {} : { reason: act.reason }),
      ...(lifted ? { stopped_by: lifted.by, stopped_at: lifted.at } : {}),
    },
    { requestedBy: by, via: act.via, at: now.toISOString(), ...tenantOfTarget(target) },
  );
  return { ...(lifted ? { lifted } : {}), auditId };
}

/** The stop that stands on a tenant or run, if one does. */
export function standingStop(
  stack: OpsStack,
  target: StopTarget,
): Promise<OperatorStop | undefined> {
  return controlsOf(stack).stopOf(target.scope, target.id);
}

function tenantOfTarget(target: StopTarget): { readonly tenantId?: string } {
  return target.scope === "tenant" ? { tenantId: target.id } : {};
}

/** The workflow runs in flight a stop cancels: the tenant's RUNNING ones, or the run named. */
async function runsToCancel(stack: OpsStack, target: StopTarget): Promise<string[]> {
  if (target.scope === "run") {
    const state = await loadRunState(stack, target.id);
    return state?.run.status === "RUNNING" ? [target.id] : [];
  }
  const rows = await summaries(stack, { kind: "run" }, MAX_RUNS_CANCELLED, {
    tenant: target.id,
    status: "RUNNING",
  });
  return rows.map((row) => row.id);
}

/** Send the orchestrator's cancel of a run; undefined when sent, else why not. */
async function cancelRun(
  stack: OpsStack,
  runId: string,
  by: string,
  reason: string,
): Promise<string | undefined> {
  const request = { kind: "cancel" as const, reason: reason.slice(0, 1000) };
  const state = await loadRunState(stack, runId);
  const problem = runRequestProblem(runId, state, request);
  if (problem) return problem;
  const envelope = operatorEnvelope(runRequestCommand(runId, request, by, state));
  if (typeof envelope === "string") return envelope;
  await putCommand(stack, stack.config, envelope);
  return undefined;
}
