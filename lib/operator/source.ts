import { QueryCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { envelopeOfItem } from "../../functions/adapters/dynamodb/deflated-json";
import { DynamoDueIndex } from "../../functions/adapters/dynamodb/due";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { EventAttr, streamKey } from "../../functions/adapters/dynamodb/tables";
import { DynamoTraceReader } from "../../functions/adapters/dynamodb/trace-reader";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { registeredDefinition } from "../../functions/core/dag/registry";
import type { Feature } from "../../functions/roles/features";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { featuresOf } from "../../functions/roles/stack-features";
import type { Envelope } from "../../schemas";
import { agentWaits } from "./agent-actions";
import { heldReplies } from "./customer-support";
import { listDeadLetters } from "./dead-letters";
import { fromSdk } from "./from-sdk";
import { rolesOfGroups } from "./groups";
import { sideEffectsByKey, summaries, summaryPage } from "./lists";
import { recordedOutcomes } from "./recorded-outcomes";
import { runView } from "./runs";
import type { OpsStack } from "./stack";
import { status, waiting } from "./status";
import { buildTrace, type TraceSources } from "./trace";
import type { ItemSummary, OpsSource, RunView, TraceView } from "./views";
import { catalogOf, compiledOf, findWorkflow, listWorkflows, registryOf } from "./workflows";

/** How many of a shared stream's newest events a trace looks at for what it made moot. */
const RELATED_WINDOW = 50;

/** The newest events of one stream (a Query in descending version order). */
async function newestOfStream(
  stack: OpsStack,
  aggregate: { type: string; id: string },
): Promise<Envelope[]> {
  const out = await stack.dynamodb.send(
    new QueryCommand({
      TableName: stack.names.tables.events,
      KeyConditionExpression: "#pk = :pk",
      ExpressionAttributeNames: { "#pk": EventAttr.pk },
      ExpressionAttributeValues: { ":pk": { S: streamKey(aggregate) } },
      ScanIndexForward: false,
      Limit: RELATED_WINDOW,
    }),
  );
  const envelopes = (out.Items ?? []).map((item) => envelopeOfItem(unmarshall(item)));
  return stack.vault ? stack.vault.openAll(envelopes) : envelopes;
}

/** What a trace of this stack reads. */
export function traceSources(stack: OpsStack): TraceSources {
  const states = new DynamoDueIndex({
    client: fromSdk(stack.dynamodb),
    stateTable: stack.names.tables.state,
  });
  const reader = new DynamoTraceReader({
    client: fromSdk(stack.dynamodb),
    tables: stack.names.tables,
    ...(stack.vault ? { vault: stack.vault } : {}),
  });
  const recorded = recordedOutcomes(rolesOfGroups(stack.groups), { states, checkpoints: reader });
  return {
    reader,
    groups: stack.groups,
    sideEffects: (keys) => sideEffectsByKey(stack, keys),
    stream: (aggregate) => newestOfStream(stack, aggregate),
    ...(recorded ? { recorded } : {}),
  };
}

export function traceOf(stack: OpsStack, id: string): Promise<TraceView | undefined> {
  return buildTrace(traceSources(stack), id);
}

/** The orchestrator's state of a run (its `dag_run` state item), or undefined when there is none. */
export async function loadRunState(
  stack: OpsStack,
  runId: string,
): Promise<OrchestratorState | undefined> {
  const store = new DynamoEventStore({
    client: fromSdk(stack.dynamodb),
    tables: { state: stack.names.tables.state, events: "", inbox: "" },
  });
  const { state } = await store.load({ state: { type: "dag_run", id: runId } });
  const data = state?.data as OrchestratorState | null | undefined;
  return data?.run ? data : undefined;
}

/** The stack's workflow at `version`; undefined when it is not one. */
function compiledDefinition(
  stack: OpsStack,
  name: string,
  version: number,
): WorkflowDefinition | undefined {
  try {
    return compiledOf(stack.outputs).at(name, version);
  } catch {
    return undefined;
  }
}

/**
 * A workflow run from the orchestrator's state item, or undefined when there is none; a run of a
 * registered workflow is drawn with the version it pinned (read from the registry), a run of the
 * stack's with its definition (from the stack's outputs).
 */
export async function runOf(stack: OpsStack, runId: string): Promise<RunView | undefined> {
  const data = await loadRunState(stack, runId);
  if (!data) return undefined;
  const scope = data.definition_scope;
  const { name, version } = data.run.workflow;
  if (scope === undefined) return runView(data, compiledDefinition(stack, name, version));
  const definition = await registeredDefinition(registryOf(stack), scope, name, version).catch(
    () => undefined,
  );
  return runView(data, definition);
}

/**
 * The operator views of a stack, as the console page reads them. The stack's features are its
 * groups' (from its outputs) as the role modules describe them: a list of a feature it lacks is
 * not read.
 */
export function opsSource(stack: OpsStack): OpsSource {
  const features = featuresOf(rolesOfGroups(stack.groups));
  const listOf = (feature: Feature, read: () => Promise<ItemSummary[]>) =>
    features.includes(feature) ? read() : Promise.resolve([]);
  return {
    features,
    async overview(tenant) {
      const [runs, conversations, tasks, w, held] = await Promise.all([
        listOf("runs", () => summaries(stack, { kind: "run" }, 20, { tenant })),
        listOf("conversations", () => summaries(stack, { kind: "conversation" }, 20, { tenant })),
        listOf("tasks", () => summaries(stack, { kind: "task" }, 20, { tenant })),
        waiting(stack, 50, tenant),
        features.includes("conversations") ? heldReplies(stack, 20, tenant) : [],
      ]);
      const heldDrafts = held.map((h) => ({
        taskId: h.task_id,
        conversationId: h.conversation_id,
        ...(h.held_reason === undefined ? {} : { reason: h.held_reason }),
        ...(h.reply_text === undefined ? {} : { draft: h.reply_text }),
      }));
      const [counts, waits] = await Promise.all([status(stack, w, tenant), agentWaits(stack, w)]);
      return {
        runs,
        conversations,
        tasks,
        waiting: w,
        status: counts,
        heldDrafts,
        agentWaits: waits,
      };
    },
    runList: (filter, after) => summaryPage(stack, { kind: "run" }, { limit: 50, filter, after }),
    trace: (id) => traceOf(stack, id),
    run: (runId) => runOf(stack, runId),
    workflows: (tenant) => listWorkflows(catalogOf(stack), tenant),
    workflow: (name, options) => findWorkflow(catalogOf(stack), name, options),
    deadLetters: (tenant) => listDeadLetters(stack, tenant === undefined ? {} : { tenant }),
  };
}
