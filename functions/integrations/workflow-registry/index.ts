import { InMemoryWorkflowRegistry, type WorkflowRegistry } from "../../core/dag/registry";
import { defineIntegration } from "../../core/integration";

/**
 * The workflow registry (functions/core/dag/registry.ts): definitions put at run time with
 * `agentbus workflow put`, which the orchestrator starts by name and reads back at the version a
 * run pinned, and the roles each tenant's plans may name. On AWS, items of the hub's state table. Not a fold: a start runs the newest
 * version when it comes, which a later put changes.
 */
export const workflowRegistry = /* @__PURE__ */ defineIntegration<WorkflowRegistry>({
  name: "workflowRegistry",
  access: "read",
  does: "reads the workflows registered at run time",
  defaults: undefined,
  memory: () => new InMemoryWorkflowRegistry(),
  notes:
    "Definitions are items of the state table (workflow_definition#<scope>/<name>/<version>, workflow_registry#<scope> listing them, and workflow_scopes#all naming every scope); `agentbus workflow list|show` reads them. The roles a tenant's plans may name are one item, workflow_plan_policy#<tenant>, set by `agentbus workflow allow`.",
});
