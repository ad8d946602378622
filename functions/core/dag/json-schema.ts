import * as z from "../../../schemas/zod";
import { WorkflowDefinitionSchema } from "./definition";

/**
 * The definition language as a JSON Schema (2020-12), what an editor validates a definition file
 * with: `workflow-definition.schema.json` beside this file, written by `npm run schemas`. The
 * checks a schema cannot express (one of role, wait and workflow per node; loops, cycles,
 * references, quorum sizes) are `defineWorkflow`'s. For the generator and tests only.
 */
export const WORKFLOW_DEFINITION_SCHEMA_FILE = "functions/core/dag/workflow-definition.schema.json";

export function workflowDefinitionJsonSchema(): Record<string, unknown> {
  return {
    ...(z.toJSONSchema(WorkflowDefinitionSchema, {
      io: "input",
      unrepresentable: "any",
    }) as Record<string, unknown>),
    $id: "agentbus/workflow-definition",
    title: "AgentBus workflow definition",
    description:
      "A workflow: nodes (a role's task, a map over a list, a wait, a child workflow) and edges (optionally conditional, or a loop's way back). See functions/core/dag/README.md.",
  };
}
