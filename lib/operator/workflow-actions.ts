import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { checkStepOutput } from "../../functions/core/steps";
import {
  type CompiledWorkflows,
  workflowCatalog,
} from "../../functions/roles/orchestrator/catalog";
import {
  currentPlanApproval,
  type OrchestratorState,
  personWaitSince,
} from "../../functions/roles/orchestrator/state";
import { currentTimers } from "../../functions/roles/orchestrator/timers";
import { MAX_RESOLVED_OUTPUT_BYTES } from "../../schemas/events/workflow-resolve";
import { operatorStepRoles } from "./groups";
import { inTenant, type OperatorCommand, tenantProblem } from "./operator-command";

/**
 * What an operator may ask of a run (re-run, reset, resolve, cancel, confirm or refuse what a
 * BLOCKED node or a plan that writes waits for, and send a signal its wait nodes wait for), checked against its stored state before anything is sent:
 * the orchestrator would refuse the same requests (with `workflow.rejected`, after the fact) or
 * ignore them. It checks again when the command arrives (the run may change in between). Shared
 * by the CLI and the console.
 */

export type RunRequest =
  | { readonly kind: "rerun"; readonly nodeId: string; readonly reason?: string }
  | { readonly kind: "reset"; readonly nodeId: string; readonly reason?: string }
  | {
      readonly kind: "resolve";
      readonly nodeId: string;
      readonly output: Record<string, unknown>;
      readonly reason?: string;
    }
  | { readonly kind: "cancel"; readonly reason?: string }
  | {
      readonly kind: "confirm";
      readonly nodeId: string;
      readonly answer: "confirmed" | "refused";
      readonly note?: string;
      /**
       * Since when the wait answered has waited, as the operator was shown it (`agentbus
       * approvals`, the console): refused when the node now waits since another time. None: the
       * wait the stored run shows when the command is checked, which the command then names.
       */
      readonly waitingSince?: string;
    }
  | {
      readonly kind: "signal";
      readonly signal: string;
      readonly payload?: Record<string, unknown>;
      readonly reason?: string;
    };

/** The event type of each request. */
export const RUN_REQUEST_TYPES = {
  rerun: "workflow.rerun.requested",
  reset: "workflow.reset.requested",
  resolve: "workflow.resolve.requested",
  cancel: "workflow.cancel.requested",
  confirm: "workflow.confirm.requested",
  signal: "workflow.signal.requested",
} as const satisfies Record<RunRequest["kind"], string>;

/**
 * Why the request cannot apply to the run as stored (undefined: it can); `tenant`, the one the
 * operator named (`--tenant`), must be the run's; `compiled`, the stack's workflows (a resolve's
 * output is checked against the schema of its node's role where the run's definition is one of
 * them).
 */
export function runRequestProblem(
  runId: string,
  state: OrchestratorState | undefined,
  request: RunRequest,
  options: { readonly tenant?: string; readonly compiled?: CompiledWorkflows } = {},
): string | undefined {
  const { tenant, compiled } = options;
  if (!state) return `no such run: ${runId}`;
  const foreign = tenantProblem(tenant, state.tenant_id, `run ${runId}`);
  if (foreign) return foreign;
  const { run } = state;
  if (request.kind === "cancel")
    return run.status === "RUNNING"
      ? undefined
      : `run ${runId} already ended ${run.status}; there is nothing to cancel`;
  if (request.kind === "signal") return signalProblem(state, runId, request.signal);
  const node = run.nodes[request.nodeId];
  if (!node)
    return `run ${runId} has no node ${request.nodeId} (its nodes: ${Object.keys(run.nodes).join(", ")})`;
  if (request.kind === "rerun") return undefined;
  if (request.kind === "confirm") return confirmProblem(state, runId, request);
  if (node.state !== "FAILED")
    return request.kind === "reset"
      ? `node ${request.nodeId} of run ${runId} is ${node.state}; only a FAILED node can be reset (use \`workflow rerun --from ${request.nodeId}\` to run it again)`
      : `node ${request.nodeId} of run ${runId} is ${node.state}; only a FAILED node can be resolved`;
  return request.kind === "resolve"
    ? outputProblem(state, request.nodeId, request.output, compiled ?? workflowCatalog())
    : undefined;
}

/**
 * Why a node cannot take a confirmation: it is not BLOCKED on one, nor does its plan wait for an
 * approval (undefined: it can). The same answer to a plan again is let through (it changes
 * nothing); the other answer is refused.
 */
function confirmProblem(
  state: OrchestratorState,
  runId: string,
  { nodeId, answer, waitingSince }: Extract<RunRequest, { kind: "confirm" }>,
): string | undefined {
  const since = personWaitSince(state, nodeId);
  if (waitingSince !== undefined && since !== undefined && since !== waitingSince)
    return `node ${nodeId} of run ${runId} no longer waits for what was answered (waiting since ${waitingSince}): it now waits since ${since} (see agentbus approvals)`;
  const plan = currentPlanApproval(state, nodeId);
  if (plan) {
    const decision = plan.decision;
    const verdict = answer === "confirmed" ? "approve" : "reject";
    return decision === undefined || decision.verdict === verdict
      ? undefined
      : `the plan of node ${nodeId} of run ${runId} was already decided: ${decision.verdict} by ${decision.by}`;
  }
  const node = state.run.nodes[nodeId];
  const lease = state.leases?.[nodeId];
  const blocked =
    node?.state === "RUNNING" && lease?.generation === node.assigned_generation
      ? lease?.blocked
      : undefined;
  if (blocked && !blocked.outcome) return undefined;
  const now = blocked?.outcome
    ? `its confirmation was already ${blocked.outcome}`
    : `it is ${node?.state}`;
  return `node ${nodeId} of run ${runId} is not BLOCKED on a confirmation (${now})`;
}

/**
 * Why a run does not take a signal now: it ended, or none of its wait nodes waits for that signal
 * (the orchestrator would record it as `signal.unmatched` and change nothing).
 */
function signalProblem(
  state: OrchestratorState,
  runId: string,
  signal: string,
): string | undefined {
  const { status } = state.run;
  if (status !== "RUNNING")
    return `run ${runId} already ended ${status}; no wait node takes a signal`;
  const waiting = currentTimers(state).flatMap(([nodeId, timer]) =>
    timer.signal === undefined ? [] : [{ nodeId, signal: timer.signal }],
  );
  if (waiting.some((w) => w.signal === signal)) return undefined;
  const list = waiting.map((w) => `${w.signal} (node ${w.nodeId})`).join(", ") || "no signal";
  return `no wait node of run ${runId} waits for signal ${JSON.stringify(signal)} now (waiting for: ${list})`;
}

/**
 * The run's definition, when it is one of the stack's workflows (`compiled`); undefined for a
 * registered one or a plan.
 */
export function knownDefinition(
  state: OrchestratorState,
  compiled: CompiledWorkflows,
): WorkflowDefinition | undefined {
  const { name, version } = state.run.workflow;
  try {
    return compiled.at(name, version);
  } catch {
    return undefined;
  }
}

/**
 * Why an output does not fit the role of the node (undefined: it fits): checked against the
 * output schema the role's entry in the table of step roles carries (./groups.ts), else only as
 * a JSON object; the orchestrator checks the same when the command arrives.
 */
export function outputProblem(
  state: OrchestratorState,
  nodeId: string,
  output: unknown,
  compiled: CompiledWorkflows,
): string | undefined {
  const size = Buffer.byteLength(JSON.stringify(output) ?? "");
  if (size > MAX_RESOLVED_OUTPUT_BYTES)
    return `the output is ${size} bytes of JSON; at most ${MAX_RESOLVED_OUTPUT_BYTES} fit in a command`;
  const def = knownDefinition(state, compiled);
  if (!def) return undefined;
  const role = def.nodes.find((n) => n.id === nodeId)?.role;
  if (role === undefined) return `node ${nodeId} has no role in workflow ${state.workflow}`;
  const checked = checkStepOutput(operatorStepRoles()[role], output);
  if (checked.ok) return undefined;
  return `the output does not fit node ${nodeId} (role ${role}): ${checked.issues.join("; ")}`;
}

/**
 * A JSON object from JSON text (a node's output, `what`), or why it is not one (a message that
 * names the input by `label` and ends "; nothing sent").
 */
export function parseOutput(
  text: string,
  label: string,
  what = "the node's output",
): Record<string, unknown> | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    return `${label} is not JSON (${(error as Error).message}); nothing sent`;
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return `${label} must be a JSON object (${what}); nothing sent`;
  return parsed as Record<string, unknown>;
}

/**
 * The command for a request on run `runId`, by `requestedBy`; in the tenant the stored `run`
 * records (so that what the command causes stays in that tenant), none before it is read. A
 * confirmation names the wait the stored run shows, when its request names none.
 */
export function runRequestCommand(
  runId: string,
  request: RunRequest,
  requestedBy: string,
  run?: OrchestratorState | Pick<OrchestratorState, "tenant_id">,
): OperatorCommand {
  const stored = run && "run" in run ? run : undefined;
  return inTenant(commandOf(runId, request, requestedBy, stored), run?.tenant_id);
}

function commandOf(
  runId: string,
  request: RunRequest,
  requestedBy: string,
  stored: OrchestratorState | undefined,
): OperatorCommand {
  const reason =
    "reason" in request && request.reason !== undefined ? { reason: request.reason } : {};
  if (request.kind === "confirm") {
    // The answer names the wait it was given to, so that it never answers a later one.
    const since = request.waitingSince ?? (stored && personWaitSince(stored, request.nodeId));
    return {
      type: RUN_REQUEST_TYPES.confirm,
      aggregate: { type: "dag_run", id: runId },
      payload: {
        run_id: runId,
        node_id: request.nodeId,
        answer: request.answer,
        requested_by: requestedBy,
        ...(request.note === undefined ? {} : { note: request.note }),
        ...(since === undefined ? {} : { waiting_since: since }),
      },
    };
  }
  if (request.kind === "signal")
    return {
      type: RUN_REQUEST_TYPES.signal,
      aggregate: { type: "dag_run", id: runId },
      payload: {
        run_id: runId,
        signal: request.signal,
        ...(request.payload === undefined ? {} : { payload: request.payload }),
        requested_by: requestedBy,
        ...reason,
      },
    };
  const payload: Record<string, unknown> =
    request.kind === "rerun" || request.kind === "reset"
      ? { run_id: runId, node_id: request.nodeId, requested_by: requestedBy, ...reason }
      : request.kind === "resolve"
        ? {
            run_id: runId,
            node_id: request.nodeId,
            output: request.output,
            requested_by: requestedBy,
            ...reason,
          }
        : { run_id: runId, requested_by: requestedBy, ...reason };
  return {
    type: RUN_REQUEST_TYPES[request.kind],
    aggregate: { type: "dag_run", id: runId },
    payload,
  };
}
