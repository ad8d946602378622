import * as z from "../../../schemas/zod";
import type { WorkflowDefinition } from "../../kit";
import { DagRequestError, defineWorkflow, isRecord, show } from "../../kit";
import {
  CONTENT_ROLE_EVENTS,
  CONTENT_ROLES,
  type ContentEventTypes,
  type ContentRole,
  contentEventTypes,
  MAX_CLAIMS,
  TOPIC_HINT_MAX_LENGTH,
  WORKFLOW_KINDS,
} from "./events";

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

/** Quick news v2: topic selection, then fact check and writing in parallel, then review. */
export const quickNewsV2: WorkflowDefinition = defineWorkflow({
  name: "content.quick-news",
  version: 2,
  nodes: CONTENT_NODES,
  edges: QUICK_NEWS_EDGES,
  input: CONTENT_INPUT,
});

/** Long form v2: topic selection, fact check, writing, review, one after the other. */
export const longFormV2: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 2,
  nodes: CONTENT_NODES,
  edges: LONG_FORM_EDGES,
  input: CONTENT_INPUT,
});

/** How many rounds of writing and review a draft gets before its last review stands. */
export const REVIEW_ROUNDS = 3;
/** How many of the topic's claims may fail their fact check with the article still written. */
export const CLAIMS_MAY_FAIL = 1;

/** The fact check of each claim topic selection states, in parallel, one map item a claim. */
const FACT_CHECK_EACH_CLAIM = {
  id: "fact-check",
  role: "fact-check",
  map: {
    items: { node: "topic-selection", path: "claims" },
    concurrency: 4,
    maxItems: MAX_CLAIMS,
    maxFailed: CLAIMS_MAY_FAIL,
  },
};

/** Writing and review repeat, review's notes going to the next draft, until review approves. */
const REVISE_UNTIL_APPROVED = {
  from: "review",
  to: "writing",
  loop: { until: { path: "approved", equals: true }, maxRounds: REVIEW_ROUNDS },
};

/**
 * Quick news v3: topic selection; then the fact check of each claim (a map, one claim tolerated
 * failing) and writing in parallel; then review, which sends the draft back to writing with its
 * notes until it approves (at most REVIEW_ROUNDS rounds, the last review standing). A fact check
 * over its tolerance fails, and review with it: the run ends PARTIAL.
 */
export const quickNews: WorkflowDefinition = defineWorkflow({
  name: "content.quick-news",
  version: 3,
  alias: "quick-news",
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    FACT_CHECK_EACH_CLAIM,
    { id: "writing", role: "writing" },
    { id: "review", role: "review" },
  ],
  edges: [...QUICK_NEWS_EDGES, REVISE_UNTIL_APPROVED],
  input: CONTENT_INPUT,
});

/**
 * Long form v3: topic selection; the fact check of each claim (a map); writing only when the
 * fact check passed enough claims (its output lists them); then review and writing in rounds as
 * quick news. A fact check over its tolerance is DEGRADED (output `{}`) instead of failed, so
 * writing's condition does not hold: writing and review are SKIPPED and the run ends with the
 * fact check DEGRADED and no article.
 */
export const longFormV3: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 3,
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    { ...FACT_CHECK_EACH_CLAIM, degrade: "empty" as const },
    { id: "writing", role: "writing" },
    { id: "review", role: "review" },
  ],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "fact-check", to: "writing", when: { path: "items" } },
    { from: "writing", to: "review" },
    REVISE_UNTIL_APPROVED,
  ],
  input: CONTENT_INPUT,
});

/**
 * The fact check of a list of claims, a workflow of its own that long form runs as a child:
 * its input is the parent's (the topic hint) with the claims and the sources to check them
 * against over it, and its one node fact-checks each claim (a map over the run input's `claims`,
 * one claim tolerated failing). Its output, `outputs.fact-check`, is the map's: `{ items,
 * failed }`. Over its tolerance the map fails, and the run with it (FAILED).
 */
export const factCheck: WorkflowDefinition = defineWorkflow({
  name: "content.fact-check",
  version: 1,
  nodes: [
    {
      ...FACT_CHECK_EACH_CLAIM,
      map: { ...FACT_CHECK_EACH_CLAIM.map, items: { input: "claims" } },
    },
  ],
  input: CONTENT_INPUT,
});

/**
 * Long form v4: v3 with its fact check a child run of `content.fact-check` (given topic
 * selection's claims and sources), so the condition into writing reads the child's output
 * (`{ status, outputs }`: the fact check's items under `outputs.fact-check`). A child over its
 * tolerance ends FAILED, the node DEGRADED (output `{}`): writing and review are SKIPPED, as in
 * v3. The child's version is pinned, so a run of v4 always runs the same fact check.
 */
export const longForm: WorkflowDefinition = defineWorkflow({
  name: "content.long-form",
  version: 4,
  alias: "long-form",
  nodes: [
    { id: "topic-selection", role: "topic-selection" },
    {
      id: "fact-check",
      workflow: {
        name: factCheck.name,
        version: factCheck.version,
        input: {
          claims: { node: "topic-selection", path: "claims" },
          sources: { node: "topic-selection", path: "sources" },
        },
      },
      degrade: "empty" as const,
    },
    { id: "writing", role: "writing" },
    { id: "review", role: "review" },
  ],
  edges: [
    { from: "topic-selection", to: "fact-check" },
    { from: "fact-check", to: "writing", when: { path: "outputs.fact-check.items" } },
    { from: "writing", to: "review" },
    REVISE_UNTIL_APPROVED,
  ],
  input: CONTENT_INPUT,
});

/**
 * Version 1 of a workflow, kept for the runs that started on it. It had the same graph as
 * version 2; only its nodes' roles named the agents otherwise (`topic-selector`, `fact-checker`,
 * `writer`, `reviewer`). A run stores its definition's name and version, never a node's role, so
 * a run of version 1 reads on with the agents' own names. Remove once no run of version 1 is in
 * flight.
 */
const version1Of = (def: WorkflowDefinition): WorkflowDefinition =>
  defineWorkflow({ ...def, version: 1 });

export const WorkflowKindSchema = z.enum(WORKFLOW_KINDS);
export const ContentWorkflowRequestSchema = z.object({ kind: WorkflowKindSchema });
export type ContentWorkflowRequest = z.output<typeof ContentWorkflowRequestSchema>;

/**
 * Every version of every content workflow that runs may still be on: the workflows the reference
 * stack gives its orchestrator (functions/roles/modules.ts). A run keeps the name and version of
 * the definition it started with and is carried on by exactly that one (the orchestrator's
 * catalog, functions/roles/orchestrator/catalog.ts): to change a workflow, add its next version
 * here, and remove an old one only once no run of it is in flight. A start by kind names the
 * kind, the alias the started version declares (quick news 3: the fact check of each claim beside
 * writing, review and writing in rounds; long form 4: the same fact check as a child run); runs
 * that started on an older version stay on it.
 */
export const CONTENT_WORKFLOWS: readonly WorkflowDefinition[] = [
  quickNews,
  longForm,
  factCheck,
  longFormV3,
  quickNewsV2,
  longFormV2,
  version1Of(quickNewsV2),
  version1Of(longFormV2),
];

/** The workflow a content request starts: the newest version that declares its kind as alias. */
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
  const { kind } = parsed.data;
  const started = CONTENT_WORKFLOWS.filter((d) => d.alias === kind).sort(
    (a, b) => b.version - a.version,
  )[0];
  if (!started) throw new Error(`no content workflow declares the alias ${kind}`);
  return started;
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

/**
 * The output schema of a content role (what its agent answers with, so what a person resolving
 * one of its nodes must give); undefined for any other role.
 */
export function agentOutputSchema(
  role: string,
): z.ZodMiniType<Record<string, unknown>> | undefined {
  return isContentRole(role) ? CONTENT_ROLE_EVENTS[role].answer : undefined;
}
