import {
  CONTENT_ROLE_EVENTS,
  CONTENT_ROLES,
  type ContentEventTypes,
  type ContentRole,
  contentEventTypes,
  TOPIC_HINT_MAX_LENGTH,
  WORKFLOW_KINDS,
} from "../../../schemas/events/workflow";
import * as z from "../../../schemas/zod";
import type { WorkflowDefinition } from "../../kit";
import { DagRequestError, defineWorkflow, isRecord, show } from "../../kit";

/**
 * The content-production workflows (seed 001 §6): product data run by the DAG executor. A node's
 * `role` is the content agent (consumer group) that carries it out: one name per agent.
 */

/** Each node is carried out by the content agent of the same name. */
const CONTENT_NODES = CONTENT_ROLES.map((role) => ({ id: role, role }));

/** What a content run starts from (ContentRequest): a topic hint; other fields travel along. */
const CONTENT_INPUT = {
  type: "object" as const,
  properties: {
    topic_hint: {
      type: "string" as const,
      title: "Topic hint",
      description: "What the article is to be about: topic selection picks the topic from it.",
      minLength: 1,
      maxLength: TOPIC_HINT_MAX_LENGTH,
    },
  },
  required: ["topic_hint"],
};

const QUICK_NEWS_EDGES = [
  { from: "topic-selection", to: "fact-check" },
  { from: "topic-selection", to: "writing" },
  { from: "fact-check", to: "review" },
  { from: "writing", to: "review" },
];
const LONG_FORM_EDGES = [
  { from: "topic-selection", to: "fact-check" },
  { from: "fact-check", to: "writing" },
  { from: "writing", to: "review" },
];

/** Quick news: topic selection, then fact check and writing in parallel, then review. */
export const quickNews: WorkflowDefinition = defineWorkflow({
  name: "content.quick-news",
  version: 2,
  nodes: CONTENT_NODES,
  edges: QUICK_NEWS_EDGES,
  input: CONTENT_INPUT,
});

/** Long form: topic selection, fact check, writing, review, one after the other. */
export const longForm: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 2,
  nodes: CONTENT_NODES,
  edges: LONG_FORM_EDGES,
  input: CONTENT_INPUT,
});

/**
 * Version 1 of a workflow, kept for the runs that started on it. It had the same graph; only its
 * nodes' roles named the agents otherwise (`topic-selector`, `fact-checker`, `writer`,
 * `reviewer`). A run stores its definition's name and version, never a node's role, so a run of
 * version 1 reads on with the agents' own names. Remove once no run of version 1 is in flight.
 */
const version1Of = (def: WorkflowDefinition): WorkflowDefinition =>
  defineWorkflow({ ...def, version: 1 });

export const WorkflowKindSchema = z.enum(WORKFLOW_KINDS);
export const ContentWorkflowRequestSchema = z.object({ kind: WorkflowKindSchema });
export type ContentWorkflowRequest = z.output<typeof ContentWorkflowRequestSchema>;

/**
 * Every version of every content workflow that runs may still be on. A run keeps the name and
 * version of the definition it started with and is carried on by exactly that one
 * (the orchestrator's catalog, functions/roles/orchestrator/catalog.ts): to change a workflow, add its next version here (the newest of a name
 * starts new runs) and remove an old one only once no run of it is in flight.
 */
export const CONTENT_WORKFLOWS: readonly WorkflowDefinition[] = [
  quickNews,
  longForm,
  version1Of(quickNews),
  version1Of(longForm),
];

/** The workflow for a content request: quick news runs fact check || writing, long form serially. */
export function contentWorkflowFor(request: { readonly kind: unknown }): WorkflowDefinition {
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

/** A content agent and the event types it is asked (and told to stop) and answers with. */
export interface ContentAgent extends ContentEventTypes {
  readonly agent: ContentRole;
}

/** Each content agent and its event types, by name. */
export const CONTENT_AGENTS: readonly ContentAgent[] = CONTENT_ROLES.map((agent) => ({
  agent,
  ...contentEventTypes(agent),
}));

const isContentRole = (role: string): role is ContentRole =>
  (CONTENT_ROLES as readonly string[]).includes(role);

/** The output schema of a content role (what its agent answers with); undefined for any other role. */
export function agentOutputSchema(
  role: string,
): z.ZodMiniType<Record<string, unknown>> | undefined {
  return isContentRole(role) ? CONTENT_ROLE_EVENTS[role].output : undefined;
}

/**
 * `output` checked against the output schema of a node's role: the parsed value, or each issue.
 * For a role whose schema is not known here (a step role of an application, which checks its own
 * answers), only that it is a JSON object.
 */
export function checkOutput(
  role: string,
  output: unknown,
): { ok: true; value: Record<string, unknown> } | { ok: false; issues: string[] } {
  const checked = (agentOutputSchema(role) ?? AnyOutput).safeParse(output);
  if (checked.success) return { ok: true, value: checked.data };
  const issues = z.issueLines(checked.error, "(output)");
  return { ok: false, issues };
}

const AnyOutput = z.record(z.string(), z.unknown());
