import {
  CONTENT_ROLE_EVENTS,
  type ContentEventTypes,
  type ContentRole,
  contentEventTypes,
  WORKFLOW_KINDS,
} from "../../../schemas/events/workflow";
import * as z from "../../../schemas/zod";
import type { WorkflowDefinition } from "../../core/dag/definition";
import { DagRequestError } from "../../core/dag/errors";
import { defineWorkflow } from "../../core/dag/graph";
import { isRecord, show } from "../../core/dag/values";
import { PermanentError } from "../../core/errors";

/**
 * The content-production workflows (seed 001 §6): product data run by the DAG executor, and which
 * agent role (consumer group) carries out each role of their nodes.
 */

const CONTENT_NODES = [
  { id: "topic-selection", role: "topic-selector" },
  { id: "fact-check", role: "fact-checker" },
  { id: "writing", role: "writer" },
  { id: "review", role: "reviewer" },
] as const;

/** Quick news: topic selection, then fact check and writing in parallel, then review. */
export const quickNews: WorkflowDefinition = defineWorkflow({
  name: "content.quick-news",
  version: 1,
  nodes: [...CONTENT_NODES],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "topic-selection", to: "writing" },
    { from: "fact-check", to: "review" },
    { from: "writing", to: "review" },
  ],
});

/** Long form: topic selection, fact check, writing, review, one after the other. */
export const longForm: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 1,
  nodes: [...CONTENT_NODES],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "fact-check", to: "writing" },
    { from: "writing", to: "review" },
  ],
});

export const WorkflowKindSchema = z.enum(WORKFLOW_KINDS);
export const ContentWorkflowRequestSchema = z.object({ kind: WorkflowKindSchema });
export type ContentWorkflowRequest = z.output<typeof ContentWorkflowRequestSchema>;

/**
 * Every version of every content workflow that runs may still be on. A run keeps the name and
 * version of the definition it started with and is carried on by exactly that one
 * (`contentWorkflowAt`): to change a workflow, add its next version here (the newest of a name
 * starts new runs) and remove an old one only once no run of it is in flight.
 */
export const CONTENT_WORKFLOWS: readonly WorkflowDefinition[] = [quickNews, longForm];

/** The definition a run started with; workflow.unknown_definition (permanent) when it is gone. */
export function contentWorkflowAt(name: string, version: number): WorkflowDefinition {
  const found = CONTENT_WORKFLOWS.find((d) => d.name === name && d.version === version);
  if (found) return found;
  const known = CONTENT_WORKFLOWS.map((d) => `${d.name} v${d.version}`).join(", ");
  throw new PermanentError(
    "workflow.unknown_definition",
    `the run's workflow ${name} v${version} is no longer defined (defined: ${known})`,
    { details: { name, version } },
  );
}

/** The workflow for a content request: quick news runs fact check || writing, long form serially. */
export function contentWorkflowFor(request: ContentWorkflowRequest): WorkflowDefinition {
  const parsed = ContentWorkflowRequestSchema.safeParse(request);
  if (!parsed.success) {
    const kind = isRecord(request) ? request.kind : request;
    throw new DagRequestError(
      "dag.unknown_content_kind",
      `content request kind ${show(kind)} is not one of ${WORKFLOW_KINDS.join(", ")}`,
      { details: { kind } },
    );
  }
  const name = parsed.data.kind === "quick-news" ? quickNews.name : longForm.name;
  const versions = CONTENT_WORKFLOWS.filter((d) => d.name === name);
  return versions.reduce((newest, d) => (d.version > newest.version ? d : newest));
}

/** An agent role and the event types it is asked (and told to stop) and answers with. */
export interface ContentAgent extends ContentEventTypes {
  readonly agent: ContentRole;
}

/** DAG role (a node's `role` in the content workflows) -> the agent role that executes it. */
const AGENT_OF_DAG_ROLE = {
  "topic-selector": "topic-selection",
  "fact-checker": "fact-check",
  writer: "writing",
  reviewer: "review",
} as const satisfies Readonly<Record<string, ContentRole>>;

/** DAG role -> agent role and its event types. */
export const ROLE_TABLE: Readonly<Record<string, ContentAgent>> = Object.fromEntries(
  Object.entries(AGENT_OF_DAG_ROLE).map(([dagRole, agent]) => [
    dagRole,
    { agent, ...contentEventTypes(agent) },
  ]),
);

/** The agent that executes a DAG role; workflow.unmapped_role (permanent) if none does. */
export function agentOf(dagRole: string): ContentAgent {
  const entry = ROLE_TABLE[dagRole];
  if (!entry)
    throw new PermanentError(
      "workflow.unmapped_role",
      `no agent handles the DAG role ${dagRole} (add it to AGENT_OF_DAG_ROLE)`,
      { details: { role: dagRole } },
    );
  return entry;
}

/** The output schema of a DAG role: what its agent answers with (and an operator must supply). */
export function agentOutputSchema(dagRole: string): z.ZodMiniType<Record<string, unknown>> {
  return CONTENT_ROLE_EVENTS[agentOf(dagRole).agent].output;
}

/** `output` checked against the output schema of a DAG role: the parsed value, or each issue. */
export function checkOutput(
  dagRole: string,
  output: unknown,
): { ok: true; value: Record<string, unknown> } | { ok: false; issues: string[] } {
  const checked = agentOutputSchema(dagRole).safeParse(output);
  if (checked.success) return { ok: true, value: checked.data };
  const issues = checked.error.issues.map((i) => `${i.path.join(".") || "(output)"}: ${i.message}`);
  return { ok: false, issues };
}
