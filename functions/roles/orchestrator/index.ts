import * as z from "../../../schemas/zod";
import { AWAITING_APPROVAL, FAILED_RUNS, PARTIAL_RUNS, raiseOn } from "../../core/attention";
import { defineModule } from "../../core/role-module";
import { WORKFLOWS_ENV, WorkflowsJson, workflowsOf } from "../../core/stack-workflows";
import { registerStepRoleTypes, STEP_ROLES_ENV, StepRolesJson } from "../../core/steps";
import { queueDepth } from "../../integrations/queue-depth";
import { workflowRegistry } from "../../integrations/workflow-registry";
import { ORCHESTRATOR, orchestratorRole } from "./orchestrator";

/** The orchestrator's Lambda entry, relative to the package root (a hub handler: lib/infra/hub-handlers.ts). */
export const ORCHESTRATOR_ENTRY = "functions/roles/orchestrator/handler.ts";

/** The orchestrator's settings, from the function's environment (each optional). */
export const OrchestratorSettings = z.object({
  /** Depth of an agent's queue at which release of new work for it stops. */
  QUEUE_DEPTH_THRESHOLD: z.optional(z.coerce.number().check(z.int(), z.minimum(1))),
  /** Lease of a node whose agent has started on it, in seconds. */
  ORCHESTRATOR_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How long a request may wait in its agent's queue before its outcome counts as unknown. */
  ORCHESTRATOR_QUEUED_LEASE_SECONDS: z.optional(z.coerce.number().check(z.positive())),
  /** How many times an assignment whose lease ran out is sent again before its node fails. */
  ORCHESTRATOR_LEASE_REDELIVERIES: z.optional(z.coerce.number().check(z.int(), z.minimum(0))),
  /** How long a node may wait for its inputs when its workflow does not say, in seconds. */
  ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS: z.optional(
    z.coerce.number().check(z.int(), z.positive()),
  ),
  /** The stack's step roles (JSON, group -> commands and lease), written by the stack. */
  [STEP_ROLES_ENV]: z.optional(StepRolesJson),
  /** The stack's workflows (JSON, compressed when large), written by the stack. */
  [WORKFLOWS_ENV]: z.optional(WorkflowsJson),
});

/** A run that ended FAILED or PARTIAL needs a person, and so does a plan that writes. */
const RUN_ATTENTION = [
  raiseOn("workflow.failed", FAILED_RUNS),
  raiseOn("workflow.partial", PARTIAL_RUNS),
  raiseOn("workflow.child.approval.requested", AWAITING_APPROVAL),
];

/**
 * The orchestrator: runs each workflow's DAG, one run's events in order (order_key = run_id),
 * dispatching each node to the step role of the stack its role names (`STEP_ROLES`, which the
 * stack writes from its role modules). It runs the stack's workflows (`WORKFLOWS`, which the
 * stack writes from its `workflows`: functions/core/stack-workflows.ts) and those registered at
 * run time; it reads the step roles' queue depths (backpressure), and a
 * run that fails needs a person. Its entry is one of the hub's handlers, named from the package
 * root, so that a stack that installs AgentBus runs it too.
 */
export const orchestratorModule = defineModule({
  descriptor: ORCHESTRATOR,
  entry: ORCHESTRATOR_ENTRY,
  deployment: { delivery: "relay", needs: { orchestrates: true }, attention: RUN_ATTENTION },
  settings: OrchestratorSettings,
  uses: { queueDepth, workflowRegistry },
  build: (ports, settings) => {
    registerStepRoleTypes(settings[STEP_ROLES_ENV]);
    return orchestratorRole({
      queueDepth: ports.queueDepth,
      queueDepthThreshold: settings.QUEUE_DEPTH_THRESHOLD,
      leaseSeconds: settings.ORCHESTRATOR_LEASE_SECONDS,
      queuedLeaseSeconds: settings.ORCHESTRATOR_QUEUED_LEASE_SECONDS,
      maxLeaseRedeliveries: settings.ORCHESTRATOR_LEASE_REDELIVERIES,
      dependencyTimeoutSeconds: settings.ORCHESTRATOR_DEPENDENCY_TIMEOUT_SECONDS,
      stepRoles: settings[STEP_ROLES_ENV],
      workflows: workflowsOf(settings[WORKFLOWS_ENV]),
      registry: ports.workflowRegistry,
    });
  },
});
